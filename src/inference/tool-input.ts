// Tool-call arguments are a JSON text on the canonical model; Anthropic-shaped wires (the
// provider's requests, the Messages dialect's answers) need a JSON object. One rule for both.

/** The key that carries tool arguments that were not a JSON object (see parseToolInput). */
export const RAW_ARGUMENTS_KEY = '_raw_arguments'

/**
 * `tool_use.input` must be a JSON object. Empty arguments mean `{}`. Arguments that are not a
 * JSON object (truncated JSON from a length stop, or a bare value) are replayed verbatim as
 * `{ "_raw_arguments": "<text>" }`, so the history stays valid and the model still sees what
 * it wrote, instead of the request failing with a 400.
 */
export function parseToolInput(argumentsText: string): Record<string, unknown> {
  if (argumentsText.trim() === '') return {}
  try {
    const parsed: unknown = JSON.parse(argumentsText)
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>
  } catch {
    // fall through to the wrapper
  }
  return { [RAW_ARGUMENTS_KEY]: argumentsText }
}
