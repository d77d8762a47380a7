import type { FinishReason } from '../../inference/canonical'

/**
 * Chat Completions `finish_reason` → canonical. `function_call` is the legacy name of
 * `tool_calls`. Backends differ on a turn that called tools: OpenAI answers `stop` when
 * `tool_choice` forced a function, and Ollama and some llama.cpp builds answer `stop` too.
 * Clients loop on "the model wants tools" (a Messages client needs `tool_use`), so a turn that
 * produced tool calls and stopped normally maps to `tool-calls`. `eos` is what some older
 * vLLM and TGI builds send for a natural end.
 */
export function mapFinishReason(reason: string, sawToolCalls: boolean): FinishReason {
  switch (reason) {
    case 'stop':
    case 'eos':
      return sawToolCalls ? 'tool-calls' : 'stop'
    case 'length':
      return 'length'
    case 'tool_calls':
    case 'function_call':
      return 'tool-calls'
    case 'content_filter':
      return 'content-filter'
    default:
      return 'other'
  }
}
