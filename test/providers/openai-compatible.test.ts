import { afterEach, describe, expect, test } from 'bun:test'
import { OpenAICompatibleProvider, type OpenAICompatibleOptions } from '../../src/providers/openai-compatible/provider'
import { ReplayedEvents } from '../../src/providers/replay'
import type { ChatEvent } from '../../src/inference/canonical'
import { toUpstream } from '../../src/providers/openai-compatible/to-upstream'
import { FakeUpstream } from '../support/fake-upstream'
import { runConformance } from './conformance'
import { assertEventGrammar, collect, rejection, summarize } from './events'
import { providerCall, providerConfig, testRequest, weatherTool } from './fixtures'
import { chunk, DONE, frame, openAIWire } from './openai-wire'

const KEY = 'sk-test-0123456789abcdef'
const MODEL = 'upstream-model'

runConformance('openai-compatible', async timeouts => {
  const upstream = await FakeUpstream.start()
  const provider = new OpenAICompatibleProvider(providerConfig({ type: 'openai-compatible', baseUrl: `${upstream.url}/v1`, apiKey: KEY, ...timeouts }))
  return { provider, upstream, model: MODEL, apiKey: KEY, wire: openAIWire, close: () => upstream.close() }
})

describe('openai-compatible over HTTP', () => {
  let upstream: FakeUpstream
  afterEach(async () => {
    await upstream?.close()
  })
  const make = async (overrides: { apiKey?: string; baseUrl?: string; idleTimeoutMs?: number; options?: OpenAICompatibleOptions } = {}) => {
    upstream = await FakeUpstream.start()
    const config = providerConfig({
      type: 'openai-compatible',
      id: 'vllm-a',
      baseUrl: overrides.baseUrl ?? `${upstream.url}/v1/`,
      apiKey: 'apiKey' in overrides ? overrides.apiKey : KEY,
      ...(overrides.idleTimeoutMs !== undefined ? { idleTimeoutMs: overrides.idleTimeoutMs } : {}),
    })
    return new OpenAICompatibleProvider(config, overrides.options)
  }
  const simpleStream = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'ok' }) + chunk({}, 'stop') + DONE

  test('POSTs exactly the mapped body to {base_url}/chat/completions with the configured key and nothing of the client', async () => {
    const provider = await make()
    expect(provider.id).toBe('openai-compatible:vllm-a')
    upstream.enqueue({ kind: 'sse', body: simpleStream })
    const request = testRequest({ tools: [weatherTool], sampling: { temperature: 0.2, maxOutputTokens: 64 } }, 'Weather in Paris?')
    await collect(await provider.stream(providerCall(request, MODEL)))
    const received = upstream.onlyRequest()
    expect(received.path).toBe('/v1/chat/completions')
    expect(received.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(received.headers['content-type']).toBe('application/json')
    expect(received.headers.accept).toBe('text/event-stream')
    expect(received.body).toEqual(toUpstream(request, MODEL))
    expect(received.body.user).toBeUndefined()
    expect(received.body.stream_options).toEqual({ include_usage: true })
  })

  test('no Authorization header when the provider has no key (a local Ollama or llama.cpp)', async () => {
    const provider = await make({ apiKey: undefined })
    upstream.enqueue({ kind: 'sse', body: simpleStream })
    await collect(await provider.stream(providerCall(testRequest(), MODEL)))
    expect(upstream.onlyRequest().headers.authorization).toBeUndefined()
  })

  test('the configured output-cap field is used', async () => {
    const provider = await make({ options: { maxTokensField: 'max_completion_tokens' } })
    upstream.enqueue({ kind: 'sse', body: simpleStream })
    await collect(await provider.stream(providerCall(testRequest({ sampling: { maxOutputTokens: 99 } }), MODEL)))
    expect(upstream.onlyRequest().body.max_completion_tokens).toBe(99)
    expect(upstream.onlyRequest().body.max_tokens).toBeUndefined()
  })

  test('a file part that was not extracted is refused before anything is sent', async () => {
    const provider = await make()
    const request = testRequest({ messages: [{ role: 'user', parts: [{ type: 'file', mediaType: 'application/pdf', data: new Uint8Array([37, 80]) }] }] })
    const error = await rejection(provider.stream(providerCall(request, MODEL)))
    expect(error.kind).toBe('bad-request')
    expect(upstream.requests).toHaveLength(0)
  })

  test('connection refused → connection (retryable)', async () => {
    const closed = await FakeUpstream.start()
    const url = closed.url
    await closed.close()
    const provider = await make({ baseUrl: url })
    const error = await rejection(provider.stream(providerCall(testRequest(), MODEL)))
    expect(error.kind).toBe('connection')
    expect(error.retryable).toBe(true)
  })

  test('Retry-After as an HTTP date and OpenAI retry-after-ms', async () => {
    const provider = await make()
    const later = new Date(Date.now() + 120_000).toUTCString()
    upstream.enqueue({ kind: 'json', status: 429, body: { error: { message: 'slow down' } }, headers: { 'retry-after': later } })
    upstream.enqueue({ kind: 'json', status: 429, body: { error: { message: 'slow down' } }, headers: { 'retry-after-ms': '1500', 'retry-after': '2' } })
    const byDate = await rejection(provider.stream(providerCall(testRequest(), MODEL)))
    expect(byDate.details.retryAfterMs).toBeGreaterThan(100_000)
    expect(byDate.details.retryAfterMs).toBeLessThanOrEqual(120_000)
    expect(byDate.message).toContain('slow down')
    const byMilliseconds = await rejection(provider.stream(providerCall(testRequest(), MODEL)))
    expect(byMilliseconds.details.retryAfterMs).toBe(1_500)
  })

  test('a redirect is not followed (the key stays home) and fails as server', async () => {
    const provider = await make()
    upstream.enqueue({ kind: 'text', status: 307, body: '', headers: { location: 'http://elsewhere.example/v1/chat/completions' } })
    const error = await rejection(provider.stream(providerCall(testRequest(), MODEL)))
    expect(error.kind).toBe('server')
    expect(error.status).toBe(307)
    expect(upstream.requests).toHaveLength(1)
  })

  test('a 2xx JSON error object (no stream) rejects before any event', async () => {
    const provider = await make()
    upstream.enqueue({ kind: 'json', body: { error: { message: 'model is loading', type: 'server_error' } } })
    const error = await rejection(provider.stream(providerCall(testRequest(), MODEL)))
    expect(error.kind).toBe('server')
    expect(error.message).toContain('model is loading')
  })

  test('a 2xx JSON object that is no completion (no choice) rejects before any event, asked for JSON or not', async () => {
    const provider = await make()
    const noAnswers = [{ status: 'queued' }, { id: 'chatcmpl-x', object: 'chat.completion', choices: [] }, { choices: [{ index: 1, message: { content: 'the second choice only' } }] }]
    for (const collect of [false, true]) {
      for (const body of noAnswers) {
        upstream.enqueue({ kind: 'json', body })
        const error = await rejection(provider.stream({ ...providerCall(testRequest(), MODEL), collect }))
        expect(error.kind).toBe('server')
        expect(error.message).toContain('without a completion')
      }
    }
    // An empty completion is still one: the model answered nothing.
    upstream.enqueue({ kind: 'json', body: { choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'stop' }] } })
    expect((await collect(await provider.stream(providerCall(testRequest(), MODEL)))).at(-1)?.type).toBe('finish')
  })

  test('a backend that ignores stream:true and answers one JSON completion still yields the same events', async () => {
    const provider = await make()
    upstream.enqueue({
      kind: 'json',
      body: {
        id: 'chatcmpl-json',
        object: 'chat.completion',
        created: 1_700_000_000,
        model: 'served-model',
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: 'Checking.',
              reasoning_content: 'Need weather.',
              tool_calls: [{ id: 'call_j', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lyon","unit":"celsius"}' } }],
            },
            finish_reason: 'tool_calls',
          },
        ],
        usage: { prompt_tokens: 30, completion_tokens: 12, completion_tokens_details: { reasoning_tokens: 4 } },
      },
    })
    const events = await collect(await provider.stream(providerCall(testRequest({ tools: [weatherTool] }), MODEL)))
    assertEventGrammar(events)
    const summary = summarize(events)
    expect(summary.start).toMatchObject({ id: 'chatcmpl-json', model: 'served-model', createdAt: 1_700_000_000_000 })
    expect(summary.blocks.map(block => block.kind)).toEqual(['reasoning', 'text', 'tool-call'])
    expect(summary.reasoning).toBe('Need weather.')
    expect(summary.text).toBe('Checking.')
    expect(summary.toolCalls).toEqual([{ block: 2, callId: 'call_j', name: 'get_weather', arguments: '{"city":"Lyon","unit":"celsius"}' }])
    expect(summary.finish).toEqual({ reason: 'tool-calls', usage: { inputTokens: 30, outputTokens: 12, reasoningTokens: 4, webSearchRequests: 0, webFetchRequests: 0 } })
  })

  test('keep-alive comments and CRLF framing are ignored', async () => {
    const provider = await make()
    const body = (': keep-alive\n\n' + chunk({ content: 'a' }) + ': ping\n\n' + chunk({ content: 'b' }, 'stop') + DONE).replaceAll('\n', '\r\n')
    upstream.enqueue({ kind: 'sse', body, chunkBytes: 3 })
    const summary = summarize(await collect(await provider.stream(providerCall(testRequest(), MODEL))))
    expect(summary.text).toBe('ab')
    expect(summary.finish?.reason).toBe('stop')
  })

  test('a slow consumer is not upstream silence: the idle deadline only runs while a read waits', async () => {
    // About a timeout, so real time is involved: after the first delta the consumer pauses for
    // 3× the idle deadline without reading, and only then lets the upstream send the rest.
    // Counting that pause as silence would abort the call; the read afterwards is prompt.
    const provider = await make({ idleTimeoutMs: 100 })
    let release!: () => void
    const gate = new Promise<void>(resolve => (release = resolve))
    upstream.enqueue({ kind: 'sse', body: [chunk({ content: 'one ' }), gate, chunk({ content: 'two' }, 'stop') + DONE] })
    const events = []
    for await (const event of await provider.stream(providerCall(testRequest(), MODEL))) {
      events.push(event)
      if (event.type === 'text-delta' && event.delta === 'one ') {
        await Bun.sleep(300)
        release()
      }
    }
    assertEventGrammar(events)
    const summary = summarize(events)
    expect(summary.error).toBeUndefined()
    expect(summary.text).toBe('one two')
  })

  // Past [DONE] only the body's last bytes can follow: they are read (drain-rest.ts), so the
  // keep-alive connection goes back to fetch's pool instead of being torn down.
  test('the body ending after [DONE] is read to its end: the upstream sees no disconnect', async () => {
    const provider = await make()
    let release!: () => void
    const gate = new Promise<void>(resolve => (release = resolve))
    upstream.enqueue({ kind: 'sse', body: [simpleStream, gate] }, { kind: 'sse', body: simpleStream })
    expect(summarize(await collect(await provider.stream(providerCall(testRequest(), MODEL)))).finish?.reason).toBe('stop')
    // The first body's end is still held back. A whole second call meanwhile: had the first
    // connection been aborted, the upstream would have seen it go by the time this one is answered.
    expect(summarize(await collect(await provider.stream(providerCall(testRequest(), MODEL)))).finish?.reason).toBe('stop')
    expect(upstream.requests).toHaveLength(2)
    expect(upstream.requests[0]!.isDisconnected()).toBe(false)
    release()
  })
})

/** Consecutive `passthrough` events as one (their grouping follows the network reads). */
function mergePassthrough(events: ChatEvent[]): ChatEvent[] {
  const merged: ChatEvent[] = []
  for (const event of events) {
    const last = merged.at(-1)
    if (event.type !== 'passthrough' || event.format !== 'chat-completions' || last?.type !== 'passthrough' || last.format !== 'chat-completions') {
      merged.push(event.type === 'passthrough' && event.format === 'chat-completions' ? { ...event, deltas: [...event.deltas], toolBlocks: event.toolBlocks && [...event.toolBlocks] } : event)
      continue
    }
    last.deltas.push(...event.deltas)
    last.textBytes += event.textBytes
    last.reasoningBytes += event.reasoningBytes
    last.toolBytes += event.toolBytes
    if (event.toolBlocks) last.toolBlocks = [...(last.toolBlocks ?? []), ...event.toolBlocks]
  }
  return merged
}

// A stream whose length the upstream declared (a `text` script: Content-Length) is read whole
// and translated in one pass; a chunked one (an `sse` script) as it arrives. The events must
// not tell them apart.
describe('openai-compatible: a declared-length stream is read whole', () => {
  let upstream: FakeUpstream
  afterEach(async () => {
    await upstream?.close()
  })
  const provider = async () => {
    upstream = await FakeUpstream.start()
    return new OpenAICompatibleProvider(providerConfig({ type: 'openai-compatible', baseUrl: `${upstream.url}/v1`, apiKey: KEY }))
  }
  const sseHeaders = { 'content-type': 'text/event-stream' }
  const usage = { usage: { prompt_tokens: 5, completion_tokens: 3 } }
  const stream =
    chunk({ role: 'assistant', content: '' }) +
    chunk({ reasoning_content: 'think' }) +
    chunk({ content: 'Hel' }) +
    chunk({ content: 'lo "there"' }) +
    chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":' } }] }) +
    chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }) +
    chunk({}, 'tool_calls') +
    frame({ id: 'chatcmpl-test123', object: 'chat.completion.chunk', choices: [], ...usage }) +
    DONE

  for (const passThrough of [undefined, 'chat-completions'] as const) {
    test(`the same events as the same stream chunked${passThrough ? ' (passed through)' : ''}, without a read per chunk`, async () => {
      const p = await provider()
      const call = { ...providerCall(testRequest(), MODEL), passThrough }
      upstream.enqueue({ kind: 'sse', body: stream, chunkBytes: 7 }, { kind: 'text', status: 200, body: stream, headers: sseHeaders })
      const chunked = await p.stream(call)
      const chunkedEvents = await collect(chunked)
      const whole = await p.stream(call)
      // Read whole before stream() resolved: replayed from memory.
      expect(whole).toBeInstanceOf(ReplayedEvents)
      expect(chunked).not.toBeInstanceOf(ReplayedEvents)
      const wholeEvents = await collect(whole)
      // Passed-through chunks are grouped per network read: compare them merged.
      expect(mergePassthrough(wholeEvents)).toEqual(mergePassthrough(chunkedEvents))
      expect(wholeEvents.at(-1)).toMatchObject({ type: 'finish', reason: 'tool-calls', usage: { inputTokens: 5, outputTokens: 3 } })
      if (!passThrough) assertEventGrammar(wholeEvents)
    })
  }

  test('an upstream error chunk or a stream that stops short reads as it would chunked', async () => {
    const p = await provider()
    const failing = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'partial' }) + 'data: {"error":{"message":"overloaded"}}\n\n'
    const cut = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'partial' })
    for (const body of [failing, cut]) {
      upstream.enqueue({ kind: 'sse', body }, { kind: 'text', status: 200, body, headers: sseHeaders })
      const chunked = await collect(await p.stream(providerCall(testRequest(), MODEL)))
      const whole = await collect(await p.stream(providerCall(testRequest(), MODEL)))
      expect(whole).toEqual(chunked)
      expect(whole.at(-1)!.type).toBe('error')
    }
  })

  test('a 2xx stream that fails before any output rejects, chunked or read whole, so the router may try the next backend', async () => {
    // An error chunk first, only [DONE], a 200 whose body is not SSE at all: before, stream()
    // resolved at the headers and the client got a 200 carrying only an in-band error (QA).
    const p = await provider()
    const bodies = ['data: {"error":{"message":"model overloaded","type":"server_error"}}\n\n', DONE, '<html><body>502 Bad Gateway</body></html>']
    for (const body of bodies) {
      for (const passThrough of [undefined, 'chat-completions'] as const) {
        upstream.enqueue({ kind: 'sse', body }, { kind: 'text', status: 200, body, headers: sseHeaders })
        for (const how of ['chunked', 'whole']) {
          const error = await rejection(p.stream({ ...providerCall(testRequest(), MODEL), passThrough }))
          expect({ body, how, kind: error.kind }).toEqual({ body, how, kind: 'server' })
        }
      }
    }
    // Output first, then the failure: in-band as before (nothing falls over once output could be sent).
    const late = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'partial' }) + 'data: {"error":{"message":"overloaded"}}\n\n'
    upstream.enqueue({ kind: 'sse', body: late })
    expect((await collect(await p.stream(providerCall(testRequest(), MODEL)))).at(-1)!.type).toBe('error')
  })

  test('a declared-length stream past 256 KiB is read as it arrives', async () => {
    const p = await provider()
    const words = Array.from({ length: 3_000 }, (_, index) => chunk({ content: ` word${index}` })).join('')
    const long = chunk({ role: 'assistant', content: '' }) + words + chunk({}, 'stop') + DONE
    expect(long.length).toBeGreaterThan(256 * 1024)
    upstream.enqueue({ kind: 'text', status: 200, body: long, headers: sseHeaders })
    const events = await p.stream(providerCall(testRequest(), MODEL))
    expect(events).not.toBeInstanceOf(ReplayedEvents)
    const summary = summarize(await collect(events))
    expect(summary.text.split(' ').length).toBe(3_001)
  })
})
