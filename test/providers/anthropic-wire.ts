import type { ModelRoute } from '../../src/catalog/types'
import type { TurnScript, WireScript } from './conformance'

// Anthropic's Messages SSE for scripted upstreams: the conformance suite and the end-to-end
// tests both speak it through this one script.

const MODEL = 'claude-test-model'

/** One SSE event the way Anthropic frames it: the event name repeats the data's `type`. */
const event = (data: { type: string } & Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`

/** Small pieces (three code points each) so every block streams as several deltas. */
function pieces(text: string): string[] {
  const points = Array.from(text)
  const out: string[] = []
  for (let index = 0; index < points.length; index += 3) out.push(points.slice(index, index + 3).join(''))
  return out
}

const STOP_REASON: Record<TurnScript['finish'], string> = { stop: 'end_turn', length: 'max_tokens', 'tool-calls': 'tool_use' }

/** Anthropic's HTTP error bodies carry an `error.type` named after the status. */
const ERROR_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
}

function messageStart(usage: TurnScript['usage'] = { inputTokens: 5, outputTokens: 0 }): string {
  const cached = usage.cachedInputTokens ?? 0
  return event({
    type: 'message_start',
    message: {
      id: 'msg_conformance',
      type: 'message',
      role: 'assistant',
      model: MODEL,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      // Anthropic's input_tokens excludes cache reads: the canonical total is split back apart.
      usage: { input_tokens: usage.inputTokens - cached, cache_creation_input_tokens: 0, cache_read_input_tokens: cached, output_tokens: 1 },
    },
  })
}

function textBlock(index: number, text: string): string {
  let body = event({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } })
  for (const piece of pieces(text)) body += event({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } })
  return body
}

/** The Messages API wire for the shared suite. */
export const anthropicWire: WireScript = {
  stream(turn) {
    let body = messageStart(turn.usage)
    let index = 0
    if (turn.reasoning !== undefined) {
      body += event({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } })
      for (const piece of pieces(turn.reasoning.text)) body += event({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: piece } })
      if (turn.reasoning.signature !== undefined) body += event({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: turn.reasoning.signature } })
      body += event({ type: 'content_block_stop', index })
      index += 1
    }
    if (turn.text !== undefined) {
      body += textBlock(index, turn.text) + event({ type: 'ping' }) + event({ type: 'content_block_stop', index })
      index += 1
    }
    for (const call of turn.toolCalls ?? []) {
      body += event({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: call.callId, name: call.name, input: {} } })
      body += event({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: '' } })
      for (const piece of pieces(call.arguments)) body += event({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } })
      body += event({ type: 'content_block_stop', index })
      index += 1
    }
    body += event({ type: 'message_delta', delta: { stop_reason: STOP_REASON[turn.finish], stop_sequence: null }, usage: { output_tokens: turn.usage.outputTokens } })
    return body + event({ type: 'message_stop' })
  },
  json(turn) {
    const content: unknown[] = []
    if (turn.reasoning !== undefined) content.push({ type: 'thinking', thinking: turn.reasoning.text, signature: turn.reasoning.signature ?? '' })
    if (turn.text !== undefined) content.push({ type: 'text', text: turn.text })
    for (const call of turn.toolCalls ?? []) content.push({ type: 'tool_use', id: call.callId, name: call.name, input: JSON.parse(call.arguments || '{}') })
    const cached = turn.usage.cachedInputTokens ?? 0
    return {
      id: 'msg_conformance', type: 'message', role: 'assistant', model: MODEL, content, stop_reason: STOP_REASON[turn.finish], stop_sequence: null,
      usage: { input_tokens: turn.usage.inputTokens - cached, cache_creation_input_tokens: 0, cache_read_input_tokens: cached, output_tokens: turn.usage.outputTokens },
    }
  },
  partial(text) {
    return messageStart() + textBlock(0, text)
  },
  errorBody(status, message) {
    return { type: 'error', error: { type: ERROR_TYPE[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'), message } }
  },
  reasoningSignatures: true,
  // Thinking tokens are inside output_tokens; Anthropic does not report them apart.
  reportsReasoningTokens: false,
  reportsCachedInputTokens: true,
}

/** The Claude model the Anthropic provider tests route to. */
export const CLAUDE_MODEL = 'claude-sonnet-4-5-20250929'

/** A catalog route `claude` on one Anthropic backend (3 / 15 USD per Mtok, 200k context, 8192 out). */
export function claudeRoute(overrides: Partial<ModelRoute> = {}): ModelRoute {
  return {
    id: 'claude',
    modelId: 'claude',
    level: 'anonymous',
    backends: [{ provider: 'claude', model: CLAUDE_MODEL, weight: 1, uncensored: false }],
    routing: 'ordered',
    price: { inputPerMillion: 3_000_000_000n, outputPerMillion: 15_000_000_000n },
    capabilities: { tools: true, reasoning: true, vision: true, supportsWebFetch: false, supportsWebSearch: false, fileInput: false },
    contextLength: 200_000,
    maxOutputTokens: 8192,
    ...overrides,
  }
}
