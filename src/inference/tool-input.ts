// Tool-call arguments are a JSON text on the canonical model; Anthropic-shaped wires (the
// provider's requests, the Messages dialect's answers) need a JSON object. One rule for both,
// and its inverse for the Messages dialect's requests.

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

/**
 * The arguments text a `tool_use.input` stands for (a Messages client's history), the inverse
 * of parseToolInput: an input whose only key is `_raw_arguments`, a string, is the text the
 * model wrote, and a Chat Completions backend, whose wire carries arguments as text, gets it back
 * as written (an Anthropic backend gets the same wrapper again). Any other input is its JSON.
 */
export function toolArgumentsText(input: Record<string, unknown>): string {
  const raw = input[RAW_ARGUMENTS_KEY]
  if (typeof raw === 'string' && Object.keys(input).length === 1) return raw
  return JSON.stringify(input)
}
