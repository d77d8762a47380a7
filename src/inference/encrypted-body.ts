// Encrypted chat body checks (TEE-PROTOCOL.md B3 rows 5–7): every field that carries content
// must be ciphertext hex of the right shape for (proof_format, algorithm); anything the gateway
// would have to read, or that would leave content in plaintext, is refused. Never decrypts.

import { TypeCompiler } from '@sinclair/typebox/compiler'
import { t, ValidationError } from 'elysia'
import { ApiError } from '../http/errors'
import { minBlobBytes } from '../tee/blob-size'
import { isHex, type SigningAlgo } from '../tee/keys'
import { ENCRYPTED_FUNCTION_KEYS, ENCRYPTED_MESSAGE_KEYS, ENCRYPTED_TOP_LEVEL, HISTORY_TEXT_FIELDS, plaintextValueRefusal, undecryptedHistoryField } from '../tee/encrypted-fields'
import type { ProofFormat } from '../tee/proof-format'
import { ChatCompletionsBody } from './dialects/chat-completions/schema'
import { chatCompletionsEffort, type RequestEffort } from '../providers/openai-compatible/to-upstream'
import type { EncryptedHeaders } from './encrypted'

const bad = (message: string, param?: string) => new ApiError('invalid_request', message, param)

/**
 * The fields an Encrypted body carries in plaintext, held to the plain chat route's rules (the
 * same schemas): a value the plain route refuses is refused here too, by the gateway, naming the
 * field, rather than relayed for the backend to refuse. The content fields are checked below.
 */
const PLAINTEXT = t.Pick(ChatCompletionsBody, [
  'temperature', 'top_p', 'stop', 'seed', 'user', 'safety_identifier', 'prompt_cache_key', 'reasoning_effort', 'presence_penalty', 'frequency_penalty',
  'parallel_tool_calls', 'metadata', 'response_format', 'service_tier', 'max_tokens', 'max_completion_tokens',
  // Every ENCRYPTED_TOP_LEVEL field unsupportedValue judges is here too, so a value of the wrong type is named as on the plain route.
  'store', 'logprobs', 'top_logprobs', 'verbosity', 'modalities', 'logit_bias', 'prediction', 'audio',
])
const plaintextOk = TypeCompiler.Compile(PLAINTEXT)

/**
 * Fields the gateway acts on itself, or keeps as the plain route does; never forwarded. The two
 * output caps leave too: the relay sends the one it resolved as `max_tokens` (see maxTokens).
 */
const GATEWAY_ONLY = [
  'user', 'safety_identifier', 'prompt_cache_key', 'uncensored', 'web_fetch', 'web_search', 'metadata', 'service_tier', 'store',
  'logprobs', 'top_logprobs', 'verbosity', 'modalities', 'logit_bias', 'prediction', 'audio', 'max_tokens', 'max_completion_tokens',
] as const

/** A checked body: what to forward (model and output cap not yet written) and the envelope's size for billing. */
export interface CheckedBody {
  readonly body: Record<string, unknown>
  readonly stream: boolean
  /** Plaintext bytes the ciphertext can hold at most (decoded blob length minus per-blob overhead). */
  readonly plainBytes: number
  readonly messageCount: number
  /**
   * The output cap asked for, resolved as the plain route does (`max_completion_tokens ??
   * max_tokens`); the relay forwards it as the only cap, so the backend stops where billing does.
   */
  readonly maxTokens: number | undefined
  /** Which field set maxTokens, to name in a refusal. */
  readonly maxTokensField: 'max_tokens' | 'max_completion_tokens'
  readonly reasoning: boolean
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

class CipherCheck {
  plainBytes = 0
  private readonly min: number

  constructor(
    format: ProofFormat,
    private readonly algo: SigningAlgo,
  ) {
    this.min = minBlobBytes(format.e2ee!, algo)
  }

  /** A nonblank, lowercase-or-uppercase hex ciphertext blob of at least the cipher's overhead. */
  check(value: unknown, param: string): void {
    if (typeof value !== 'string' || value.trim() === '') throw bad(`${param} must be a nonblank ciphertext hex string`, param)
    if (!isHex(value)) throw bad(`${param} must be ciphertext hex (even length, 0-9 a-f)`, param)
    const bytes = value.length / 2
    if (bytes < this.min) throw bad(`${param} is too short to be ciphertext for this protocol (at least ${this.min} bytes)`, param)
    // ecdsa blobs open with the uncompressed ephemeral point.
    if (this.algo === 'ecdsa' && value.slice(0, 2) !== '04') throw bad(`${param} is not an ecdsa ciphertext (it must start with the 04 ephemeral key)`, param)
    this.plainBytes += bytes - this.min
  }
}

export function checkEncryptedBody(raw: unknown, h: EncryptedHeaders, format: ProofFormat): CheckedBody {
  if (!isObject(raw)) throw bad('request body must be a JSON object')
  for (const key of Object.keys(raw)) if (!ENCRYPTED_TOP_LEVEL.has(key)) throw bad(`unknown field "${key.slice(0, 60)}"`, key.slice(0, 60))
  // Rendered as the plain route's validation failures are (request-context.ts).
  const plaintext = Object.fromEntries(Object.keys(PLAINTEXT.properties).filter(key => key in raw).map(key => [key, raw[key]]))
  if (!plaintextOk.Check(plaintext)) throw new ValidationError('body', PLAINTEXT, plaintext)
  // Values the schema admits but the gateway refuses (penalties, store…, as on the plain route;
  // uncensored, hosted switches, n…), by the rule the client library applies before sending.
  const refused = plaintextValueRefusal(raw)
  if (refused !== undefined) throw bad(refused.message, refused.param)
  // Both caps were held to the schema above; as on the plain route, max_completion_tokens wins.
  const maxTokensField = plaintext.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens'
  const maxTokens = plaintext.max_completion_tokens ?? plaintext.max_tokens ?? undefined
  const cipher = new CipherCheck(format, h.algo)

  if (!Array.isArray(raw.messages) || raw.messages.length === 0) throw bad('messages must be a non-empty array', 'messages')
  raw.messages.forEach((message, index) => {
    const at = `messages.${index}`
    if (!isObject(message) || typeof message.role !== 'string' || !Object.hasOwn(ENCRYPTED_MESSAGE_KEYS, message.role)) throw bad(`${at}.role must be system, developer, user, assistant or tool`, `${at}.role`)
    for (const key of Object.keys(message)) if (!ENCRYPTED_MESSAGE_KEYS[message.role]!.has(key)) throw bad(`${at}.${key.slice(0, 60)} is not accepted in an Encrypted ${message.role} message`, `${at}.${key.slice(0, 60)}`)
    if (Array.isArray(message.content)) throw bad(`${at}.content: content arrays (and image, file or document parts) are not accepted with an :encrypted model; send one ciphertext string`, `${at}.content`)
    const toolCalls = message.tool_calls
    const contentOptional = message.role === 'assistant' && Array.isArray(toolCalls) && toolCalls.length > 0
    if (!(contentOptional && (message.content === null || message.content === undefined || message.content === ''))) cipher.check(message.content, `${at}.content`)
    for (const field of HISTORY_TEXT_FIELDS) {
      if (message[field] === undefined || message[field] === null) continue
      const unread = undecryptedHistoryField(format.e2ee!, field, h.allFields)
      if (unread !== undefined) throw bad(`${at}.${field} cannot be sent: ${unread}, so the model would read its ciphertext as text; omit it`, `${at}.${field}`)
      cipher.check(message[field], `${at}.${field}`)
    }
    if (message.name !== undefined) {
      if (!h.allFields) throw bad(`${at}.name would travel in plaintext: send it encrypted with svc-encrypted-encrypt-all-fields: 1, or omit it`, `${at}.name`)
      cipher.check(message.name, `${at}.name`)
    }
    if (message.role === 'tool' && (typeof message.tool_call_id !== 'string' || message.tool_call_id === '')) throw bad(`${at}.tool_call_id is required`, `${at}.tool_call_id`)
    if (toolCalls !== undefined && toolCalls !== null) {
      if (!Array.isArray(toolCalls)) throw bad(`${at}.tool_calls must be an array`, `${at}.tool_calls`)
      if (toolCalls.length > 0 && !h.allFields) throw bad(`${at}.tool_calls need svc-encrypted-encrypt-all-fields: 1 (names and arguments as ciphertext)`, `${at}.tool_calls`)
      toolCalls.forEach((call, callIndex) => {
        const where = `${at}.tool_calls.${callIndex}`
        if (!isObject(call) || typeof call.id !== 'string' || call.type !== 'function' || !isObject(call.function)) throw bad(`${where} must be {id, type: "function", function}`, where)
        cipher.check(call.function.name, `${where}.function.name`)
        cipher.check(call.function.arguments, `${where}.function.arguments`)
      })
    }
  })

  const tools = raw.tools
  if (tools !== undefined && tools !== null) {
    if (!Array.isArray(tools)) throw bad('tools must be an array', 'tools')
    tools.forEach((tool, index) => {
      const at = `tools.${index}`
      if (isObject(tool) && (tool.type === 'web_search' || tool.type === 'web_fetch')) {
        throw bad(`hosted ${tool.type} is not available with an :encrypted model: the gateway cannot read the messages`, at)
      }
      if (!isObject(tool) || tool.type !== 'function' || !isObject(tool.function)) throw bad(`${at} must be a function tool`, at)
      if (format.e2ee!.family !== 'nearai') throw bad(`${format.name} backends cannot take encrypted function tools`, 'tools')
      if (!h.allFields) throw bad('function tools need svc-encrypted-encrypt-all-fields: 1 (name, description and parameters as ciphertext)', 'tools')
      const fn = tool.function
      for (const key of Object.keys(fn)) if (!ENCRYPTED_FUNCTION_KEYS.has(key)) throw bad(`${at}.function.${key.slice(0, 60)} is not accepted`, `${at}.function`)
      if (fn.strict !== undefined && fn.strict !== null && typeof fn.strict !== 'boolean') throw bad(`${at}.function.strict must be a boolean`, `${at}.function.strict`)
      cipher.check(fn.name, `${at}.function.name`)
      if (fn.description !== undefined) cipher.check(fn.description, `${at}.function.description`)
      // The schema travels as the ciphertext of its JSON, never as an object the gateway could read.
      if (fn.parameters !== undefined) cipher.check(fn.parameters, `${at}.function.parameters`)
    })
  }
  const choice = raw.tool_choice
  if (choice !== undefined && choice !== null && choice !== 'auto' && choice !== 'none' && choice !== 'required') {
    if (!isObject(choice) || choice.type !== 'function' || !isObject(choice.function)) throw bad('tool_choice must be auto, none, required or {type: "function", function: {name}}', 'tool_choice')
    if (!h.allFields) throw bad('a named tool_choice needs svc-encrypted-encrypt-all-fields: 1', 'tool_choice')
    cipher.check(choice.function.name, 'tool_choice.function.name')
  }

  const body: Record<string, unknown> = { ...raw }
  for (const key of GATEWAY_ONLY) delete body[key]
  const stream = raw.stream === true
  // vLLM (behind NEAR and Phala) refuses stream_options without stream: true; the plain route drops it too.
  if (!stream) delete body.stream_options
  // The backend speaks Chat Completions: an effort it may not take goes as the plain route sends it.
  if (typeof body.reasoning_effort === 'string') body.reasoning_effort = chatCompletionsEffort(body.reasoning_effort as RequestEffort)
  // An empty stop sequence stops nothing and vLLM refuses one: dropped, as the plain route drops it.
  const stop = plaintext.stop
  if (stop === '' || (Array.isArray(stop) && stop.includes(''))) {
    const kept = [stop].flat().filter(sequence => sequence !== '')
    if (kept.length > 0) body.stop = kept
    else delete body.stop
  }
  return { body, stream, plainBytes: cipher.plainBytes, messageCount: raw.messages.length, maxTokens, maxTokensField, reasoning: raw.reasoning_effort !== undefined && raw.reasoning_effort !== null }
}
