import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import type { ChatEvent } from '../../src/inference/canonical'
import { UpstreamError } from '../../src/providers/types'
import { poll } from '../support/poll'
import { EXPECTED_CHARGE, events, type Script, seen, server, setup as scripted, sseEvents, t, textReply, usage } from './scripted-app'

// The chat route over a scripted router: wire format as the official SDK parses it, and billing
// that equals price × reported usage, settled once on every path.

// The scripted model without vision or file input: an image part is a 400 here.
const setup = (script: Script) => scripted(script, { capabilities: { vision: false, fileInput: false }, path: '/v1/chat/completions' })


describe('POST /v1/chat/completions', () => {
  test('non-streaming through the openai SDK: content, usage, exact charge', async () => {
    const { org, client, charged } = await setup(() => events(textReply))
    const completion = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }], user: 'end-user-7' })
    expect(completion.object).toBe('chat.completion')
    expect(completion.model).toBe('scripted')
    expect(completion.choices[0]!.message.content).toBe('Hello, world')
    expect(completion.choices[0]!.finish_reason).toBe('stop')
    expect(completion.usage).toMatchObject({ prompt_tokens: 100, completion_tokens: 50, total_tokens: 150 })
    expect(await charged()).toBe(EXPECTED_CHARGE)
    // The canonical request keeps `user` for the gateway only; providers never forward it.
    expect(seen[0]!.user).toBe('end-user-7')
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
    // OpenAI's newer fields are accepted as on /v1/responses: safety_identifier stands for `user`.
    await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }], safety_identifier: 'end-user-8', prompt_cache_key: 'thread-1' } as never)
    expect(seen[1]!.user).toBe('end-user-8')
    // A participant's name is kept on its message (Chat Completions backends receive it).
    await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'yes', name: 'alice' }, { role: 'user', content: 'no', name: 'bob' }] })
    expect(seen[2]!.messages.map(message => message.name)).toEqual(['alice', 'bob'])
  })

  test('streaming through the openai SDK: deltas, usage chunk, [DONE], charged before the end', async () => {
    const { client, charged } = await setup(() => events(textReply))
    const stream = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    let text = ''
    let finish: string | null = null
    let reported: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ''
      finish = chunk.choices[0]?.finish_reason ?? finish
      if (chunk.usage) reported = chunk.usage
    }
    expect(text).toBe('Hello, world')
    expect(finish).toBe('stop')
    expect(reported).toMatchObject({ prompt_tokens: 100, completion_tokens: 50 })
    expect(await charged()).toBe(EXPECTED_CHARGE)
  })

  test('a usage beyond what the call could use is billed, and reported, at its bound', async () => {
    // An upstream reporting 10^8 output tokens for a call sent max_tokens 16, and more input than
    // the model's context (8192): billed as 16 and 8192, and the reply says so, streamed or not.
    const huge = { inputTokens: 1_000_000_000, outputTokens: 100_000_000, reasoningTokens: 200_000_000, webSearchRequests: 0, webFetchRequests: 0 }
    const reply = textReply.map(event => (event.type === 'finish' ? { ...event, usage: huge } : event))
    const { client, charged } = await setup(() => events(reply))
    const completion = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 })
    expect(completion.usage).toMatchObject({ prompt_tokens: 8192, completion_tokens: 16, completion_tokens_details: { reasoning_tokens: 16 } })
    const bounded = 8192n * 1000n + 16n * 2000n
    expect(await charged()).toBe(bounded)
    const stream = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16, stream: true, stream_options: { include_usage: true } })
    let reported: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) if (chunk.usage) reported = chunk.usage
    expect(reported).toMatchObject({ prompt_tokens: 8192, completion_tokens: 16 })
    expect(await charged()).toBe(2n * bounded)
  })

  test('a stream whose upstream reported no usage reports the counted usage it is billed for', async () => {
    const none = { inputTokens: 0, outputTokens: 0, webSearchRequests: 0, webFetchRequests: 0 }
    const reply = textReply.map(event => (event.type === 'finish' ? { ...event, usage: none } : event))
    const { org, client, charged } = await setup(() => events(reply))
    const stream = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    let reported: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) if (chunk.usage) reported = chunk.usage
    // The fallback: the input estimate and "Hello, world" counted (12 bytes, 3 tokens).
    expect(reported).toMatchObject({ prompt_tokens: 5, completion_tokens: 3 })
    const billed = await charged()
    expect(billed).toBe(5n * 1000n + 3n * 2000n)
    // Messages shows the same numbers in its message_delta (before: zeros, while billed the estimate).
    const response = await fetch(`http://127.0.0.1:${server()!.port}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': org.adminKey, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'scripted', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }], stream: true }),
    })
    const frames = await sseEvents(response)
    expect(frames.find(frame => frame.event === 'message_delta')!.data.usage).toMatchObject({ input_tokens: 5, output_tokens: 3 })
    expect(await charged()).toBe(2n * billed)
  })

  test('a streamed reply carries the request id and rate-limit headers on every inference route', async () => {
    // The route's headers (set.headers) go onto the stream's Response (request-context's sendAsBuilt).
    const { org } = await setup(() => events(textReply))
    const port = server()!.port
    const bodies: Record<string, unknown> = {
      '/v1/chat/completions': { model: 'scripted', messages: [{ role: 'user', content: 'hi' }], stream: true },
      '/v1/messages': { model: 'scripted', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }], stream: true },
      '/v1/responses': { model: 'scripted', input: 'hi', stream: true },
    }
    for (const [path, body] of Object.entries(bodies)) {
      const response = await fetch(`http://127.0.0.1:${port}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json', 'x-request-id': `req-${path.length}` },
        body: JSON.stringify(body),
      })
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
      expect(response.headers.get('cache-control')).toBe('no-cache')
      expect(response.headers.get('x-request-id')).toBe(`req-${path.length}`)
      expect(response.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/)
      expect(response.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/)
      if (path === '/v1/messages') expect(response.headers.get('request-id')).toBe(`req-${path.length}`)
      expect(await response.text()).toContain('Hello')
    }
  })

  test('a finished stream releases the upstream at once, not when its idle deadline fires', async () => {
    // A provider's events end after their terminal event; the iterator must still be closed so
    // that the provider's finally (closing the upstream response, clearing its timers) runs.
    let released = false
    const { client } = await setup(async function* () {
      try {
        for (const event of textReply) yield event
        await new Promise(() => {}) // an upstream that would keep its connection open
      } finally {
        released = true
      }
    })
    const stream = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }], stream: true })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    expect(text).toBe('Hello, world')
    await poll('the upstream events to be closed', 200, 5, () => (released ? true : undefined))
  })

  test('tool calls round-trip, parallel, streamed and not', async () => {
    const toolEvents: ChatEvent[] = [
      { type: 'response-start', id: 'up-2', model: 'm', createdAt: 0 },
      { type: 'reasoning-start', block: 0 },
      { type: 'reasoning-delta', block: 0, delta: 'Need weather.' },
      { type: 'reasoning-end', block: 0, signature: 'sig' },
      { type: 'tool-call-start', block: 1, callId: 'call_a', name: 'weather' },
      { type: 'tool-call-delta', block: 1, argumentsDelta: '{"city":' },
      { type: 'tool-call-start', block: 2, callId: 'call_b', name: 'weather' },
      { type: 'tool-call-delta', block: 2, argumentsDelta: '{"city":"Oslo"}' },
      { type: 'tool-call-delta', block: 1, argumentsDelta: '"Rome"}' },
      { type: 'tool-call-end', block: 1 },
      { type: 'tool-call-end', block: 2 },
      { type: 'finish', reason: 'tool-calls', usage: { ...usage, reasoningTokens: 5 } },
    ]
    const { client } = await setup(() => events(toolEvents))
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }]
    const completion = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'weather?' }], tools, reasoning_effort: 'low' })
    const message = completion.choices[0]!.message
    expect(completion.choices[0]!.finish_reason).toBe('tool_calls')
    expect(message.tool_calls?.map(call => [call.id, call.type === 'function' && call.function.arguments])).toEqual([['call_a', '{"city":"Rome"}'], ['call_b', '{"city":"Oslo"}']])
    expect((message as unknown as { reasoning_content: string }).reasoning_content).toBe('Need weather.')
    expect(completion.usage?.completion_tokens_details?.reasoning_tokens).toBe(5)

    const stream = client.chat.completions.stream({ model: 'scripted', messages: [{ role: 'user', content: 'weather?' }], tools, stream: true })
    const final = await stream.finalChatCompletion()
    expect(final.choices[0]!.message.tool_calls?.map(call => call.type === 'function' && JSON.parse(call.function.arguments).city)).toEqual(['Rome', 'Oslo'])

    // Sending the tool results back decodes into canonical tool-call and tool-result parts.
    await client.chat.completions.create({
      model: 'scripted',
      messages: [{ role: 'user', content: 'weather?' }, message as OpenAI.ChatCompletionMessageParam, { role: 'tool', tool_call_id: 'call_a', content: 'sunny' }],
      tools,
    })
    const replay = seen[seen.length - 1]!
    expect(replay.messages[1]!.parts.map(part => part.type)).toEqual(['reasoning', 'tool-call', 'tool-call'])
    expect(replay.messages[2]!.parts).toEqual([{ type: 'tool-result', callId: 'call_a', content: 'sunny' }])
  })

  test('upstream failure before output: 502 provider_error, 429 passes Retry-After, nothing charged', async () => {
    const failing = (error: UpstreamError) => setup(() => Promise.reject(error))
    let context = await failing(new UpstreamError('server', 'boom', 'fake', 'm', { status: 500 }))
    const server500 = await context.client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'x' }] }).catch(error => error)
    expect(server500).toBeInstanceOf(OpenAI.APIError)
    expect(server500.status).toBe(502)
    expect(server500.code).toBe('provider_error')
    expect(await context.charged()).toBe(0n)
    await t.close()
    server()?.stop(true)

    context = await failing(new UpstreamError('rate-limited', 'slow down', 'fake', 'm', { status: 429, retryAfterMs: 7000 }))
    const limited = await context.client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'x' }] }).catch(error => error)
    expect(limited.status).toBe(429)
    expect(limited.headers.get('retry-after')).toBe('7')
    expect(await context.charged()).toBe(0n)
  })

  test('mid-stream failure ends with an in-band error and charges the output sent', async () => {
    const { charged, post } = await setup(() =>
      events([
        { type: 'response-start', id: 'x', model: 'm', createdAt: 0 },
        { type: 'text-start', block: 0 },
        { type: 'text-delta', block: 0, delta: 'abcdefgh' },
        { type: 'error', error: new UpstreamError('server', 'reset', 'fake', 'm') },
      ]),
    )
    const response = await post({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }], stream: true })
    const text = await response.text()
    expect(text).toContain('"content":"abcdefgh"')
    expect(text).toContain('"code":"provider_error"')
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true)
    // Fallback: the input estimate plus 2 output tokens (8 bytes / 4), never zero.
    expect(await charged()).toBeGreaterThan(2n * 2000n)
  })

  test('client disconnect mid-stream aborts the upstream, frees the slot and charges the output sent', async () => {
    let upstreamAborted = false
    const { org, charged, post } = await setup((_request, signal) => {
      signal.addEventListener('abort', () => (upstreamAborted = true))
      return events([{ type: 'response-start', id: 'x', model: 'm', createdAt: 0 }, { type: 'text-start', block: 0 }, { type: 'text-delta', block: 0, delta: 'partial' }], signal)
    })
    const abort = new AbortController()
    const response = await post({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }], stream: true }, abort.signal)
    const reader = response.body!.getReader()
    let received = ''
    while (!received.includes('partial')) received += new TextDecoder().decode((await reader.read()).value)
    abort.abort()
    await poll('the upstream to be aborted and the slot freed', 200, 5, () => (upstreamAborted && t.deps.limits.concurrency.inUse(org.orgId) === 0 ? true : undefined))
    await poll('the settlement', 200, 5, async () => ((await charged()) > 0n ? true : undefined))
  })

  test('a non-streamed answer that completes after its client left, before any tick, is not charged', async () => {
    // The client's signal is read on the lifecycle's ticks; the pipeline reads it once more
    // before it settles, so an answer nobody will receive is released, not charged.
    const leave = new AbortController()
    const { org, charged, handle } = await setup(() => {
      leave.abort()
      return events(textReply)
    })
    const response = await handle(
      new Request('http://gateway.local/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }] }),
        signal: leave.signal,
      }),
    )
    expect(response.status).not.toBe(200)
    expect(await charged()).toBe(0n)
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
  })

  test('an assistant refusal in the history reaches the backend as what the assistant said', async () => {
    // OpenAI answers a refused request with content null and `refusal` set; a client that appends
    // that message to its history (or writes a refusal content part) must not lose the turn.
    const { client } = await setup(() => events(textReply))
    const refused = { role: 'assistant', content: null, refusal: 'I cannot help with that.' } as unknown as OpenAI.ChatCompletionMessageParam
    const part: OpenAI.ChatCompletionMessageParam = { role: 'assistant', content: [{ type: 'refusal', refusal: 'Still no.' }] }
    await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'a' }, refused, { role: 'user', content: 'b' }, part, { role: 'user', content: 'c' }] })
    expect(seen[0]!.messages.map(message => [message.role, message.parts])).toEqual([
      ['user', [{ type: 'text', text: 'a' }]],
      ['assistant', [{ type: 'text', text: 'I cannot help with that.' }]],
      ['user', [{ type: 'text', text: 'b' }]],
      ['assistant', [{ type: 'text', text: 'Still no.' }]],
      ['user', [{ type: 'text', text: 'c' }]],
    ])
  })

  test("the SDK's service_tier, verbosity, top_logprobs, modalities and include_obfuscation are accepted at the values honoured", async () => {
    // As on the Responses route: the defaults a client may send explicitly are not refused as unknown fields.
    const { client } = await setup(() => events(textReply))
    const completion = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'x' }], service_tier: 'auto', verbosity: 'medium', top_logprobs: 0, modalities: ['text'] })
    expect(completion.choices[0]!.message.content).toBe('Hello, world')
    const stream = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'x' }], stream: true, stream_options: { include_usage: true, include_obfuscation: false }, service_tier: 'default' })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    expect(text).toBe('Hello, world')
  })

  test('logit_bias, prediction, audio and reasoning_effort: null (or an empty bias) is accepted; a value asking for them is a 400 saying so', async () => {
    // Before: each was 400 "unknown field", though the SDK's types declare them `| null`
    // (reasoning_effort: null was a 400 "should be one of", QA).
    const { client } = await setup(() => events(textReply))
    for (const fields of [{ logit_bias: null, prediction: null, audio: null, reasoning_effort: null }, { logit_bias: {} }]) {
      const completion = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'x' }], ...fields })
      expect(completion.choices[0]!.message.content).toBe('Hello, world')
    }
    const refused: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ logit_bias: { '50256': -100 } }, 'logit_bias', /^400 logit_bias is not supported/],
      [{ prediction: { type: 'content', content: 'draft' } }, 'prediction', /^400 prediction is not supported/],
      [{ audio: { voice: 'alloy', format: 'wav' } }, 'audio', /^400 audio output is not supported/],
    ]
    for (const [fields, param, message] of refused) {
      const error = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'x' }], ...fields } as never).catch(error => error)
      expect([error.status, error.param, error.message]).toEqual([400, param, expect.stringMatching(message)])
    }
    expect(seen).toHaveLength(2)
    expect(seen[0]!.reasoning).toBeUndefined()
  })

  test('an empty stop sequence stops nothing: dropped before any backend sees it', async () => {
    // Before: `stop: ""` reached OpenAI-compatible backends, and vLLM refuses it (400).
    const { client } = await setup(() => events(textReply))
    for (const stop of ['', [''], ['', 'END']]) await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'x' }], stop })
    expect(seen.map(request => request.sampling.stop)).toEqual([undefined, undefined, ['END']])
  })

  test('bad requests are clear 400s in the OpenAI envelope, and nothing is charged', async () => {
    const { client, charged } = await setup(() => events(textReply))
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ model: 'nope', messages: [{ role: 'user', content: 'x' }] }, 'model'],
      [{ model: 'scripted', messages: [] }, 'messages'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], n: 2 }, 'n'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], bogus: 1 }, 'bogus'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], store: true }, 'store'],
      [{ model: 'scripted', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] }, 'messages.0.content.0.image_url.url'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], max_tokens: 5000 }, 'max_tokens'],
      // The limit's own field name, whichever of the two the client sent.
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 5000 }, 'max_completion_tokens'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x'.repeat(30_000) }], max_tokens: 1000 }, 'messages'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x'.repeat(40_000) }] }, 'messages'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], tool_choice: { type: 'function', function: { name: 'ghost' } } }, 'tool_choice'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], web_fetch: true }, 'tools'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], service_tier: 'flex' }, 'service_tier'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], verbosity: 'low' }, 'verbosity'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], top_logprobs: 3 }, 'top_logprobs'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], modalities: ['text', 'audio'] }, 'modalities'],
      // A system or user message of no content parts (before: sent upstream as an empty turn).
      [{ model: 'scripted', messages: [{ role: 'user', content: [] }] }, 'messages.0.content'],
      [{ model: 'scripted', messages: [{ role: 'system', content: [] }, { role: 'user', content: 'x' }] }, 'messages.0.content'],
      // OpenAI's metadata limits: 16 pairs, keys of 64 characters, values of 512.
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata'],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], metadata: { ['k'.repeat(65)]: 'v' } }, `metadata.${'k'.repeat(65)}`],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], metadata: { k: 'v'.repeat(513) } }, 'metadata.k'],
      // Characters are code points: one past the limit in emoji (two UTF-16 units each).
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], metadata: { ['🔑'.repeat(65)]: 'v' } }, `metadata.${'🔑'.repeat(65)}`],
      [{ model: 'scripted', messages: [{ role: 'user', content: 'x' }], metadata: { k: '🔑'.repeat(513) } }, 'metadata.k'],
    ]
    for (const [body, param] of cases) {
      const error = await client.chat.completions.create(body as never).catch(error => error)
      expect(error).toBeInstanceOf(OpenAI.APIError)
      expect([error.status, error.code, error.param]).toEqual([400, 'invalid_request', param])
      if (param === 'max_completion_tokens') expect(error.message).toStartWith('400 max_completion_tokens 5000 exceeds')
    }
    expect(seen).toHaveLength(0)
    expect(await charged()).toBe(0n)
    const empty = await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: [] }] }).catch(error => error)
    expect(empty.message).toBe('400 messages.0.content must not be empty: a user message needs at least one content part (or a string)')

    // An assistant turn of tool calls has no content to give: null or [] beside its tool_calls is fine.
    const calls = [{ id: 'call_1', type: 'function' as const, function: { name: 'f', arguments: '{}' } }]
    for (const content of [null, []]) {
      await client.chat.completions.create({
        model: 'scripted',
        messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: content as never, tool_calls: calls }, { role: 'tool', tool_call_id: 'call_1', content: 'done' }],
      })
    }
    expect(seen.map(request => request.messages[1]!.parts)).toEqual([[{ type: 'tool-call', callId: 'call_1', name: 'f', arguments: '{}' }], [{ type: 'tool-call', callId: 'call_1', name: 'f', arguments: '{}' }]])
  })
})
