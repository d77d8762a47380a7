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
 *
 * The happy paths are here; the failure cases (upstream errors, cut streams, deadlines,
 * cancellation) are in conformance-failures.ts.
 */

import { afterEach, describe, expect, test } from 'bun:test'
import type { ChatEvent, ChatRequest } from '../../src/inference/canonical'
import type { Provider } from '../../src/providers/types'
import type { FakeUpstream } from '../support/fake-upstream'
import { runFailureCases } from './conformance-failures'
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

    runFailureCases(start)
  })
}
