// The Chat Completions wire for the conformance suite and the openai-compatible tests: chunks
// shaped like OpenAI's (role chunk first, word-sized deltas, tool-call deltas keyed by index,
// a finish chunk, then a choices-less usage chunk, then [DONE]).

import type { TurnScript, WireScript } from './conformance'

const BASE = { id: 'chatcmpl-test123', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'upstream-model-2025', system_fingerprint: 'fp_test' }

/** One `data:` frame of a chunk with choice 0's `delta` and `finish_reason`, plus top-level `extra`. */
export function chunk(delta: Record<string, unknown>, finishReason: string | null = null, extra: Record<string, unknown> = {}): string {
  return frame({ ...BASE, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }], ...extra })
}

/** One `data:` frame of any JSON value. */
export function frame(value: unknown): string {
  return `data: ${JSON.stringify(value)}\n\n`
}

export const DONE = 'data: [DONE]\n\n'

/** Words with their trailing whitespace: what the deltas of a real stream look like. */
export function pieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? []
}

/** `text` cut every `size` characters (tool-call arguments arrive in small fragments). */
export function fragments(text: string, size: number): string[] {
  const result: string[] = []
  for (let index = 0; index < text.length; index += size) result.push(text.slice(index, index + size))
  return result
}

/** The usage object OpenAI reports, from the canonical numbers. */
export function openAIUsage(usage: TurnScript['usage']): Record<string, unknown> {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedInputTokens ?? 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  }
}

const FINISH = { stop: 'stop', length: 'length', 'tool-calls': 'tool_calls' } as const

export const openAIWire: WireScript = {
  reasoningSignatures: false,
  reportsReasoningTokens: true,
  reportsCachedInputTokens: true,
  stream(turn) {
    let body = chunk({ role: 'assistant', content: '' })
    if (turn.reasoning) for (const piece of pieces(turn.reasoning.text)) body += chunk({ reasoning_content: piece })
    if (turn.text) for (const piece of pieces(turn.text)) body += chunk({ content: piece })
    turn.toolCalls?.forEach((call, index) => {
      body += chunk({ tool_calls: [{ index, id: call.callId, type: 'function', function: { name: call.name, arguments: '' } }] })
      for (const piece of fragments(call.arguments, 5)) body += chunk({ tool_calls: [{ index, function: { arguments: piece } }] })
    })
    body += chunk({}, FINISH[turn.finish])
    body += frame({ ...BASE, choices: [], usage: openAIUsage(turn.usage) })
    return body + DONE
  },
  json(turn) {
    const message: Record<string, unknown> = { role: 'assistant', content: turn.text ?? null, refusal: null }
    if (turn.reasoning) message.reasoning_content = turn.reasoning.text
    if (turn.toolCalls?.length) message.tool_calls = turn.toolCalls.map(call => ({ id: call.callId, type: 'function', function: { name: call.name, arguments: call.arguments } }))
    const { object: _, ...base } = BASE
    return { ...base, object: 'chat.completion', choices: [{ index: 0, message, logprobs: null, finish_reason: FINISH[turn.finish] }], usage: openAIUsage(turn.usage) }
  },
  partial(text) {
    let body = chunk({ role: 'assistant', content: '' })
    for (const piece of pieces(text)) body += chunk({ content: piece })
    return body
  },
  errorBody(status, message) {
    const type = status === 429 ? 'rate_limit_exceeded' : status === 401 ? 'invalid_api_key' : status >= 500 ? 'server_error' : 'invalid_request_error'
    return { error: { message, type, param: null, code: type } }
  },
}
