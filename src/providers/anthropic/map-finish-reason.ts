import type { FinishReason } from '../../inference/canonical'

/**
 * Anthropic `stop_reason` → canonical finish reason.
 *
 * - `end_turn`, `stop_sequence` → `stop`; `max_tokens` → `length`; `tool_use` → `tool-calls`.
 * - `refusal` (the streaming classifier stopped the answer) → `content-filter`.
 * - `model_context_window_exceeded` is a length stop: the context, not max_tokens, ran out (the
 *   finish says so in its detail, contextWindowExceeded, for Messages clients).
 * - `pause_turn` (a server tool paused a long turn; we never send server tools) and anything
 *   new or missing → `other`, so an unknown value never breaks a stream.
 */
export function mapFinishReason(stopReason: string | null | undefined): FinishReason {
  switch (stopReason) {
    case 'end_turn':
    case 'stop_sequence':
      return 'stop'
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length'
    case 'tool_use':
      return 'tool-calls'
    case 'refusal':
      return 'content-filter'
    default:
      return 'other'
  }
}
