/**
 * Collected calls (ProviderCall.collect: the upstream asked for one JSON answer, `stream: false`)
 * against streamed ones. The same upstream turn, answered as SSE to a streamed call and as JSON
 * to a collected one, must fold into the same answer (src/inference/collect.ts: blocks, finish
 * reason, stop sequence, usage), and failures must classify the same (kind, status, message), so
 * a non-streamed client sees exactly what it saw when the gateway collected a stream.
 *
 * `jsonFromSse` turns a recorded stream into the JSON answer the same upstream gives to
 * `stream: false`. It is written here, independently of the adapters' own translators, so the
 * golden test (test/inference/collected-golden.test.ts) can run every recorded upstream stream
 * both ways.
 */

import { afterEach, describe, expect, test } from 'bun:test'
import type { ChatRequest } from '../../src/inference/canonical'
import { collect as fold } from '../../src/inference/collect'
import { UpstreamError } from '../../src/providers/types'
import type { ConformanceTarget, TurnScript } from './conformance'
import { providerCall, testRequest, timeTool, weatherTool } from './fixtures'

/** The HTTP backends whose adapters can collect. */
export type CollectBackend = 'openai-compatible' | 'anthropic'

/** The data of each SSE event of a body, with its event name (`[DONE]` left out). */
function sseEvents(sse: string): Array<{ event: string | undefined; data: string }> {
  const events: Array<{ event: string | undefined; data: string }> = []
  for (const block of sse.split(/\r?\n\r?\n/)) {
    let event: string | undefined
    const data: string[] = []
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith('event:')) event = line.slice(6).trim()
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''))
    }
    if (data.length > 0 && data.join('\n') !== '[DONE]') events.push({ event, data: data.join('\n') })
  }
  return events
}

/**
 * The JSON answer an upstream gives to `stream: false` for the turn it streamed as `sse`: a
 * chat.completion or a Messages `message`. A stream that failed in-band becomes the error
 * object the same failure takes in a 200 JSON body.
 */
export function jsonFromSse(backend: CollectBackend, sse: string): unknown {
  return backend === 'openai-compatible' ? chatCompletionFromSse(sse) : messageFromSse(sse)
}

function chatCompletionFromSse(sse: string): unknown {
  let base: Record<string, unknown> | undefined
  const message: Record<string, unknown> = { role: 'assistant', content: null }
  const tools = new Map<number, { id?: string; type: 'function'; function: { name: string; arguments: string } }>()
  let finishReason: unknown = null
  let usage: unknown
  for (const { data } of sseEvents(sse)) {
    const chunk = JSON.parse(data) as Record<string, any>
    if (chunk.error !== undefined) return { error: chunk.error }
    const { choices, usage: chunkUsage, object: _, ...rest } = chunk
    base ??= rest
    if (chunkUsage) usage = chunkUsage
    const choice = (choices as any[] | undefined)?.find(item => (item.index ?? 0) === 0)
    if (choice === undefined) continue
    const delta = choice.delta ?? {}
    for (const key of ['content', 'reasoning_content', 'reasoning', 'refusal'] as const) {
      if (typeof delta[key] === 'string' && delta[key] !== '') message[key] = ((message[key] as string | null | undefined) ?? '') + delta[key]
    }
    for (const call of delta.tool_calls ?? []) {
      const tool = tools.get(call.index) ?? { type: 'function' as const, function: { name: '', arguments: '' } }
      tools.set(call.index, tool)
      if (call.id) tool.id = call.id
      if (call.function?.name) tool.function.name = call.function.name
      if (typeof call.function?.arguments === 'string') tool.function.arguments += call.function.arguments
    }
    if (choice.finish_reason) finishReason = choice.finish_reason
  }
  if (tools.size > 0) message.tool_calls = [...tools.entries()].sort(([a], [b]) => a - b).map(([, tool]) => tool)
  return { ...base, object: 'chat.completion', choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }], ...(usage ? { usage } : {}) }
}

function messageFromSse(sse: string): unknown {
  let message: Record<string, any> = { type: 'message', role: 'assistant', content: [], stop_reason: null, stop_sequence: null, usage: {} }
  const partialJson = new Map<number, string>()
  for (const { data } of sseEvents(sse)) {
    const event = JSON.parse(data) as Record<string, any>
    switch (event.type) {
      case 'error':
        return event
      case 'message_start':
        message = { ...event.message, content: [], usage: { ...event.message.usage } }
        break
      case 'content_block_start':
        message.content[event.index] = { ...event.content_block }
        if (event.content_block.type === 'tool_use') partialJson.set(event.index, '')
        break
      case 'content_block_delta': {
        const block = message.content[event.index]
        const delta = event.delta
        if (delta.type === 'text_delta') block.text += delta.text
        else if (delta.type === 'thinking_delta') block.thinking += delta.thinking
        else if (delta.type === 'signature_delta') block.signature += delta.signature
        else if (delta.type === 'input_json_delta') partialJson.set(event.index, partialJson.get(event.index)! + delta.partial_json)
        break
      }
      case 'content_block_stop': {
        const json = partialJson.get(event.index)
        if (json !== undefined) message.content[event.index].input = JSON.parse(json === '' ? '{}' : json)
        break
      }
      case 'message_delta':
        message.stop_reason = event.delta.stop_reason
        message.stop_sequence = event.delta.stop_sequence ?? null
        Object.assign(message.usage, event.usage)
        break
    }
  }
  return message
}

/** What a collected-call case needs of a provider: its target, built with this response deadline. */
export type CollectSetup = (timeouts: { connectTimeoutMs: number; idleTimeoutMs: number; responseTimeoutMs: number }) => Promise<ConformanceTarget>

const RELAXED = { connectTimeoutMs: 5_000, idleTimeoutMs: 5_000, responseTimeoutMs: 5_000 }

/** Turns both wires can carry, with tool arguments as compact JSON (how a collected Anthropic answer renders them). */
const TURNS: Array<{ name: string; turn: TurnScript; request?: Partial<ChatRequest> }> = [
  { name: 'text', turn: { text: 'Hello there, how can I help you today?', finish: 'stop', usage: { inputTokens: 12, outputTokens: 9 } } },
  { name: 'multi-byte text', turn: { text: 'Grüße, 世界! 🌍🚀 naïve "café"\\ ✓\nline two — done.', finish: 'stop', usage: { inputTokens: 7, outputTokens: 21 } } },
  {
    name: 'reasoning, text and cached input',
    turn: { reasoning: { text: 'The user greets me; answer briefly.', signature: 'sig-collected' }, text: 'Hi!', finish: 'stop', usage: { inputTokens: 1234, outputTokens: 56, cachedInputTokens: 1000, reasoningTokens: 40 } },
  },
  { name: 'length', turn: { text: 'This answer was cut at the output', finish: 'length', usage: { inputTokens: 5, outputTokens: 8 } } },
  {
    name: 'parallel tool calls',
    turn: {
      text: 'Let me check.',
      toolCalls: [
        { callId: 'call_weather_1', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
        { callId: 'call_time_2', name: 'get_time', arguments: '{"zone":"Europe/Oslo"}' },
      ],
      finish: 'tool-calls',
      usage: { inputTokens: 80, outputTokens: 31 },
    },
    request: { tools: [weatherTool, timeTool] },
  },
]

/**
 * Registers the collected-call cases for one provider: every turn streamed and collected folds
 * into the same answer; the collected request asks for JSON; an error object in a 200 rejects
 * before any event (retryable, so the router falls back); error statuses classify as when
 * streamed.
 */
export function runCollectConformance(name: string, setup: CollectSetup): void {
  describe(`${name}: collected calls match streamed ones`, () => {
    let current: ConformanceTarget | undefined
    const start = async () => (current = await setup(RELAXED))
    afterEach(async () => {
      await current?.close()
      current = undefined
    })
    const call = (target: ConformanceTarget, request: ChatRequest, collect: boolean) => ({ ...providerCall(request, target.model), collect })

    for (const { name: turnName, turn, request: overrides } of TURNS) {
      test(`${turnName}: the same answer, usage and finish`, async () => {
        const target = await start()
        const request = testRequest({ stream: false, ...overrides })
        target.upstream.enqueue({ kind: 'sse', body: target.wire.stream(turn), chunkBytes: 17 }, { kind: 'json', body: target.wire.json(turn) })
        const streamed = await fold(await target.provider.stream(call(target, request, false)), () => {})
        const collected = await fold(await target.provider.stream(call(target, request, true)), () => {})
        expect(collected.error).toBeUndefined()
        expect(collected).toEqual(streamed)
        const [streamedRequest, collectedRequest] = target.upstream.requests
        expect(streamedRequest!.body.stream).toBe(true)
        expect(collectedRequest!.body.stream).toBe(false)
        expect(collectedRequest!.body.stream_options).toBeUndefined()
        expect(collectedRequest!.headers.accept).toBe('application/json')
        // Apart from the stream switches, the upstream is asked the same thing.
        const { stream: _a, stream_options: _b, ...streamedRest } = streamedRequest!.body
        const { stream: _c, ...collectedRest } = collectedRequest!.body
        expect(collectedRest).toEqual(streamedRest)
      })
    }

    test('an error object in a 200 JSON answer rejects before any event, retryable', async () => {
      const target = await start()
      target.upstream.enqueue({ kind: 'json', body: target.wire.errorBody(529, 'Overloaded, try again') })
      const error = await target.provider.stream(call(target, testRequest({ stream: false }), true)).then(
        () => undefined,
        (thrown: unknown) => thrown,
      )
      expect(error).toBeInstanceOf(UpstreamError)
      expect((error as UpstreamError).retryable).toBe(true)
      expect((error as UpstreamError).message).toContain('Overloaded, try again')
    })

    test('malformed JSON in a 200 rejects before any event', async () => {
      const target = await start()
      target.upstream.enqueue({ kind: 'text', status: 200, body: '{"id": "cut', headers: { 'content-type': 'application/json' } })
      const error = await target.provider.stream(call(target, testRequest({ stream: false }), true)).then(
        () => undefined,
        (thrown: unknown) => thrown,
      )
      expect(error).toBeInstanceOf(UpstreamError)
      expect((error as UpstreamError).kind).toBe('server')
    })

    for (const status of [400, 401, 404, 429, 500, 529]) {
      test(`HTTP ${status}: classified as when streamed`, async () => {
        const target = await start()
        const answer = { kind: 'json' as const, status, body: target.wire.errorBody(status, `status ${status} said no`), headers: { 'retry-after': '7' } }
        target.upstream.enqueue(answer, answer)
        const failure = async (collect: boolean) => {
          const thrown = await target.provider.stream(call(target, testRequest({ stream: false }), collect)).then(
            () => undefined,
            (error: unknown) => error,
          )
          expect(thrown).toBeInstanceOf(UpstreamError)
          const error = thrown as UpstreamError
          return { kind: error.kind, message: error.message, details: error.details }
        }
        expect(await failure(true)).toEqual(await failure(false))
      })
    }
  })
}
