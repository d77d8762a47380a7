import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import type { ChatEvent } from '../../src/inference/canonical'
import { MessagesStreamEncoder } from '../../src/inference/dialects/messages/encode-stream'
import { ReplayedEvents } from '../../src/providers/replay'
import { anthropicProviders, call, fixture, lastError } from '../support/anthropic-provider'
import { FakeUpstream, type FakeResponse } from '../support/fake-upstream'
import { encodeEvents } from '../support/pass-through'
import { collect, rejection } from './events'

// The Anthropic provider on streams whose length the upstream declared.

let upstream: FakeUpstream
beforeEach(async () => {
  upstream = await FakeUpstream.start()
})
afterEach(async () => {
  await upstream.close()
})
const { provider } = anthropicProviders(() => upstream)

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
