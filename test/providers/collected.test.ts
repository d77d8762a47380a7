import { afterEach, describe, expect, test } from 'bun:test'
import { brotliCompressSync, gzipSync } from 'node:zlib'
import type { ProviderConfig } from '../../src/config/config'
import { AnthropicProvider } from '../../src/providers/anthropic/provider'
import { declaresAtMost } from '../../src/providers/declared-length'
import { AttestedProvider } from '../../src/providers/attested/provider'
import { OpenAICompatibleProvider } from '../../src/providers/openai-compatible/provider'
import { UpstreamError, type Provider } from '../../src/providers/types'
import { parseProofFormat } from '../../src/tee/proof-format'
import { FakeUpstream } from '../support/fake-upstream'
import { anthropicWire } from './anthropic-wire'
import { runCollectConformance } from './collect-conformance'
import type { TurnScript, WireScript } from './conformance'
import { collect } from './events'
import { providerCall, providerConfig, testRequest } from './fixtures'
import { openAIWire } from './openai-wire'

// Collected calls (ProviderCall.collect) of the two HTTP adapters: the same answers as streamed
// calls, and the deadline that applies to their headers (response_timeout_ms, not the connect
// deadline: a JSON answer's headers come once the whole answer is generated).

const KEY = 'sk-collected-0123456789abcdef'

const ADAPTERS: Array<{ type: 'openai-compatible' | 'anthropic'; wire: WireScript; model: string; make: (config: ProviderConfig) => Provider }> = [
  { type: 'openai-compatible', wire: openAIWire, model: 'upstream-model', make: config => new OpenAICompatibleProvider(config) },
  { type: 'anthropic', wire: anthropicWire, model: 'claude-test-model', make: config => new AnthropicProvider(config) },
]

for (const adapter of ADAPTERS) {
  runCollectConformance(adapter.type, async timeouts => {
    const upstream = await FakeUpstream.start()
    const provider = adapter.make(providerConfig({ type: adapter.type, id: 'collected', baseUrl: `${upstream.url}/v1`, apiKey: KEY, ...timeouts }))
    return { provider, upstream, model: adapter.model, apiKey: KEY, wire: adapter.wire, close: () => upstream.close() }
  })
}

/**
 * An upstream on port 0 whose every answer waits for `release()`: the headers of a JSON answer
 * (or a stream) come only then. Tests move time forward by waiting on other calls' deadlines,
 * never by sleeping.
 */
function heldUpstream(answer: (body: { stream?: boolean }) => Response) {
  let release!: () => void
  const released = new Promise<void>(resolve => (release = resolve))
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 0,
    async fetch(request) {
      const body = (await request.json()) as { stream?: boolean }
      await released
      return answer(body)
    },
  })
  return { url: `http://127.0.0.1:${server.port}/v1`, release, close: () => server.stop(true) }
}

const TURN: TurnScript = { text: 'Generated slowly, answered at once.', finish: 'stop', usage: { inputTokens: 9, outputTokens: 7 } }

describe('the headers deadline of collected calls', () => {
  let close: (() => unknown) | undefined
  afterEach(async () => {
    await close?.()
    close = undefined
  })

  for (const adapter of ADAPTERS) {
    const answer = (body: { stream?: boolean }) =>
      body.stream === false
        ? Response.json(adapter.wire.json(TURN))
        : new Response(adapter.wire.stream(TURN), { headers: { 'content-type': 'text/event-stream' } })

    test(`${adapter.type}: a collected call waits past the connect deadline, up to response_timeout_ms`, async () => {
      const upstream = heldUpstream(answer)
      close = upstream.close
      const provider = adapter.make(providerConfig({ type: adapter.type, id: 'slow', baseUrl: upstream.url, apiKey: KEY, connectTimeoutMs: 100, responseTimeoutMs: 60_000 }))
      const request = testRequest({ stream: false })
      const collected = provider.stream({ ...providerCall(request, adapter.model), collect: true })
      // A streamed call to the same held upstream fails at the 100 ms connect deadline…
      const streamed = await provider.stream(providerCall(request, adapter.model)).then(
        () => undefined,
        (error: unknown) => error,
      )
      expect(streamed).toBeInstanceOf(UpstreamError)
      expect((streamed as UpstreamError).kind).toBe('timeout')
      // …while the collected one, asked before it, is still waiting for its answer.
      upstream.release()
      const events = await collect(await collected)
      expect(events.filter(event => event.type === 'text-delta').map(event => (event as { delta: string }).delta).join('')).toBe(TURN.text!)
      expect(events.at(-1)).toMatchObject({ type: 'finish', reason: 'stop', usage: { inputTokens: 9, outputTokens: 7 } })
    })

    test(`${adapter.type}: a collected call with no headers by response_timeout_ms fails with a retryable timeout`, async () => {
      const upstream = await FakeUpstream.start()
      close = () => upstream.close()
      upstream.enqueue({ kind: 'stall' })
      const provider = adapter.make(providerConfig({ type: adapter.type, id: 'stalled', baseUrl: `${upstream.url}/v1`, apiKey: KEY, connectTimeoutMs: 60_000, responseTimeoutMs: 150 }))
      const error = await provider.stream({ ...providerCall(testRequest({ stream: false }), adapter.model), collect: true }).then(
        () => undefined,
        (thrown: unknown) => thrown,
      )
      expect(error).toBeInstanceOf(UpstreamError)
      expect((error as UpstreamError).kind).toBe('timeout')
      expect((error as UpstreamError).retryable).toBe(true)
      expect((error as UpstreamError).message).toContain('150 ms')
      // The stalled upstream saw the call go away.
      await (await upstream.request(0)).disconnected
    })
  }
})

describe('the Encrypted relay: a non-stream call (one JSON answer) waits up to response_timeout_ms', () => {
  const attested = (baseUrl: string, timeouts: Partial<ProviderConfig>) =>
    new AttestedProvider(
      providerConfig({
        type: 'attested', id: 'tee', baseUrl, apiKey: KEY, ...timeouts,
        attested: { proofFormat: parseProofFormat('dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2')!, signingAlgos: ['ecdsa'] },
      }),
    )
  const relayCall = (collect: boolean) => ({ upstreamModel: 'tee-model', body: JSON.stringify({ model: 'tee-model', stream: !collect, messages: [] }), headers: {}, signal: new AbortController().signal, collect })

  test('past the connect deadline, the JSON answer still arrives', async () => {
    const upstream = heldUpstream(() => Response.json(openAIWire.json(TURN)))
    try {
      const provider = attested(upstream.url, { connectTimeoutMs: 100, responseTimeoutMs: 60_000 })
      const collected = provider.relay(relayCall(true))
      const streamed = await provider.relay(relayCall(false)).then(
        () => undefined,
        (error: unknown) => error,
      )
      expect((streamed as UpstreamError).kind).toBe('timeout')
      upstream.release()
      const answer = await collected
      const chunks: Uint8Array[] = []
      for await (const chunk of answer.bytes) chunks.push(chunk)
      expect(JSON.parse(Buffer.concat(chunks).toString()).choices[0].message.content).toBe(TURN.text)
    } finally {
      await upstream.close()
    }
  })

  test('no headers by response_timeout_ms: a timeout', async () => {
    const upstream = await FakeUpstream.start()
    try {
      upstream.enqueue({ kind: 'stall' })
      const error = await attested(`${upstream.url}/v1`, { connectTimeoutMs: 60_000, responseTimeoutMs: 150 }).relay(relayCall(true)).then(
        () => undefined,
        (thrown: unknown) => thrown,
      )
      expect((error as UpstreamError).kind).toBe('timeout')
      expect((error as UpstreamError).message).toContain('150 ms')
    } finally {
      await upstream.close()
    }
  })
})

describe('the body of a collected JSON answer (openai-compatible)', () => {
  /** An upstream answering every call with `body` as application/json, in `pieces` writes (chunked: no content-length). */
  function jsonUpstream(body: string, pieces: number, declaredLength?: number) {
    const server = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      idleTimeout: 0,
      async fetch(request) {
        await request.arrayBuffer()
        const size = Math.ceil(body.length / pieces)
        const parts = Array.from({ length: pieces }, (_, i) => body.slice(i * size, (i + 1) * size))
        const stream = new ReadableStream<string>({
          pull(controller) {
            const part = parts.shift()
            if (part === undefined) controller.close()
            else controller.enqueue(part)
          },
        })
        const headers: Record<string, string> = { 'content-type': 'application/json' }
        if (declaredLength !== undefined) headers['content-length'] = String(declaredLength)
        return new Response(stream, { headers })
      },
    })
    return { url: `http://127.0.0.1:${server.port}/v1`, close: () => server.stop(true) }
  }
  const call = () => ({ ...providerCall(testRequest({ stream: false }), 'upstream-model'), collect: true })
  const MAX = 16 * 1024 * 1024

  test('without a content-length (sent chunked, in pieces) it is read as it streams', async () => {
    const upstream = jsonUpstream(JSON.stringify(openAIWire.json(TURN)), 5)
    try {
      const provider = new OpenAICompatibleProvider(providerConfig({ type: 'openai-compatible', baseUrl: upstream.url, apiKey: KEY }))
      const events = await collect(await provider.stream(call()))
      expect(events.filter(event => event.type === 'text-delta').map(event => (event as { delta: string }).delta).join('')).toBe(TURN.text!)
      expect(events.at(-1)).toMatchObject({ type: 'finish', usage: { inputTokens: 9, outputTokens: 7 } })
    } finally {
      await upstream.close()
    }
  })

  test('non-ASCII text split across network writes decodes the same with a declared length or without', async () => {
    const text = 'Grüße, 世界 🌍 — ça va?'
    const body = JSON.stringify({ ...(openAIWire.json(TURN) as { choices: Array<{ message: object }> }), choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }] })
    const bytes = Buffer.byteLength(body)
    for (const declared of [bytes, undefined]) {
      // 7 pieces of the UTF-16 text; Bun writes each as UTF-8, so multi-byte characters may fall on a boundary.
      const upstream = jsonUpstream(body, 7, declared)
      try {
        const provider = new OpenAICompatibleProvider(providerConfig({ type: 'openai-compatible', baseUrl: upstream.url, apiKey: KEY }))
        const events = await collect(await provider.stream(call()))
        expect(events.filter(event => event.type === 'text-delta').map(event => (event as { delta: string }).delta).join('')).toBe(text)
      } finally {
        await upstream.close()
      }
    }
  })

  test('a compressed answer is held to 16 MiB inflated, whatever its Content-Length says (QA: 100 KB of gzip held 100 MB)', async () => {
    // Before: the compressed length was taken as the body's and the answer read whole, uncapped.
    const huge = JSON.stringify({ ...(openAIWire.json(TURN) as object), padding: 'x'.repeat(MAX) })
    for (const [encoding, compress] of [['gzip', gzipSync], ['br', brotliCompressSync]] as const) {
      const body = compress(huge)
      const server = Bun.serve({
        port: 0,
        hostname: '127.0.0.1',
        fetch: () => new Response(body, { headers: { 'content-type': 'application/json', 'content-encoding': encoding, 'content-length': String(body.byteLength) } }),
      })
      try {
        const provider = new OpenAICompatibleProvider(providerConfig({ type: 'openai-compatible', baseUrl: `http://127.0.0.1:${server.port}/v1`, apiKey: KEY }))
        const error = await provider.stream(call()).then(() => undefined, (thrown: unknown) => thrown)
        expect(error).toBeInstanceOf(UpstreamError)
        expect((error as UpstreamError).message).toContain('too large')
      } finally {
        server.stop(true)
      }
    }
  })

  test('a compressed body never counts as declared (streams too: read chunk by chunk, where the caps count inflated bytes)', () => {
    const headers = (encoding?: string) => new Headers({ 'content-length': '100', ...(encoding === undefined ? {} : { 'content-encoding': encoding }) })
    expect([undefined, 'identity', ' Identity '].map(encoding => declaresAtMost(headers(encoding), 1000))).toEqual([true, true, true])
    expect(['gzip', 'br', 'deflate', 'zstd', 'gzip, identity'].map(encoding => declaresAtMost(headers(encoding), 1000))).toEqual([false, false, false, false, false])
  })

  test('past 16 MiB it is refused as a server error, whether its length is declared or not', async () => {
    const huge = JSON.stringify({ ...(openAIWire.json(TURN) as object), padding: 'x'.repeat(MAX) })
    for (const declared of [undefined, huge.length]) {
      const upstream = jsonUpstream(huge, 64, declared)
      try {
        const provider = new OpenAICompatibleProvider(providerConfig({ type: 'openai-compatible', baseUrl: upstream.url, apiKey: KEY }))
        const error = await provider.stream(call()).then(
          () => undefined,
          (thrown: unknown) => thrown,
        )
        expect(error).toBeInstanceOf(UpstreamError)
        expect((error as UpstreamError).kind).toBe('server')
        expect((error as UpstreamError).message).toContain('too large')
      } finally {
        await upstream.close()
      }
    }
  })
})
