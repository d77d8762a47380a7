// The request half of the client library: encrypt a Chat Completions body for an attested model
// key (TEE-PROTOCOL.md B6), refusing before anything is sent every field that would otherwise
// travel in plaintext: the gateway refuses those too, but only after it has read them.

import { ENCRYPTED_FUNCTION_KEYS, ENCRYPTED_MESSAGE_KEYS, ENCRYPTED_TOP_LEVEL, HISTORY_TEXT_FIELDS, plaintextValueRefusal, undecryptedHistoryField } from '../tee/encrypted-fields'
import { encryptField, type E2eeContext } from './tee'

type Json = Record<string, any>

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value)
const present = (value: unknown) => value !== undefined && value !== null

function refuse(param: string, why: string): never {
  throw new Error(`${param} cannot be sent: ${why}`)
}

/**
 * Why a tool field (function tools, a named tool_choice, history tool calls, a message name)
 * cannot go as ciphertext with this context, or undefined when it can: only NEAR-family backends
 * decrypt them, and only with all-fields.
 */
function toolFieldRefusal(ctx: E2eeContext, all: boolean): string | undefined {
  if (ctx.variant.family !== 'nearai') return 'Phala-family backends decrypt only message content, so it would travel in plaintext; omit it'
  if (!all) return 'it is encrypted only with encryptAllFields (svc-encrypted-encrypt-all-fields: 1); without, it would travel in plaintext'
  return undefined
}

/** Throws, naming the field, on anything in `body` that would leave in plaintext (or that the gateway refuses unread). */
function refusePlaintext(body: Json, ctx: E2eeContext, all: boolean): void {
  if (all && ctx.variant.family !== 'nearai') refuse('encryptAllFields', `${ctx.proofFormat} backends encrypt no tool fields`)
  for (const key of Object.keys(body)) if (!ENCRYPTED_TOP_LEVEL.has(key)) refuse(key, 'the gateway refuses a field it does not know, after reading it in plaintext')
  // A known field can still carry content (a prediction's text): the gateway's value rules, here.
  const refused = plaintextValueRefusal(body)
  if (refused !== undefined) refuse(refused.param, `the gateway refuses it after reading it in plaintext (${refused.message})`)
  if (!Array.isArray(body.messages)) refuse('messages', 'it must be an array')
  body.messages.forEach((message: unknown, index: number) => {
    const at = `messages[${index}]`
    if (!isObject(message) || typeof message.role !== 'string' || !Object.hasOwn(ENCRYPTED_MESSAGE_KEYS, message.role)) refuse(`${at}.role`, 'it must be system, developer, user, assistant or tool')
    for (const key of Object.keys(message)) {
      if (!ENCRYPTED_MESSAGE_KEYS[message.role]!.has(key)) refuse(`${at}.${key}`, `an Encrypted ${message.role} message does not carry it, so it would travel in plaintext; omit it`)
    }
    if (Array.isArray(message.content)) refuse(`${at}.content`, 'content arrays would travel in plaintext and the gateway refuses them; send the text as one string')
    if (present(message.content) && typeof message.content !== 'string') refuse(`${at}.content`, 'it must be a string, the only form that is encrypted')
    for (const field of HISTORY_TEXT_FIELDS) {
      if (!present(message[field])) continue
      const unread = undecryptedHistoryField(ctx.variant, field, all)
      if (unread !== undefined) refuse(`${at}.${field}`, `${unread}, so the model would read its ciphertext as text; omit it`)
      if (typeof message[field] !== 'string') refuse(`${at}.${field}`, 'it must be a string, the only form that is encrypted')
    }
    if (message.name !== undefined) {
      const why = toolFieldRefusal(ctx, all)
      if (why !== undefined) refuse(`${at}.name`, why)
      if (typeof message.name !== 'string') refuse(`${at}.name`, 'it must be a string')
    }
    if (present(message.tool_calls)) {
      if (!Array.isArray(message.tool_calls)) refuse(`${at}.tool_calls`, 'it must be an array')
      const why = message.tool_calls.length > 0 ? toolFieldRefusal(ctx, all) : undefined
      if (why !== undefined) refuse(`${at}.tool_calls`, why)
      message.tool_calls.forEach((call: unknown, callIndex: number) => {
        if (!isObject(call) || !isObject(call.function) || typeof call.function.name !== 'string' || typeof call.function.arguments !== 'string') {
          refuse(`${at}.tool_calls[${callIndex}]`, 'it must be {id, type: "function", function: {name, arguments}} with string name and arguments')
        }
      })
    }
  })
  if (present(body.tools)) {
    if (!Array.isArray(body.tools)) refuse('tools', 'it must be an array')
    body.tools.forEach((tool: unknown, index: number) => {
      if (!isObject(tool) || tool.type !== 'function' || !isObject(tool.function) || typeof tool.function.name !== 'string') {
        refuse(`tools[${index}]`, 'only function tools {type: "function", function: {name, description?, parameters?, strict?}} are encrypted; hosted tools are not available with an :encrypted model')
      }
      for (const key of Object.keys(tool.function)) if (!ENCRYPTED_FUNCTION_KEYS.has(key)) refuse(`tools[${index}].function.${key}`, 'the gateway refuses it, and it would travel in plaintext; omit it')
      if (tool.function.description !== undefined && typeof tool.function.description !== 'string') refuse(`tools[${index}].function.description`, 'it must be a string')
      if (present(tool.function.strict) && typeof tool.function.strict !== 'boolean') refuse(`tools[${index}].function.strict`, 'it must be a boolean')
      const why = toolFieldRefusal(ctx, all)
      if (why !== undefined) refuse('tools', why)
    })
  }
  const choice = body.tool_choice
  if (present(choice) && choice !== 'auto' && choice !== 'none' && choice !== 'required') {
    if (!isObject(choice) || !isObject(choice.function) || typeof choice.function.name !== 'string') refuse('tool_choice', 'it must be auto, none, required or {type: "function", function: {name}}')
    const why = toolFieldRefusal(ctx, all)
    if (why !== undefined) refuse('tool_choice', why)
  }
}

/**
 * Encrypts every content field of a Chat Completions body (a fresh ephemeral key per field)
 * and returns it with the svc-encrypted headers. With `encryptAllFields` (NEAR-family formats)
 * function tools, tool_choice names, history tool calls, message names and `refusal` are
 * encrypted too. The body's `model` must be the `:encrypted` id. Throws before anything is sent,
 * naming the field, on whatever would travel in plaintext: content arrays (send one string), a
 * field the gateway does not know, tool fields and message names without `encryptAllFields` or
 * on Phala formats, and a history `reasoning_content`, `reasoning` or `refusal` the backend would
 * not decrypt (every one for Phala formats; `refusal` without `encryptAllFields` for NEAR), and
 * a plaintext value the gateway refuses (`prediction`, `audio`, `store: true`…). A function's
 * `strict` goes as its plaintext boolean.
 */
export function encryptChatRequest(body: Json, ctx: E2eeContext, options: { encryptAllFields?: boolean; responseEvidence?: boolean } = {}): { body: Json; headers: Record<string, string> } {
  const all = options.encryptAllFields === true
  refusePlaintext(body, ctx, all)
  const out: Json = structuredClone(body)
  out.messages = (out.messages as Json[]).map((message, index) => {
    const next: Json = { ...message }
    if (typeof next.content === 'string') next.content = encryptField(next.content, ctx, { messageIndex: index })
    for (const field of HISTORY_TEXT_FIELDS) if (typeof next[field] === 'string') next[field] = encryptField(next[field], ctx, { messageIndex: index })
    if (typeof next.name === 'string') next.name = encryptField(next.name, ctx)
    if (Array.isArray(next.tool_calls)) {
      next.tool_calls = next.tool_calls.map((call: Json) => ({ ...call, function: { name: encryptField(call.function.name, ctx), arguments: encryptField(call.function.arguments, ctx) } }))
    }
    return next
  })
  if (Array.isArray(out.tools)) {
    out.tools = out.tools.map((tool: Json) => {
      const fn: Json = { name: encryptField(tool.function.name, ctx) }
      if (tool.function.description !== undefined) fn.description = encryptField(tool.function.description, ctx)
      if (tool.function.parameters !== undefined) fn.parameters = encryptField(JSON.stringify(tool.function.parameters), ctx)
      // No backend decrypts it and it says nothing of the conversation: it goes as the boolean it is.
      if (tool.function.strict !== undefined) fn.strict = tool.function.strict
      return { type: 'function', function: fn }
    })
  }
  if (isObject(out.tool_choice)) out.tool_choice = { type: 'function', function: { name: encryptField(out.tool_choice.function.name, ctx) } }
  const headers: Record<string, string> = {
    'svc-encrypted': '1',
    'svc-encrypted-signing-algo': ctx.algo,
    'svc-encrypted-client-pub-key': ctx.client.publicKeyHex,
    'svc-encrypted-model-pub-key': ctx.modelPublicKeyHex,
  }
  if (ctx.variant.version === 2) headers['svc-encrypted-encryption-version'] = '2'
  if (ctx.nonce !== undefined) headers['svc-encrypted-nonce'] = ctx.nonce
  if (ctx.timestamp !== undefined) headers['svc-encrypted-timestamp'] = String(ctx.timestamp)
  if (all) headers['svc-encrypted-encrypt-all-fields'] = '1'
  if (options.responseEvidence) headers['svc-encrypted-response-evidence'] = '1'
  return { body: out, headers }
}

/**
 * Whether a NEAR-family request needs all-fields: it carries something only all-fields encrypts
 * (function tools, a named tool_choice, history tool calls, message names or `refusal`).
 */
export function needsAllFields(body: Json, ctx: E2eeContext): boolean {
  if (ctx.variant.family !== 'nearai') return false
  const messages: unknown[] = Array.isArray(body.messages) ? body.messages : []
  const inMessages = messages.some(message => isObject(message) && (message.name !== undefined || present(message.refusal) || (Array.isArray(message.tool_calls) && message.tool_calls.length > 0)))
  return inMessages || (Array.isArray(body.tools) && body.tools.length > 0) || isObject(body.tool_choice)
}
