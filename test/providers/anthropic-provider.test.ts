import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import type { ProviderConfig } from '../../src/config/config'
import type { ChatEvent, ChatRequest, Message, Part } from '../../src/inference/canonical'
import { ANTHROPIC_VERSION, AnthropicProvider } from '../../src/providers/anthropic/provider'
import { MessagesStreamEncoder } from '../../src/inference/dialects/messages/encode-stream'
import { ReplayedEvents } from '../../src/providers/replay'
import { UpstreamError, type ProviderCall } from '../../src/providers/types'
import { FakeClock } from '../support/fake-clock'
import { FakeUpstream, type FakeResponse } from '../support/fake-upstream'
import { encodeEvents } from '../support/pass-through'
import { CLAUDE_MODEL as MODEL, claudeRoute } from './anthropic-wire'

const API_KEY = 'sk-ant-test-0123456789'
const fixture = (name: string) => Bun.file(new URL(`../fixtures/upstream/anthropic/${name}`, import.meta.url)).text()
const clock = new FakeClock()

let upstream: FakeUpstream
beforeEach(async () => {
  upstream = await FakeUpstream.start()
})
afterEach(async () => {
  await upstream.close()
})

function providerConfig(overrides: Partial<ProviderConfig> = {}): ProviderConfig {
  return {
    id: 'claude',
    type: 'anthropic',
    baseUrl: `${upstream.url}/v1`,
    apiKey: API_KEY,
    retention: 'unknown',
    connectTimeoutMs: 5_000,
    idleTimeoutMs: 5_000,
    responseTimeoutMs: 5_000,
    ...overrides,
  }
}

const provider = (overrides: Partial<ProviderConfig> = {}) => new AnthropicProvider(providerConfig(overrides), { clock })

const route = claudeRoute()

function call(request: Partial<ChatRequest> = {}, signal: AbortSignal = new AbortController().signal): ProviderCall {
  return {
    request: {
      model: 'claude',
      route,
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'Hi' }] }],
      tools: [],
      sampling: {},
      hosted: { webSearch: false, webFetch: false },
      user: 'end-user-7',
      stream: true,
      ...request,
    },
    upstreamModel: MODEL,
    signal,
    requestId: 'req_test',
  }
}

async function collect(events: AsyncIterable<ChatEvent>): Promise<ChatEvent[]> {
  const all: ChatEvent[] = []
  for await (const event of events) all.push(event)
  return all
}

/** The rejection of `promise`, which must reject with an UpstreamError. */
async function rejection(promise: Promise<unknown>): Promise<UpstreamError> {
  try {
    await promise
  } catch (error) {
    expect(error).toBeInstanceOf(UpstreamError)
    return error as UpstreamError
  }
  throw new Error('expected a rejection')
}

const lastError = (events: ChatEvent[]) => {
  const last = events.at(-1)
  if (last?.type !== 'error') throw new Error(`expected a final error event, got ${JSON.stringify(last)}`)
  return last.error
}

/** What a dialect would rebuild from the events: the assistant message to replay next turn. */
function assistantMessage(events: ChatEvent[]): Message {
  const parts = new Map<number, Part>()
  for (const event of events) {
    if (event.type === 'reasoning-start') parts.set(event.block, { type: 'reasoning', text: '' })
    if (event.type === 'reasoning-delta') (parts.get(event.block) as { text: string }).text += event.delta
    if (event.type === 'reasoning-end' && event.signature !== undefined) (parts.get(event.block) as { signature?: string }).signature = event.signature
    if (event.type === 'text-start') parts.set(event.block, { type: 'text', text: '' })
    if (event.type === 'text-delta') (parts.get(event.block) as { text: string }).text += event.delta
    if (event.type === 'tool-call-start') parts.set(event.block, { type: 'tool-call', callId: event.callId, name: event.name, arguments: '' })
    if (event.type === 'tool-call-delta') (parts.get(event.block) as { arguments: string }).arguments += event.argumentsDelta
  }
  return { role: 'assistant', parts: [...parts.entries()].sort(([a], [b]) => a - b).map(([, part]) => part) }
}

describe('anthropic provider: the request on the wire', () => {
  test('POST {base}/messages with only x-api-key, anthropic-version and JSON; no client identity', async () => {
    upstream.enqueue({ kind: 'sse', body: await fixture('text.sse') })
    await collect(await provider().stream(call()))
    const received = upstream.onlyRequest()
    expect(received.method).toBe('POST')
    expect(received.path).toBe('/v1/messages')
    expect(received.headers['x-api-key']).toBe(API_KEY)
    expect(received.headers['anthropic-version']).toBe(ANTHROPIC_VERSION)
    expect(received.headers['content-type']).toBe('application/json')
    expect(received.headers.authorization).toBeUndefined()
    expect(received.body).toEqual({ model: MODEL, max_tokens: 8192, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }], stream: true })
    expect(received.text).not.toContain('end-user-7')
  })

  test('a base URL with a trailing slash and no key: no double slash, no x-api-key header', async () => {
    upstream.enqueue({ kind: 'sse', body: await fixture('text.sse') })
    await collect(await provider({ baseUrl: `${upstream.url}/v1/`, apiKey: undefined }).stream(call()))
    const received = upstream.onlyRequest()
    expect(received.path).toBe('/v1/messages')
    expect(received.headers['x-api-key']).toBeUndefined()
  })
})

describe('anthropic provider: streams over real HTTP', () => {
  for (const chunkBytes of [1, 7, 64]) {
    test(`text split every ${chunkBytes} bytes (inside UTF-8 characters too)`, async () => {
      upstream.enqueue({ kind: 'sse', body: await fixture('text.sse'), chunkBytes })
      const events = await collect(await provider().stream(call()))
      expect(events[0]).toEqual({ type: 'response-start', id: 'msg_01TextFixture', model: MODEL, createdAt: clock.now(), inputTokens: 25 })
      const text = events.flatMap(event => (event.type === 'text-delta' ? [event.delta] : [])).join('')
      expect(text).toBe('Héllo wörld 🌍, こんにちは\n')
      expect(events.at(-1)).toEqual({ type: 'finish', reason: 'stop', usage: { inputTokens: 25, cachedInputTokens: 0, outputTokens: 15, webSearchRequests: 0, webFetchRequests: 0 } })
    })
  }

  test('thinking with signature, then text, then a tool call with split JSON', async () => {
    upstream.enqueue({ kind: 'sse', body: await fixture('thinking-tool.sse'), chunkBytes: 5 })
    const events = await collect(await provider().stream(call()))
    expect(events.map(event => event.type)).toEqual([
      'response-start',
      'reasoning-start',
      'reasoning-delta',
      'reasoning-delta',
      'reasoning-end',
      'text-start',
      'text-delta',
      'text-end',
      'tool-call-start',
      'tool-call-delta',
      'tool-call-delta',
      'tool-call-delta',
      'tool-call-end',
      'usage',
      'finish',
    ])
    expect(events[4]).toEqual({ type: 'reasoning-end', block: 0, signature: 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds==' })
    expect(events[8]).toEqual({ type: 'tool-call-start', block: 2, callId: 'toolu_01Weather', name: 'get_weather', jsonObject: true })
    expect(events.at(-1)).toMatchObject({ type: 'finish', reason: 'tool-calls', usage: { inputTokens: 472, outputTokens: 89 } })
  })

  test('parallel tool_use blocks keep their own block numbers and arguments; cache usage counted', async () => {
    upstream.enqueue({ kind: 'sse', body: await fixture('parallel-tools.sse'), chunkBytes: 11 })
    const events = await collect(await provider().stream(call()))
    const message = assistantMessage(events)
    expect(message.parts).toEqual([
      { type: 'tool-call', callId: 'toolu_01Paris', name: 'get_weather', arguments: '{"location": "Paris"}' },
      { type: 'tool-call', callId: 'toolu_01Tokyo', name: 'get_weather', arguments: '{"location": "Tokyo"}' },
    ])
    expect(events.at(-1)).toEqual({
      type: 'finish',
      reason: 'tool-calls',
      usage: { inputTokens: 2062, cachedInputTokens: 2000, cacheWriteInputTokens: 50, outputTokens: 64, webSearchRequests: 0, webFetchRequests: 0 },
    })
  })

  test('thinking is replayed before tool_use across a tool round trip', async () => {
    upstream.enqueue({ kind: 'sse', body: await fixture('thinking-tool.sse') }, { kind: 'sse', body: await fixture('text.sse') })
    const weather = { name: 'get_weather', parameters: { type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string' } } } }
    const first: ChatRequest['messages'] = [{ role: 'user', parts: [{ type: 'text', text: 'Weather in Paris?' }] }]
    const base = { tools: [weather], reasoning: { effort: 'low' as const }, sampling: { maxOutputTokens: 16_000 } }
    const turn1 = await collect(await provider().stream(call({ ...base, messages: first })))
    const assistant = assistantMessage(turn1)
    const second = [...first, assistant, { role: 'tool' as const, parts: [{ type: 'tool-result' as const, callId: 'toolu_01Weather', content: '{"temp":18}' }] }]
    await collect(await provider().stream(call({ ...base, messages: second })))

    const replayed = (await upstream.request(1)).body
    expect(replayed.thinking).toEqual({ type: 'enabled', budget_tokens: 2048 })
    expect(replayed.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
      {
        role: 'assistant',
        content: [
          {
            type: 'thinking',
            thinking: 'The user wants the weather in Paris.\nI should call get_weather.',
            signature: 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds==',
          },
          { type: 'text', text: 'Let me check.' },
          { type: 'tool_use', id: 'toolu_01Weather', name: 'get_weather', input: { location: 'Paris', unit: '°C' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01Weather', content: '{"temp":18}' }] },
    ])
  })
})

describe('anthropic provider: upstream errors before any event', () => {
  const errorBody = (type: string, message: string) => ({ type: 'error', error: { type, message } })
  const cases: Array<[number, string, UpstreamError['kind']]> = [
    [400, 'invalid_request_error', 'bad-request'],
    [401, 'authentication_error', 'auth'],
    [403, 'permission_error', 'auth'],
    [404, 'not_found_error', 'not-found'],
    [413, 'request_too_large', 'bad-request'],
    [429, 'rate_limit_error', 'rate-limited'],
    [500, 'api_error', 'server'],
    [529, 'overloaded_error', 'server'],
  ]
  for (const [status, type, kind] of cases) {
    test(`${status} ${type} → rejected ${kind}`, async () => {
      upstream.enqueue({ kind: 'json', status, body: errorBody(type, `upstream says ${type}`), headers: status === 429 ? { 'retry-after': '7' } : {} })
      const error = await rejection(provider().stream(call()))
      expect(error.kind).toBe(kind)
      expect(error.status).toBe(status)
      expect(error.provider).toBe('anthropic:claude')
      expect(error.model).toBe(MODEL)
      expect(error.message).toContain(type)
      expect(error.details.bodySnippet).toContain(`upstream says ${type}`)
      expect(error.details.retryAfterMs).toBe(status === 429 ? 7000 : undefined)
      expect(error.retryable).toBe(kind === 'server' || kind === 'rate-limited')
    })
  }

  test('an HTTP-date Retry-After is measured from the clock', async () => {
    const at = new Date(clock.now() + 30_000).toUTCString()
    upstream.enqueue({ kind: 'json', status: 429, body: errorBody('rate_limit_error', 'slow down'), headers: { 'retry-after': at } })
    expect((await rejection(provider().stream(call()))).details.retryAfterMs).toBe(30_000)
  })

  test('a non-JSON error page still classifies by status, and an echoed API key is scrubbed', async () => {
    upstream.enqueue({ kind: 'text', status: 502, body: `<html>bad gateway for key ${API_KEY}</html>` })
    const error = await rejection(provider().stream(call()))
    expect(error.kind).toBe('server')
    expect(error.details.bodySnippet).toContain('bad gateway')
    expect(error.details.bodySnippet).not.toContain(API_KEY)
  })

  test('a redirect is not followed (the key stays with the configured host)', async () => {
    upstream.enqueue({ kind: 'text', status: 307, body: '', headers: { location: 'http://127.0.0.1:1/elsewhere' } })
    const error = await rejection(provider().stream(call()))
    expect(error.kind).toBe('server')
    expect(error.status).toBe(307)
    expect(upstream.requests).toHaveLength(1)
  })

  test('an error event in place of message_start rejects, so the router can still fall back', async () => {
    upstream.enqueue({ kind: 'sse', body: 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n' })
    const error = await rejection(provider().stream(call()))
    expect(error.kind).toBe('server')
    expect(error.retryable).toBe(true)
  })

  test('a 2xx that closes without any event rejects with server (retryable)', async () => {
    upstream.enqueue({ kind: 'sse', body: ': nothing here\n\n' })
    expect((await rejection(provider().stream(call()))).kind).toBe('server')
  })

  test('connection refused → connection', async () => {
    const closed = await FakeUpstream.start()
    const url = closed.url
    await closed.close()
    const error = await rejection(new AnthropicProvider(providerConfig({ baseUrl: url }), { clock }).stream(call()))
    expect(error.kind).toBe('connection')
  })

  test('a request the adapter cannot express is a bad-request, and nothing is sent', async () => {
    const error = await rejection(provider().stream(call({ messages: [{ role: 'user', parts: [{ type: 'file', mediaType: 'application/pdf', data: new Uint8Array([1]) }] }] })))
    expect(error.kind).toBe('bad-request')
    expect(upstream.requests).toHaveLength(0)
  })
})

describe('anthropic provider: failures after the first event are in-band', () => {
  test('an error event mid-stream ends the stream with one error event', async () => {
    upstream.enqueue({ kind: 'sse', body: await fixture('error-mid-stream.sse'), chunkBytes: 9 })
    const events = await collect(await provider().stream(call()))
    expect(events.map(event => event.type)).toEqual(['response-start', 'text-start', 'text-delta', 'error'])
    expect(lastError(events).kind).toBe('server')
  })

  test('a clean close before message_stop → in-band server error', async () => {
    const text = await fixture('text.sse')
    upstream.enqueue({ kind: 'sse', body: text.slice(0, text.indexOf('event: content_block_stop')) })
    const events = await collect(await provider().stream(call()))
    expect(events.slice(0, -1).map(event => event.type)).toEqual(['response-start', 'text-start', 'text-delta', 'text-delta', 'text-delta'])
    expect(lastError(events).kind).toBe('server')
  })

  test('a connection reset mid-stream → in-band connection error', async () => {
    const text = await fixture('text.sse')
    upstream.enqueue({ kind: 'sse', body: text.slice(0, text.indexOf('event: content_block_stop')), then: 'reset' })
    const events = await collect(await provider().stream(call()))
    expect(events[0]?.type).toBe('response-start')
    expect(lastError(events).kind).toBe('connection')
  })
})

describe('anthropic provider: deadlines and cancellation', () => {
  const partial = async () => {
    const text = await fixture('text.sse')
    return text.slice(0, text.indexOf('event: content_block_stop'))
  }

  test('no response headers within the connect deadline → rejected timeout, upstream request cancelled', async () => {
    upstream.enqueue({ kind: 'stall' })
    const error = await rejection(provider({ connectTimeoutMs: 50 }).stream(call()))
    expect(error.kind).toBe('timeout')
    expect(error.message).toContain('50 ms')
    await upstream.onlyRequest().disconnected
  })

  test('silence mid-stream past the idle deadline → in-band timeout, upstream request cancelled', async () => {
    upstream.enqueue({ kind: 'sse', body: await partial(), then: 'stall' })
    const events = await collect(await provider({ idleTimeoutMs: 50 }).stream(call()))
    expect(events.slice(0, -1).map(event => event.type)).toEqual(['response-start', 'text-start', 'text-delta', 'text-delta', 'text-delta'])
    const error = lastError(events)
    expect(error.kind).toBe('timeout')
    expect(error.message).toContain('50 ms')
    await upstream.onlyRequest().disconnected
  })

  test('silence before message_start past the idle deadline → rejected timeout', async () => {
    upstream.enqueue({ kind: 'sse', body: ': ping\n\n', then: 'stall' })
    expect((await rejection(provider({ idleTimeoutMs: 50 }).stream(call()))).kind).toBe('timeout')
    await upstream.onlyRequest().disconnected
  })

  // After message_stop only the body's last bytes can follow: they are read, so the keep-alive
  // connection goes back to fetch's pool instead of being torn down (a new TCP and TLS handshake
  // for the next call).
  test('the body ending after message_stop is read to its end: the upstream sees no disconnect', async () => {
    let release!: () => void
    const gate = new Promise<void>(resolve => (release = resolve))
    upstream.enqueue({ kind: 'sse', body: [await fixture('text.sse'), gate] }, { kind: 'sse', body: await fixture('text.sse') })
    const events = await collect(await provider().stream(call()))
    expect(events.at(-1)?.type).toBe('finish')
    // The first body's end is still held back. A whole second call meanwhile: had the first
    // connection been aborted, the upstream would have seen it go by the time this one is answered.
    expect((await collect(await provider().stream(call()))).at(-1)?.type).toBe('finish')
    expect(upstream.requests).toHaveLength(2)
    expect(upstream.requests[0]!.isDisconnected()).toBe(false)
    release()
  })

  test('silence after message_stop past the idle deadline: the events were whole; then the connection is closed', async () => {
    upstream.enqueue({ kind: 'sse', body: await fixture('text.sse'), then: 'stall' })
    const events = await collect(await provider({ idleTimeoutMs: 50 }).stream(call()))
    expect(events.at(-1)?.type).toBe('finish')
    await upstream.onlyRequest().disconnected
  })

  test('an already aborted signal rejects with aborted and sends nothing', async () => {
    const controller = new AbortController()
    controller.abort()
    expect((await rejection(provider().stream(call({}, controller.signal)))).kind).toBe('aborted')
    expect(upstream.requests).toHaveLength(0)
  })

  const waits: Array<[string, FakeResponse]> = [
    ['abort while waiting for headers → rejected aborted, upstream request cancelled', { kind: 'stall' }],
    ['abort while waiting for message_start → rejected aborted', { kind: 'sse', body: ': ping\n\n', then: 'stall' }],
  ]
  for (const [name, response] of waits) {
    test(name, async () => {
      upstream.enqueue(response)
      const controller = new AbortController()
      const pending = provider().stream(call({}, controller.signal))
      await upstream.request(0)
      controller.abort()
      expect((await rejection(pending)).kind).toBe('aborted')
      await upstream.onlyRequest().disconnected
    })
  }

  test('abort mid-stream → the events end without a terminal event, upstream stream cancelled', async () => {
    upstream.enqueue({ kind: 'sse', body: await partial(), then: 'stall' })
    const controller = new AbortController()
    const iterator = (await provider().stream(call({}, controller.signal)))[Symbol.asyncIterator]()
    expect((await iterator.next()).value?.type).toBe('response-start')
    controller.abort()
    const rest: ChatEvent[] = []
    for (let next = await iterator.next(); next.done !== true; next = await iterator.next()) rest.push(next.value)
    // Events already buffered may still arrive; nothing terminal does.
    expect(rest.filter(event => event.type === 'error' || event.type === 'finish')).toEqual([])
    await upstream.onlyRequest().disconnected
  })


  test('a consumer that stops iterating early cancels the upstream stream', async () => {
    upstream.enqueue({ kind: 'sse', body: await partial(), then: 'stall' })
    for await (const event of await provider().stream(call())) {
      if (event.type === 'text-delta') break
    }
    await upstream.onlyRequest().disconnected
  })

  for (const collected of [false, true]) {
    test(`an error status whose body stalls: the idle deadline cuts the body and the status classifies it${collected ? ' (a collected call)' : ''}`, async () => {
      upstream.enqueue({ kind: 'sse', status: 529, body: ['{"type":"error","error":', new Promise(() => {})] })
      // Deadlines for the headers far past the test's own: only the idle deadline can end this.
      const slow = provider({ connectTimeoutMs: 600_000, responseTimeoutMs: 600_000, idleTimeoutMs: 50 })
      const error = await rejection(slow.stream({ ...call(), collect: collected }))
      expect(error.kind).toBe('server')
      expect(error.status).toBe(529)
      await upstream.onlyRequest().disconnected
    })
  }

  test('the connect deadline ends at the response headers; only the idle deadline governs the body', async () => {
    upstream.enqueue({ kind: 'sse', body: await partial(), then: 'stall' })
    const events = await collect(await provider({ connectTimeoutMs: 30, idleTimeoutMs: 150 }).stream(call()))
    const error = lastError(events)
    expect(error.kind).toBe('timeout')
    expect(error.message).toContain('150 ms')
  })
})

// A stream whose length the upstream declared (a `text` script: Content-Length) is read whole
// and translated in one pass; a chunked one (an `sse` script) as it arrives. The events must not
// tell them apart.
describe('anthropic provider: a declared-length stream is read whole', () => {
  const sseHeaders = { 'content-type': 'text/event-stream' }
  const declared = (body: string): FakeResponse => ({ kind: 'text', status: 200, body, headers: sseHeaders })

  for (const name of ['text.sse', 'thinking-tool.sse', 'parallel-tools.sse', 'redacted-thinking.sse', 'cached-thinking.sse', 'error-mid-stream.sse']) {
    test(`${name}: the same events as chunked, replayed from memory`, async () => {
      const body = await fixture(name)
      upstream.enqueue({ kind: 'sse', body, chunkBytes: 7 }, declared(body))
      const chunked = await provider().stream(call())
      const chunkedEvents = await collect(chunked)
      const whole = await provider().stream(call())
      expect(whole).toBeInstanceOf(ReplayedEvents)
      expect(chunked).not.toBeInstanceOf(ReplayedEvents)
      expect(await collect(whole)).toEqual(chunkedEvents)
    })
  }

  test('a Messages client (passThrough: messages) gets the same bytes chunked, whole and re-encoded, its deltas passed through', async () => {
    const bytes = (events: ChatEvent[]) => encodeEvents(new MessagesStreamEncoder({ id: 'msg_gw', model: 'claude', createdAt: 0, includeUsage: false, estimatedInputTokens: 5 }), events)
    const passed = (events: ChatEvent[]) => events.filter(event => event.type === 'passthrough').length
    for (const name of ['text.sse', 'thinking-tool.sse', 'parallel-tools.sse', 'redacted-thinking.sse', 'error-mid-stream.sse']) {
      const body = await fixture(name)
      upstream.enqueue({ kind: 'sse', body, chunkBytes: 7 }, declared(body), { kind: 'sse', body })
      const chunked = await collect(await provider().stream({ ...call(), passThrough: 'messages' }))
      const whole = await collect(await provider().stream({ ...call(), passThrough: 'messages' }))
      const reEncoded = await collect(await provider().stream(call()))
      expect(bytes(chunked)).toBe(bytes(reEncoded))
      expect(bytes(whole)).toBe(bytes(reEncoded))
      expect(passed(chunked)).toBeGreaterThan(0)
      expect(passed(whole)).toBeGreaterThan(0)
      expect(passed(reEncoded)).toBe(0)
    }
    // Another format's pass-through is not this provider's to act on.
    upstream.enqueue({ kind: 'sse', body: await fixture('text.sse') })
    expect(passed(await collect(await provider().stream({ ...call(), passThrough: 'chat-completions' })))).toBe(0)
  })

  test('an error in place of message_start rejects as chunked; a stream cut short ends in-band as chunked', async () => {
    const overloaded = 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    upstream.enqueue({ kind: 'sse', body: overloaded }, declared(overloaded))
    const chunked = await rejection(provider().stream(call()))
    const whole = await rejection(provider().stream(call()))
    expect([whole.kind, whole.message, whole.retryable]).toEqual([chunked.kind, chunked.message, chunked.retryable])

    const text = await fixture('text.sse')
    const cut = text.slice(0, text.indexOf('event: content_block_stop'))
    upstream.enqueue({ kind: 'sse', body: cut }, declared(cut))
    const chunkedEvents = await collect(await provider().stream(call()))
    const wholeEvents = await collect(await provider().stream(call()))
    expect(wholeEvents).toEqual(chunkedEvents)
    expect(lastError(wholeEvents).kind).toBe('server')
  })

  test('a declared-length stream past 256 KiB is read as it arrives', async () => {
    const text = await fixture('text.sse')
    const delta = 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" word"}}\n\n'
    const at = text.indexOf('event: content_block_stop')
    const long = text.slice(0, at) + delta.repeat(3_000) + text.slice(at)
    expect(long.length).toBeGreaterThan(256 * 1024)
    upstream.enqueue(declared(long))
    const events = await provider().stream(call())
    expect(events).not.toBeInstanceOf(ReplayedEvents)
    expect((await collect(events)).filter(event => event.type === 'text-delta')).toHaveLength(3_003)
  })

  for (const lent of [false, true]) {
    test(`a declared body that stalls is cut by the idle deadline: a timeout before any event, the connection closed${lent ? ' (the call\'s controller lent)' : ''}`, async () => {
      // Bun's server sends a streamed body chunked whatever it is told, so this upstream writes its
      // HTTP/1.1 answer by hand: the whole body's Content-Length, then only part of it.
      const text = await fixture('text.sse')
      const partial = text.slice(0, text.indexOf('event: content_block_stop'))
      let closed!: () => void
      const disconnected = new Promise<void>(resolve => (closed = resolve))
      const raw = Bun.listen({
        hostname: '127.0.0.1',
        port: 0,
        socket: {
          data(socket) {
            socket.write(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: ${Buffer.byteLength(text)}\r\n\r\n${partial}`)
          },
          close: () => closed(),
        },
      })
      try {
        const controller = new AbortController()
        const stalled = lent ? { ...call({}, controller.signal), abortable: controller } : call({}, controller.signal)
        const error = await rejection(provider({ baseUrl: `http://127.0.0.1:${raw.port}/v1`, idleTimeoutMs: 100 }).stream(stalled))
        expect(error.kind).toBe('timeout')
        expect(error.message).toContain('100 ms')
        // Lent, the deadline aborted the call's own controller; otherwise the caller's is untouched.
        expect(controller.signal.aborted).toBe(lent)
        await disconnected
      } finally {
        raw.stop(true)
      }
    })
  }
})
