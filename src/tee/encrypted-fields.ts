// What an Encrypted Chat Completions body may carry (spec §4.10; TEE-PROTOCOL.md A2, B3 rows
// 5–7), in one place for the gateway, which refuses anything else, and the client library, which
// refuses it before sending: a field outside these lists would travel in plaintext.

import { REQUIRED_WITHOUT_TOOLS, unsupportedValue, type Refusal } from '../inference/dialects/chat-completions/unsupported-values'
import type { E2eeFamily } from './proof-format'

export type { Refusal } from '../inference/dialects/chat-completions/unsupported-values'

/** The top-level fields of an Encrypted body: content goes as ciphertext, the rest is plaintext the gateway checks. */
export const ENCRYPTED_TOP_LEVEL: ReadonlySet<string> = new Set([
  'model', 'messages', 'stream', 'stream_options', 'tools', 'tool_choice', 'parallel_tool_calls', 'temperature', 'top_p', 'max_tokens',
  'max_completion_tokens', 'stop', 'seed', 'user', 'safety_identifier', 'prompt_cache_key', 'response_format', 'reasoning_effort', 'n',
  'presence_penalty', 'frequency_penalty', 'logprobs', 'top_logprobs', 'verbosity', 'modalities', 'metadata', 'store', 'service_tier',
  'logit_bias', 'prediction', 'audio', 'web_fetch', 'web_search', 'uncensored',
])

/**
 * The keys of an Encrypted function tool's `function`: NEAR backends decrypt name, description and
 * parameters (TEE-PROTOCOL.md A2), and `strict` travels as the plaintext boolean it is.
 */
export const ENCRYPTED_FUNCTION_KEYS: ReadonlySet<string> = new Set(['name', 'description', 'parameters', 'strict'])

/** The keys an Encrypted message of each role may carry. */
export const ENCRYPTED_MESSAGE_KEYS: Readonly<Record<string, ReadonlySet<string>>> = {
  system: new Set(['role', 'content', 'name']),
  developer: new Set(['role', 'content', 'name']),
  user: new Set(['role', 'content', 'name']),
  assistant: new Set(['role', 'content', 'name', 'tool_calls', 'reasoning_content', 'reasoning', 'refusal']),
  tool: new Set(['role', 'content', 'tool_call_id']),
}

/** Fields of a history message, besides `content`, that carry what the model said. */
export const HISTORY_TEXT_FIELDS = ['reasoning_content', 'reasoning', 'refusal'] as const
export type HistoryTextField = (typeof HISTORY_TEXT_FIELDS)[number]

/**
 * Why a backend of this family would not decrypt `field` of a history message, or undefined when
 * it does (TEE-PROTOCOL.md A2, Encrypted fields). A field it does not decrypt reaches the model as
 * ciphertext read as text, and in plaintext it would expose content to the gateway: it cannot be
 * sent at all. Phala decrypts only `content`; NEAR decrypts reasoning always, `refusal` only with
 * all-fields (leniently).
 */
export function undecryptedHistoryField(e2ee: { readonly family: E2eeFamily }, field: HistoryTextField, allFields: boolean): string | undefined {
  if (e2ee.family === 'phala') return 'Phala-family backends decrypt only message content'
  if (field === 'refusal' && !allFields) return 'NEAR-family backends decrypt refusal only with svc-encrypted-encrypt-all-fields: 1'
  return undefined
}

const present = (value: unknown) => value !== undefined && value !== null
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * The first plaintext value of an Encrypted body the gateway refuses, or undefined: the plain
 * route's rules (unsupportedValue), then the Encrypted route's own. The gateway applies it after
 * its schema check; the client library before sending, so a refused value is never sent readable.
 */
export function plaintextValueRefusal(body: Readonly<Record<string, unknown>>): Refusal | undefined {
  const unsupported = unsupportedValue(body)
  if (unsupported !== undefined) return unsupported
  if (present(body.uncensored) && body.uncensored !== false) return { param: 'uncensored', message: 'uncensored is not available with an :encrypted model' }
  // The chat route's `web_fetch` / `web_search` switches: named as hosted tools, not as unknown fields.
  for (const name of ['web_fetch', 'web_search'] as const) {
    if (present(body[name]) && body[name] !== false) return { param: name, message: `hosted ${name} is not available with an :encrypted model: the gateway cannot read the messages` }
  }
  if (present(body.n) && body.n !== 1) return { param: 'n', message: 'n must be 1' }
  if (present(body.stream) && typeof body.stream !== 'boolean') return { param: 'stream', message: 'stream must be a boolean' }
  // As on the plain route: the relay merges include_usage into it, so it must be that object.
  const options = body.stream_options
  if (present(options) && (!isObject(options) || Object.keys(options).some(key => key !== 'include_usage') || (options.include_usage !== undefined && typeof options.include_usage !== 'boolean'))) {
    return { param: 'stream_options', message: 'stream_options must be {include_usage?: boolean}' }
  }
  if (body.tool_choice === 'required' && !(Array.isArray(body.tools) && body.tools.length > 0)) return REQUIRED_WITHOUT_TOOLS
  return undefined
}
