import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import type { ChatEvent } from '../../src/inference/canonical'
import { anthropicProviders, call, fixture, lastError } from '../support/anthropic-provider'
import { FakeUpstream, type FakeResponse } from '../support/fake-upstream'
import { collect, rejection } from './events'

// The Anthropic provider's failures after the first event (in-band), its deadlines and
// cancellation, over real HTTP.

let upstream: FakeUpstream
beforeEach(async () => {
  upstream = await FakeUpstream.start()
})
afterEach(async () => {
  await upstream.close()
})
const { provider } = anthropicProviders(() => upstream)

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
