// Tool-call arguments are a JSON text on the canonical model; Anthropic-shaped wires (the
// provider's requests, the Messages dialect's answers) need a JSON object. One rule for both,
// and its inverse for the Messages dialect's requests.

import { MAX_DEPTH, nestedDeeperThan } from '../http/body-limit'

/** The key that carries tool arguments that were not a JSON object (see parseToolInput). */
export const RAW_ARGUMENTS_KEY = '_raw_arguments'

/**
 * The deepest an input may nest and still come back in a Messages request: its body nests
 * `messages[i].content[j].input` five levels down, and a body may nest MAX_DEPTH.
 */
const MAX_INPUT_DEPTH = MAX_DEPTH - 5

/**
 * `tool_use.input` must be a JSON object. Empty arguments mean `{}`. Arguments that are not a
 * JSON object (truncated JSON from a length stop, or a bare value), or one nested deeper than a
 * request may carry back (QA: 50,000 levels failed to serialize, a charged 400; 62 made the next
 * turn a 400), are replayed verbatim as `{ "_raw_arguments": "<text>" }`, so the history stays
 * valid and the model still sees what it wrote, instead of the request failing with a 400.
 */
export function parseToolInput(argumentsText: string): Record<string, unknown> {
  if (argumentsText.trim() === '') return {}
  try {
    const parsed: unknown = JSON.parse(argumentsText)
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) && !nestedDeeperThan(parsed, MAX_INPUT_DEPTH)) return parsed as Record<string, unknown>
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

/**
 * Whether a call's argument text so far is a whole JSON object or array: no sane backend sends
 * more of it, so a later call may start. Chat Completions backends end their calls only at the
 * finish, and some interleave the deltas of parallel calls (each carries its index), which a
 * client that sees one call's deltas at a time needs undone (see ChatCompletionsStreamEncoder).
 * Parsed only when a later call is waiting, and only text that could have ended.
 */
export function isWholeJson(argumentsText: string): boolean {
  const last = argumentsText.trimEnd().at(-1)
  if (last !== '}' && last !== ']') return false
  try {
    JSON.parse(argumentsText)
    return true
  } catch {
    return false
  }
}

/**
 * Whether a truncated answer cut this call's arguments short: some text, not yet whole JSON. A
 * call without arguments ("") is whole.
 */
export function isCutShort(argumentsText: string): boolean {
  return argumentsText.trim() !== '' && !isWholeJson(argumentsText)
}
