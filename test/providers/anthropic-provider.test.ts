import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import type { ChatEvent, ChatRequest, Message, Part } from '../../src/inference/canonical'
import { ANTHROPIC_VERSION, AnthropicProvider } from '../../src/providers/anthropic/provider'
import type { UpstreamError } from '../../src/providers/types'
import { anthropicProviders, API_KEY, call, fixture } from '../support/anthropic-provider'
import { FakeUpstream } from '../support/fake-upstream'
import { CLAUDE_MODEL as MODEL } from './anthropic-wire'
import { collect, rejection } from './events'

// The Anthropic provider over real HTTP: the request on the wire, streams split anywhere, and
// upstream errors before any event. Failures after the first event, deadlines and declared-length
// bodies are in the other anthropic-provider-*.test.ts files.

let upstream: FakeUpstream
beforeEach(async () => {
  upstream = await FakeUpstream.start()
})
afterEach(async () => {
  await upstream.close()
})
const { clock, providerConfig, provider } = anthropicProviders(() => upstream)

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
