import { describe, expect, test } from 'bun:test'
import type { ChatEvent } from '../../src/inference/canonical'
import type { ProviderCall, UpstreamErrorKind } from '../../src/providers/types'
import type { ConformanceTarget, ConformanceTimeouts } from './conformance'
import { assertEventGrammar, collect, rejection, summarize } from './events'
import { providerCall, testRequest } from './fixtures'

// The failure half of the provider conformance suite (conformance.ts): upstream errors, streams
// cut mid-way, deadlines and cancellation, provider-neutral as the rest.

/** Small enough to keep the suite fast, large enough for a loaded CI machine to answer a live stream in time. */
const SHORT_CONNECT: ConformanceTimeouts = { connectTimeoutMs: 250, idleTimeoutMs: 5_000 }
const SHORT_IDLE: ConformanceTimeouts = { connectTimeoutMs: 5_000, idleTimeoutMs: 250 }

/**
 * Registers the failure cases inside runConformance's describe; `start` sets up the target for a
 * test, with the timeouts it needs (relaxed by default).
 */
export function runFailureCases(start: (timeouts?: ConformanceTimeouts) => Promise<ConformanceTarget>): void {
  describe('upstream errors reject before any event', () => {
    const cases: Array<{ status: number; kind: UpstreamErrorKind; retryable: boolean }> = [
      { status: 400, kind: 'bad-request', retryable: false },
      { status: 401, kind: 'auth', retryable: false },
      { status: 403, kind: 'auth', retryable: false },
      { status: 404, kind: 'not-found', retryable: false },
      { status: 429, kind: 'rate-limited', retryable: true },
      { status: 500, kind: 'server', retryable: true },
      { status: 503, kind: 'server', retryable: true },
    ]
    for (const { status, kind, retryable } of cases) {
      test(`${status} → ${kind}${retryable ? ' (retryable)' : ''}, with a bounded snippet and never the key`, async () => {
        const target = await start()
        target.upstream.enqueue({
          kind: 'json',
          status,
          body: target.wire.errorBody(status, `simulated ${status} (key ${target.apiKey} rejected)`),
          headers: status === 429 ? { 'retry-after': '7' } : {},
        })
        const error = await rejection(target.provider.stream(providerCall(testRequest(), target.model)))
        expect(error.kind).toBe(kind)
        expect(error.status).toBe(status)
        expect(error.retryable).toBe(retryable)
        expect(error.provider).toBe(target.provider.id)
        expect(error.model).toBe(target.model)
        expect(error.details.bodySnippet ?? '').toContain(`simulated ${status}`)
        expect(`${error.message} ${error.details.bodySnippet}`).not.toContain(target.apiKey)
        if (status === 429) expect(error.details.retryAfterMs).toBe(7_000)
      })
    }

    test('the key never reaches the message or snippet, JSON-escaped either (QA: the parse after the scrub decoded it)', async () => {
      const target = await start()
      const escaped = [...target.apiKey].map(character => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')
      const body = JSON.stringify(target.wire.errorBody(400, 'invalid key KEY here')).replace('KEY', escaped)
      target.upstream.enqueue({ kind: 'text', status: 400, body, headers: { 'content-type': 'application/json' } })
      const error = await rejection(target.provider.stream(providerCall(testRequest(), target.model)))
      expect(error.details.upstreamMessage).toContain('invalid key [redacted] here')
      expect(`${error.message} ${error.details.bodySnippet} ${error.details.upstreamMessage}`).not.toContain(target.apiKey)
    })

    test('a huge error body is cut to a snippet of about 500 bytes', async () => {
      const target = await start()
      target.upstream.enqueue({ kind: 'text', status: 502, body: `<html>${'x'.repeat(200_000)}</html>`, headers: { 'content-type': 'text/html' } })
      const error = await rejection(target.provider.stream(providerCall(testRequest(), target.model)))
      expect(error.kind).toBe('server')
      expect(new TextEncoder().encode(error.details.bodySnippet ?? '').length).toBeLessThanOrEqual(512)
      expect(error.details.bodySnippet ?? '').toStartWith('<html>xxx')
    })
  })

  describe('mid-stream failures end with one in-band error', () => {
    test('connection reset after some deltas', async () => {
      const target = await start()
      target.upstream.enqueue({ kind: 'sse', body: target.wire.partial('Some words before the reset'), then: 'reset' })
      const events = await collect(await target.provider.stream(providerCall(testRequest(), target.model)))
      assertEventGrammar(events)
      const summary = summarize(events)
      expect(summary.finish).toBeUndefined()
      expect(['connection', 'server']).toContain(summary.error?.kind ?? 'none')
      expect('Some words before the reset').toStartWith(summary.text)
    })

    test('a clean close before the stream says it is finished (truncated SSE)', async () => {
      const target = await start()
      target.upstream.enqueue({ kind: 'sse', body: target.wire.partial('Truncated right here') })
      const events = await collect(await target.provider.stream(providerCall(testRequest(), target.model)))
      assertEventGrammar(events)
      const summary = summarize(events)
      expect(summary.text).toBe('Truncated right here')
      expect(summary.finish).toBeUndefined()
      expect(summary.error?.kind).toBe('server')
    })

    test('malformed JSON in a chunk: one error, nothing forwarded after it', async () => {
      const target = await start()
      const good = target.wire.stream({ text: 'never shown', finish: 'stop', usage: { inputTokens: 1, outputTokens: 2 } })
      const garbage = target.wire.malformedEvent ?? 'data: {not json\n\n'
      target.upstream.enqueue({ kind: 'sse', body: `${target.wire.partial('Before the garbage')}${garbage}${good}` })
      const events = await collect(await target.provider.stream(providerCall(testRequest(), target.model)))
      assertEventGrammar(events)
      const summary = summarize(events)
      expect(summary.text).toBe('Before the garbage')
      expect(summary.finish).toBeUndefined()
      expect(summary.error?.kind).toBe('server')
    })
  })

  // Each case twice: as a first attempt (the provider ties its own controller to the signal),
  // and as the router's last attempt, which lends the call's controller (ProviderCall.abortable):
  // a deadline's abort is then the call's signal's too, and must still read as a timeout.
  for (const lent of [false, true]) {
    const callOf = (target: ConformanceTarget, controller = new AbortController()): ProviderCall =>
      lent ? { ...providerCall(testRequest(), target.model, controller.signal), abortable: controller } : providerCall(testRequest(), target.model, controller.signal)

    describe(`timeouts${lent ? ', the call\'s controller lent' : ''}`, () => {
      test('no response headers before the connect deadline → timeout; the upstream request is cancelled', async () => {
        const target = await start(SHORT_CONNECT)
        target.upstream.enqueue({ kind: 'stall' })
        const controller = new AbortController()
        const error = await rejection(target.provider.stream(callOf(target, controller)))
        expect(error.kind).toBe('timeout')
        expect(error.retryable).toBe(true)
        // Lent, the deadline aborted the call's controller itself (no second controller tied to
        // it); not lent, the caller's signal is untouched, so the router can try another backend.
        expect(controller.signal.aborted).toBe(lent)
        await target.upstream.requests[0]!.disconnected
      })

      test('silence mid-stream past the idle deadline → in-band timeout error after the text so far', async () => {
        const target = await start(SHORT_IDLE)
        target.upstream.enqueue({ kind: 'sse', body: target.wire.partial('Partial answer'), then: 'stall' })
        const controller = new AbortController()
        const events = await collect(await target.provider.stream(callOf(target, controller)))
        assertEventGrammar(events)
        const summary = summarize(events)
        expect(summary.text).toBe('Partial answer')
        expect(summary.finish).toBeUndefined()
        expect(summary.error?.kind).toBe('timeout')
        expect(controller.signal.aborted).toBe(lent)
        await target.upstream.requests[0]!.disconnected
      })
    })

    describe(`cancellation${lent ? ', the call\'s controller lent' : ''}`, () => {
      test('abort mid-stream: the upstream request is cancelled and the iterator ends without a terminal event', async () => {
        const target = await start()
        target.upstream.enqueue({ kind: 'sse', body: target.wire.partial('Streaming until the client leaves'), then: 'stall' })
        const controller = new AbortController()
        const iterator = (await target.provider.stream(callOf(target, controller)))[Symbol.asyncIterator]()
        const events: ChatEvent[] = []
        for (;;) {
          const next = await iterator.next()
          if (next.done) throw new Error('the stream ended before any text')
          events.push(next.value)
          if (next.value.type === 'text-delta') break
        }
        controller.abort()
        for (;;) {
          const next = await iterator.next()
          if (next.done) break
          events.push(next.value)
        }
        assertEventGrammar(events, { terminal: false })
        await target.upstream.requests[0]!.disconnected
      })

      test('abort while waiting for the headers → rejected as aborted; the upstream request is cancelled', async () => {
        const target = await start()
        target.upstream.enqueue({ kind: 'stall' })
        const controller = new AbortController()
        const pending = rejection(target.provider.stream(callOf(target, controller)))
        await target.upstream.request(0)
        controller.abort()
        const error = await pending
        expect(error.kind).toBe('aborted')
        expect(error.retryable).toBe(false)
        await target.upstream.requests[0]!.disconnected
      })

      test('a signal aborted before the call → rejected as aborted', async () => {
        const target = await start()
        const controller = new AbortController()
        controller.abort()
        const error = await rejection(target.provider.stream(callOf(target, controller)))
        expect(error.kind).toBe('aborted')
      })

      test('the consumer stops reading (return): the upstream request is cancelled', async () => {
        const target = await start()
        target.upstream.enqueue({ kind: 'sse', body: target.wire.partial('One two three four'), then: 'stall' })
        const events = await target.provider.stream(callOf(target))
        for await (const event of events) if (event.type === 'text-delta') break
        await target.upstream.requests[0]!.disconnected
      })

      test('the consumer gives up before reading anything (return before next): the upstream request is cancelled', async () => {
        // An async generator that never started skips its `finally` on return(), so an adapter
        // that returns one directly leaks the upstream request here.
        const target = await start()
        target.upstream.enqueue({ kind: 'sse', body: target.wire.partial('Never read'), then: 'stall' })
        const iterator = (await target.provider.stream(callOf(target)))[Symbol.asyncIterator]()
        await iterator.return?.()
        await target.upstream.requests[0]!.disconnected
      })
    })
  }
}
