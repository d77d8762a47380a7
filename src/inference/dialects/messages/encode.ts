import type { FinishDetail, FinishReason, Usage } from '../../canonical'
import type { ChatResult, ResultBlock } from '../../collect'
import { parseToolInput } from '../../tool-input'
import type { ResponseMeta } from '../types'

/**
 * Canonical finish → Anthropic stop_reason. `stop` is `stop_sequence` when the upstream said
 * which sequence matched (only Anthropic backends do; a Chat Completions backend reports a
 * stop sequence as a plain stop, which becomes end_turn), and `length` is
 * `model_context_window_exceeded` when the context, not max_tokens, ran out. A content filter is
 * `refusal`; errors never reach a finished message.
 */
export function stopReason(reason: FinishReason, detail: FinishDetail): string {
  switch (reason) {
    case 'stop':
      return detail.stopSequence !== undefined ? 'stop_sequence' : 'end_turn'
    case 'length':
      return detail.contextWindowExceeded === true ? 'model_context_window_exceeded' : 'max_tokens'
    case 'tool-calls':
      return 'tool_use'
    case 'content-filter':
      return 'refusal'
    default:
      return 'end_turn'
  }
}

/**
 * Anthropic's usage object. Its `input_tokens` excludes cache reads and cache writes (canonical
 * input includes both); cache writes are known only from an Anthropic backend (0 otherwise), and
 * when there are some, `cache_creation` splits them by lifetime as they were billed.
 * `server_tool_use: {web_search_requests, web_fetch_requests}` is Anthropic's own field for hosted tool runs: present whenever the request enabled hosted web
 * tools (`serverToolUse`), zero counts included, as on the other client formats.
 */
export function usageObject(usage: Usage, serverToolUse = false) {
  const cached = Math.min(usage.cachedInputTokens ?? 0, usage.inputTokens)
  const written = Math.min(usage.cacheWriteInputTokens ?? 0, usage.inputTokens - cached)
  const object: Record<string, unknown> = {
    input_tokens: usage.inputTokens - cached - written,
    cache_creation_input_tokens: written,
    cache_read_input_tokens: cached,
    output_tokens: usage.outputTokens,
  }
  if (written > 0) {
    const hour = Math.min(usage.cacheWrite1hInputTokens ?? 0, written)
    object.cache_creation = { ephemeral_5m_input_tokens: written - hour, ephemeral_1h_input_tokens: hour }
  }
  if (serverToolUse || usage.webSearchRequests || usage.webFetchRequests) {
    object.server_tool_use = { web_search_requests: usage.webSearchRequests, web_fetch_requests: usage.webFetchRequests }
  }
  return object
}

/** One content block of a message, as Anthropic shapes it. */
export function contentBlock(block: ResultBlock): Record<string, unknown> {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text }
    case 'reasoning':
      // A redacted block's opaque data rides in `signature` on the canonical model. Reasoning
      // from an upstream that does not sign has an empty signature (the field is required).
      if (block.redacted) return { type: 'redacted_thinking', data: block.signature ?? '' }
      return { type: 'thinking', thinking: block.text, signature: block.signature ?? '' }
    case 'tool-call':
      return { type: 'tool_use', id: block.callId, name: block.name, input: parseToolInput(block.arguments) }
  }
}

/**
 * A non-streamed `message` object; blocks keep the order the upstream produced them in, an
 * empty text block included (Claude writes one before a tool_use at times, and Anthropic's own
 * reply keeps it, streamed or not). The stream cannot leave it out: a block's start goes out
 * before its text is known, and a same-format pass-through sends the upstream's events as they
 * are; so the whole reply keeps it too, and a client's finalMessage() and create() agree.
 */
export function encodeMessage(result: ChatResult, usage: Usage, meta: ResponseMeta) {
  return {
    id: meta.id,
    type: 'message',
    role: 'assistant',
    model: meta.model,
    content: result.blocks.map(contentBlock),
    stop_reason: stopReason(result.finishReason, result),
    stop_sequence: result.finishReason === 'stop' ? (result.stopSequence ?? null) : null,
    usage: usageObject(usage, meta.serverToolUse),
  }
}
