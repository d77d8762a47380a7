/**
 * The shared provider conformance suite (issue 4, point 2; ARCHITECTURE.md §5). Every adapter
 * that talks to an upstream over HTTP runs it against FakeUpstream:
 *
 *   runConformance('openai-compatible', async timeouts => {
 *     const upstream = await FakeUpstream.start()
 *     const provider = new OpenAICompatibleProvider(providerConfig({ type: 'openai-compatible', baseUrl: upstream.url, apiKey: KEY, ...timeouts }))
 *     return { provider, upstream, model: 'gpt-test', apiKey: KEY, wire: openAIWire, close: () => upstream.close() }
 *   })
 *
 * Cases are written once, provider-neutral: each scripts the upstream through the target's
 * WireScript (a TurnScript → that provider's SSE body) and asserts only canonical ChatEvents and
 * UpstreamErrors. `setup` runs once per test with the timeouts that test needs; use them in the
 * ProviderConfig so the timeout cases finish fast.
 *
 * Usage convention checked here (and expected by pricing): `inputTokens` counts the whole prompt
 * with cached tokens included and `cachedInputTokens` is that subset; `outputTokens` counts
 * everything generated, reasoning included, and `reasoningTokens` is that subset. A wire that
 * reports them otherwise (Anthropic's input_tokens excludes cache reads) converts.
 */

import { afterEach, describe, expect, test } from 'bun:test'
import type { ChatEvent, ChatRequest } from '../../src/inference/canonical'
import { UpstreamError, type Provider, type ProviderCall, type UpstreamErrorKind } from '../../src/providers/types'
import type { FakeUpstream } from '../support/fake-upstream'
import { assertEventGrammar, collect, summarize } from './events'
import { END_USER_ID, providerCall, testRequest, timeTool, weatherTool } from './fixtures'

/** One upstream turn, provider-neutral. Blocks are sent in this order: reasoning, text, tool calls. */
export interface TurnScript {
  readonly reasoning?: { readonly text: string; readonly signature?: string }
  readonly text?: string
  readonly toolCalls?: ReadonlyArray<{ readonly callId: string; readonly name: string; readonly arguments: string }>
  readonly finish: 'stop' | 'length' | 'tool-calls'
  /** In the canonical convention (see above); the wire converts. */
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number; readonly cachedInputTokens?: number; readonly reasoningTokens?: number }
}

/** A provider's wire format, for scripting FakeUpstream. */
export interface WireScript {
  /** The complete SSE body of a successful turn, deltas split into small pieces (word by word or finer). */
  stream(turn: TurnScript): string
  /** The same turn as the one JSON answer of a non-streamed request (`stream: false`). */
  json(turn: TurnScript): unknown
  /** The start of a stream and `text` as text deltas, with nothing that ends or finishes it. */
  partial(text: string): string
  /** The JSON error body this upstream sends with an HTTP error status. */
  errorBody(status: number, message: string): unknown
  /**
   * One SSE event whose data is malformed JSON, framed as this wire frames a delta (a wire that
   * dispatches on `event:` names needs one). Default: `data: {not json\n\n`.
   */
  readonly malformedEvent?: string
  /** Whether reasoning blocks carry a signature on this wire. */
  readonly reasoningSignatures: boolean
  /** Whether this wire reports reasoning tokens separately. */
  readonly reportsReasoningTokens: boolean
  /** Whether this wire reports cached input tokens. */
  readonly reportsCachedInputTokens: boolean
}

/** What `setup` returns: a provider wired to a fresh FakeUpstream. */
export interface ConformanceTarget {
  readonly provider: Provider
  readonly upstream: FakeUpstream
  /** The upstream model name passed in each ProviderCall. */
  readonly model: string
  /** The key the provider was configured with: it must never appear in an error. */
  readonly apiKey: string
  readonly wire: WireScript
  close(): Promise<void>
}

/** The timeouts a case needs; put them in the ProviderConfig. */
export interface ConformanceTimeouts {
  readonly connectTimeoutMs: number
  readonly idleTimeoutMs: number
}

const RELAXED: ConformanceTimeouts = { connectTimeoutMs: 5_000, idleTimeoutMs: 5_000 }
/** Small enough to keep the suite fast, large enough for a loaded CI machine to answer a live stream in time. */
const SHORT_CONNECT: ConformanceTimeouts = { connectTimeoutMs: 250, idleTimeoutMs: 5_000 }
const SHORT_IDLE: ConformanceTimeouts = { connectTimeoutMs: 5_000, idleTimeoutMs: 250 }

/** Text with multi-byte UTF-8 (2, 3 and 4 bytes), JSON escapes and a newline, for awkward splits. */
const AWKWARD_TEXT = 'Grüße, 世界! 🌍🚀 naïve "café"\\ ✓\nline two — done.'

/** Registers the conformance cases for one provider. */
export function runConformance(name: string, setup: (timeouts: ConformanceTimeouts) => Promise<ConformanceTarget>): void {
  describe(`${name} conformance`, () => {
    let current: ConformanceTarget | undefined
    const start = async (timeouts: ConformanceTimeouts = RELAXED): Promise<ConformanceTarget> => {
      current = await setup(timeouts)
      return current
    }
    afterEach(async () => {
      await current?.close()
      current = undefined
    })

    /** Streams `request` against a scripted turn and returns the events (grammar checked). */
    const run = async (target: ConformanceTarget, turn: TurnScript, request: ChatRequest, chunkBytes?: number): Promise<ChatEvent[]> => {
      target.upstream.enqueue({ kind: 'sse', body: target.wire.stream(turn), chunkBytes })
      const events = await collect(await target.provider.stream(providerCall(request, target.model)))
      assertEventGrammar(events)
      return events
    }

    describe('streams', () => {
      test('plain text: response-start, one text block, finish stop with the reported usage', async () => {
        const target = await start()
        const turn: TurnScript = { text: 'Hello there, world! How are you today?', finish: 'stop', usage: { inputTokens: 12, outputTokens: 9 } }
        const events = await run(target, turn, testRequest())
        const summary = summarize(events)
        expect(summary.start).toMatchObject({ type: 'response-start' })
        expect(typeof summary.start!.id).toBe('string')
        expect(typeof summary.start!.model).toBe('string')
        expect(Number.isFinite(summary.start!.createdAt)).toBe(true)
        expect(summary.blocks).toEqual([{ block: summary.blocks[0]!.block, kind: 'text' }])
        expect(summary.text).toBe(turn.text!)
        expect(events.filter(event => event.type === 'text-delta').length).toBeGreaterThan(1) // streamed, not buffered
        expect(summary.finish?.reason).toBe('stop')
        expect(summary.finish?.usage).toMatchObject({ inputTokens: 12, outputTokens: 9, webSearchRequests: 0, webFetchRequests: 0 })
      })

      test('the upstream sees one POST with neither the end-user id nor any client identity', async () => {
        const target = await start()
        await run(target, { text: 'ok', finish: 'stop', usage: { inputTokens: 1, outputTokens: 1 } }, testRequest())
        const received = target.upstream.onlyRequest()
        expect(received.method).toBe('POST')
        expect(received.text).not.toContain(END_USER_ID)
        for (const [header, value] of Object.entries(received.headers)) {
          expect(`${header}: ${value}`).not.toContain(END_USER_ID)
          expect(header).not.toMatch(/^x-forwarded|^forwarded$|^x-real-ip$|^x-api-key-client/)
        }
      })

      for (const chunkBytes of [1, 2, 3, 5, 7, 13]) {
        test(`text split every ${chunkBytes} byte(s), through multi-byte characters, arrives intact`, async () => {
          const target = await start()
          const summary = summarize(await run(target, { text: AWKWARD_TEXT, finish: 'stop', usage: { inputTokens: 3, outputTokens: 14 } }, testRequest(), chunkBytes))
          expect(summary.text).toBe(AWKWARD_TEXT)
          expect(summary.finish?.reason).toBe('stop')
        })
      }

      test('length: finish length', async () => {
        const target = await start()
        const summary = summarize(await run(target, { text: 'cut off here', finish: 'length', usage: { inputTokens: 3, outputTokens: 3 } }, testRequest()))
        expect(summary.finish?.reason).toBe('length')
        expect(summary.text).toBe('cut off here')
      })
    })

    describe('tools', () => {
      const toolRequest = () => testRequest({ tools: [weatherTool, timeTool] }, 'Weather and time in Paris?')

      test('one tool call: start with id and name, argument deltas, finish tool-calls', async () => {
        const target = await start()
        const call = { callId: 'call_weather_1', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' }
        const events = await run(target, { toolCalls: [call], finish: 'tool-calls', usage: { inputTokens: 40, outputTokens: 12 } }, toolRequest())
        const summary = summarize(events)
        expect(summary.toolCalls.map(({ callId, name, arguments: args }) => ({ callId, name, arguments: args }))).toEqual([call])
        expect(JSON.parse(summary.toolCalls[0]!.arguments)).toEqual({ city: 'Paris', unit: 'celsius' })
        expect(summary.finish?.reason).toBe('tool-calls')
      })

      test('parallel tool calls become distinct blocks in order, each with its own arguments', async () => {
        const target = await start()
        const calls = [
          { callId: 'call_a', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
          { callId: 'call_b', name: 'get_time', arguments: '{"zone":"Europe/Paris"}' },
          { callId: 'call_c', name: 'get_weather', arguments: '{"city":"Oslo","unit":"fahrenheit"}' },
        ]
        const summary = summarize(await run(target, { toolCalls: calls, finish: 'tool-calls', usage: { inputTokens: 40, outputTokens: 30 } }, toolRequest()))
        expect(summary.toolCalls.map(({ callId, name, arguments: args }) => ({ callId, name, arguments: args }))).toEqual(calls)
        expect(new Set(summary.toolCalls.map(call => call.block)).size).toBe(3)
        expect(summary.finish?.reason).toBe('tool-calls')
      })

      test('text, then a tool call: two blocks in that order', async () => {
        const target = await start()
        const call = { callId: 'call_t', name: 'get_time', arguments: '{"zone":"UTC"}' }
        const summary = summarize(await run(target, { text: 'Let me check the time.', toolCalls: [call], finish: 'tool-calls', usage: { inputTokens: 30, outputTokens: 15 } }, toolRequest()))
        expect(summary.blocks.map(block => block.kind)).toEqual(['text', 'tool-call'])
        expect(summary.text).toBe('Let me check the time.')
        expect(summary.toolCalls[0]).toMatchObject(call)
      })
    })

    describe('reasoning and usage', () => {
      const reasoningRequest = () => testRequest({ reasoning: { effort: 'medium', budgetTokens: 2048 } }, 'What is 2 + 2?')

      test('reasoning first, then text; the signature when the wire has one', async () => {
        const target = await start()
        const turn: TurnScript = {
          reasoning: { text: 'Two plus two. Simple arithmetic: four.', signature: 'sig-Zm9vYmFy' },
          text: 'The answer is 4.',
          finish: 'stop',
          usage: { inputTokens: 20, outputTokens: 30, reasoningTokens: 12 },
        }
        const summary = summarize(await run(target, turn, reasoningRequest()))
        expect(summary.blocks.map(block => block.kind)).toEqual(['reasoning', 'text'])
        expect(summary.reasoning).toBe(turn.reasoning!.text)
        expect(summary.text).toBe(turn.text!)
        expect(summary.reasoningSignatures).toEqual([target.wire.reasoningSignatures ? turn.reasoning!.signature : undefined])
        expect(summary.finish?.usage.outputTokens).toBe(30)
        if (target.wire.reportsReasoningTokens) expect(summary.finish?.usage.reasoningTokens).toBe(12)
      })

      test('reasoning before tool calls is kept (reasoning, then the call)', async () => {
        const target = await start()
        const call = { callId: 'call_r', name: 'get_weather', arguments: '{"city":"Rome","unit":"celsius"}' }
        const turn: TurnScript = { reasoning: { text: 'I need the weather tool.', signature: 'sig-cmVhc29u' }, toolCalls: [call], finish: 'tool-calls', usage: { inputTokens: 50, outputTokens: 25 } }
        const summary = summarize(await run(target, turn, testRequest({ tools: [weatherTool], reasoning: { effort: 'low', budgetTokens: 1024 } }, 'Weather in Rome?')))
        expect(summary.blocks.map(block => block.kind)).toEqual(['reasoning', 'tool-call'])
        expect(summary.reasoning).toBe(turn.reasoning!.text)
        expect(summary.toolCalls[0]).toMatchObject(call)
      })

      test('usage with cached and reasoning tokens, exactly as reported', async () => {
        const target = await start()
        const usage = { inputTokens: 1_200, cachedInputTokens: 1_000, outputTokens: 50, reasoningTokens: 20 }
        const summary = summarize(await run(target, { reasoning: { text: 'Short thought.', signature: 'sig-dXNhZ2U=' }, text: 'Done.', finish: 'stop', usage }, reasoningRequest()))
        const reported = summary.finish!.usage
        expect(reported.inputTokens).toBe(1_200)
        expect(reported.outputTokens).toBe(50)
        expect(reported.webSearchRequests).toBe(0)
        expect(reported.webFetchRequests).toBe(0)
        if (target.wire.reportsCachedInputTokens) expect(reported.cachedInputTokens).toBe(1_000)
        if (target.wire.reportsReasoningTokens) expect(reported.reasoningTokens).toBe(20)
      })
    })

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
  })
}

/** The UpstreamError a promise rejects with; fails the test if it resolves or rejects otherwise. */
export async function rejection(promise: Promise<unknown>): Promise<UpstreamError> {
  try {
    await promise
  } catch (error) {
    if (error instanceof UpstreamError) return error
    throw new Error(`expected an UpstreamError, got ${String(error)}`)
  }
  throw new Error('expected the call to reject before any event, but it resolved')
}
