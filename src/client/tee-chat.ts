// The chat half of the client library: decrypt plain and streamed replies, verify response
// signatures, and the whole call in one (TEE-PROTOCOL.md B6; encrypting is tee-request.ts).

import { sha256 } from '@noble/hashes/sha2.js'
import { bytesToHex, randomBytes, type SigningAlgo } from '../tee/keys'
import { verifyText } from '../tee/signature'
import { pythonJsonDump } from './python-json'
import { checkBinding, contextFor, decryptField, fetchAttestation, GatewayError, generateClientKeys, type Attestation, type BindingReport, type E2eeContext } from './tee'
import { encryptChatRequest, needsAllFields } from './tee-request'

type Json = Record<string, any>

type Where = { id: string; model: string; choice: number }
type Open = (value: unknown, field: string) => unknown

/** Decrypts a ciphertext field in place of its value; empty strings are never encrypted (A2). */
const opener = (ctx: E2eeContext, where: Where): Open => (value, field) => (typeof value === 'string' && value !== '' ? decryptField(value, ctx, { ...where, field }) : value)

/**
 * One choice's `message` (or `delta`) with every field the protocol encrypts decrypted
 * (TEE-PROTOCOL.md A2, Encrypted fields). Always: `content` and `reasoning_content`, and for
 * the NEAR family also `reasoning`, `audio.data` and the text of content parts. With
 * all-fields (NEAR only): `refusal`, tool-call and `function_call` names and arguments. Empty
 * strings are never encrypted, so they stay as they are; Phala leaves `reasoning` plaintext.
 */
function decryptPart(part: Json, ctx: E2eeContext, where: Where, allFields: boolean): Json {
  const near = ctx.variant.family === 'nearai'
  const open = opener(ctx, where)
  const next: Json = { ...part }
  for (const field of near ? ['content', 'reasoning_content', 'reasoning'] : ['content', 'reasoning_content']) if (field in next) next[field] = open(next[field], field)
  if (near && Array.isArray(next.content)) next.content = next.content.map((item: Json) => (item !== null && typeof item === 'object' ? { ...item, text: open(item.text, 'content') } : item))
  if (near && next.audio !== null && typeof next.audio === 'object' && 'data' in next.audio) next.audio = { ...next.audio, data: open(next.audio.data, 'audio') }
  if (allFields) {
    if ('refusal' in next) next.refusal = open(next.refusal, 'refusal')
    if (Array.isArray(next.tool_calls)) next.tool_calls = next.tool_calls.map((call: Json) => (call?.function ? { ...call, function: openFunction(call.function, open) } : call))
    if (next.function_call !== null && typeof next.function_call === 'object') next.function_call = openFunction(next.function_call, open)
  }
  return next
}

function openFunction(fn: Json, open: Open): Json {
  const next: Json = { ...fn }
  if ('name' in fn) next.name = open(fn.name, 'tool_calls')
  if ('arguments' in fn) next.arguments = open(fn.arguments, 'tool_calls')
  return next
}

/**
 * A choice's `logprobs` with all-fields (NEAR): every entry's `token` is ciphertext of the token,
 * and its `bytes` ciphertext of the JSON array, in `content`, `refusal` and their `top_logprobs`.
 */
function decryptLogprobs(logprobs: unknown, ctx: E2eeContext, where: Where): unknown {
  if (logprobs === null || typeof logprobs !== 'object') return logprobs
  const open = opener(ctx, where)
  const entry = (item: Json): Json => {
    if (item === null || typeof item !== 'object') return item
    const next: Json = { ...item, token: open(item.token, 'logprobs') }
    if (typeof item.bytes === 'string' && item.bytes !== '') next.bytes = JSON.parse(open(item.bytes, 'logprobs') as string)
    if (Array.isArray(item.top_logprobs)) next.top_logprobs = item.top_logprobs.map(entry)
    return next
  }
  const next: Json = { ...(logprobs as Json) }
  for (const list of ['content', 'refusal']) if (Array.isArray(next[list])) next[list] = next[list].map(entry)
  return next
}

/** A choice with its message or delta, and (all-fields) its logprobs, decrypted. */
function decryptChoice(choice: Json, key: 'message' | 'delta', ctx: E2eeContext, where: Where, allFields: boolean): Json {
  const next: Json = { ...choice, [key]: decryptPart(choice[key] ?? {}, ctx, where, allFields) }
  if (allFields && ctx.variant.family === 'nearai' && choice.logprobs != null) next.logprobs = decryptLogprobs(choice.logprobs, ctx, where)
  return next
}

/** A chat.completion with every encrypted field decrypted (Phala v2 AAD from the object's own id and model). */
export function decryptChatResponse(json: Json, ctx: E2eeContext, options: { encryptAllFields?: boolean } = {}): Json {
  const choices = (json.choices as Json[] | undefined) ?? []
  return {
    ...json,
    choices: choices.map((choice, position) => decryptChoice(choice, 'message', ctx, { id: json.id, model: json.model, choice: position }, options.encryptAllFields === true)),
  }
}

/** Decrypted chat.completion.chunk objects of an SSE body; tool-call argument fragments are decrypted one by one. */
export async function* decryptChatStream(
  body: AsyncIterable<Uint8Array> | Iterable<Uint8Array> | ReadableStream<Uint8Array>,
  ctx: E2eeContext,
  options: { encryptAllFields?: boolean; onBytes?: (bytes: Uint8Array) => void } = {},
): AsyncGenerator<Json> {
  const decoder = new TextDecoder()
  let buffer = ''
  for await (const bytes of body as AsyncIterable<Uint8Array>) {
    options.onBytes?.(bytes)
    buffer += decoder.decode(bytes, { stream: true })
    for (let end = buffer.search(/\r?\n\r?\n/); end !== -1; end = buffer.search(/\r?\n\r?\n/)) {
      const event = buffer.slice(0, end)
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '')
      const data = event.split(/\r?\n/).filter(line => line.startsWith('data:')).map(line => line.slice(5).replace(/^ /, '')).join('\n')
      if (data === '' ) continue
      if (data === '[DONE]') return
      const chunk = JSON.parse(data) as Json
      if (chunk.error) throw new GatewayError(200, chunk)
      const choices = (chunk.choices as Json[] | undefined) ?? []
      yield { ...chunk, choices: choices.map((choice, position) => decryptChoice(choice, 'delta', ctx, { id: chunk.id, model: chunk.model, choice: position }, options.encryptAllFields === true)) }
    }
  }
  // A cut stream carries no error frame (the gateway passes on what the backend sent): without
  // [DONE] the reply is incomplete, and the backend signs only complete streams.
  throw new GatewayError(200, { error: { message: 'the stream ended before data: [DONE]: the reply is incomplete and unsigned', code: 'incomplete_stream' } })
}

export interface SignatureReport {
  /** The signature over `text` was made by `signing_address`. */
  readonly signatureValid: boolean
  /** sha256 of the exact body bytes equals the response hash in `text` (may be false on Phala non-streaming: TEE-PROTOCOL.md A3). */
  readonly responseHashMatches: boolean
  /** sha256 of your request bytes equals the request hash in `text` (when given). */
  readonly requestHashMatches: boolean | undefined
  /** signing_address equals the one you attested (when given). */
  readonly addressMatches: boolean | undefined
}

/**
 * Checks `svc_response_evidence`. Re-attest the signing address with a fresh nonce afterwards:
 * a signature proves the key signed, the attestation proves the key is TEE-bound.
 */
export function verifyResponseSignature(input: { evidence: Json; rawRequestBytes?: Uint8Array; expectedAddress?: string }): SignatureReport {
  const evidence = input.evidence
  if (evidence?.evidence_available !== true || typeof evidence.text !== 'string') {
    return { signatureValid: false, responseHashMatches: false, requestHashMatches: undefined, addressMatches: undefined }
  }
  const parts = evidence.text.split(':')
  const responseHash = parts[parts.length - 1]
  const requestHash = parts[parts.length - 2]
  const raw = Buffer.from(String(evidence.raw_body_b64), 'base64')
  return {
    signatureValid: verifyText(evidence.signing_algo as SigningAlgo, evidence.text, String(evidence.signature), String(evidence.signing_address)),
    responseHashMatches: bytesToHex(sha256(raw)) === responseHash,
    requestHashMatches: input.rawRequestBytes ? bytesToHex(sha256(input.rawRequestBytes)) === requestHash : undefined,
    addressMatches: input.expectedAddress ? input.expectedAddress.toLowerCase() === String(evidence.signing_address).toLowerCase() : undefined,
  }
}

/**
 * The reply the backend signed (TEE-PROTOCOL.md A4 step 7), from a non-streamed call made with
 * `responseEvidence`: its `svc_response_evidence` must carry a signature by the attested signing
 * address over the hashes of `rawRequestBytes` (your exact body) and of the reply bytes in
 * `raw_body_b64`, and those bytes are what is returned, parsed, to decrypt. Throws otherwise.
 * Without it nothing shows the TEE wrote the reply: it is encrypted to your public key, which
 * every relay sees, so the gateway could write one that decrypts as well. The attestation is
 * the one made with your fresh nonce before the call, which binds that address to the TEE.
 */
export function signedReply(body: Json, rawRequestBytes: Uint8Array, attestation: Attestation): Json {
  const refuse = (why: string) => new Error(`the reply is not authenticated, so it was refused: ${why}`)
  const evidence = body?.svc_response_evidence
  if (evidence === null || typeof evidence !== 'object') throw refuse('it carries no svc_response_evidence (the backend\'s signature)')
  if (evidence.evidence_available !== true) throw refuse(`the backend's signature is not available (${String(evidence.reason ?? 'no reason given')})`)
  if (evidence.signing_algo !== attestation.signing_algo) throw refuse(`it is signed with ${String(evidence.signing_algo)}, not the attested ${attestation.signing_algo}`)
  const report = verifyResponseSignature({ evidence, rawRequestBytes, expectedAddress: attestation.signing_address })
  if (!report.addressMatches) throw refuse(`it is signed by ${String(evidence.signing_address)}, not the attested signing address ${attestation.signing_address}`)
  if (!report.signatureValid) throw refuse('the signature does not verify for the attested signing address')
  if (!report.requestHashMatches) throw refuse('the signed request hash is not that of the request sent: the backend answered another request')
  const raw = Buffer.from(String(evidence.raw_body_b64), 'base64').toString('utf8')
  // Phala's proxy hashes Python's json.dumps of the reply while it sends compact JSON
  // (TEE-PROTOCOL.md A3, read from its code): that form of these same bytes counts too.
  const pythonForm = () => bytesToHex(sha256(new TextEncoder().encode(pythonJsonDump(raw)))) === String(evidence.text).split(':').at(-1)
  if (!report.responseHashMatches && !pythonForm()) throw refuse('the signed response hash is not that of the reply bytes (raw_body_b64)')
  return JSON.parse(raw) as Json
}

export interface EncryptedChatResult {
  attestation: Attestation
  binding: BindingReport
  /**
   * True for a non-streamed reply: signedReply checked the backend's signature over it. False
   * for a streamed one: the gateway offers no signature over a stream, so a relay could alter,
   * drop or reorder its chunks unnoticed.
   */
  authenticated: boolean
  content: string
  reasoning: string
  toolCalls: Array<{ id: string; name: string; arguments: string }>
  usage: Json | undefined
  /** The decrypted reply (non-streamed) or the last chunk (streamed). */
  response: Json
}

/**
 * End to end: attest with your own nonce, refuse unless the evidence binds it and the key,
 * encrypt, send through the gateway, decrypt. `baseUrl` is the gateway root (no /v1). A
 * non-streamed reply comes with the backend's signature and is refused unless it verifies
 * (signedReply); a streamed one cannot be checked (`authenticated: false`, `onDelta` text too).
 */
export async function encryptedChat(options: {
  baseUrl: string
  apiKey: string
  model: string
  messages: Json[]
  algo?: SigningAlgo
  stream?: boolean
  tools?: Json[]
  onDelta?: (text: string) => void
  fetch?: typeof fetch
}): Promise<EncryptedChatResult> {
  const http = options.fetch ?? fetch
  const algo = options.algo ?? 'ecdsa'
  const nonce = bytesToHex(randomBytes(32))
  const attestation = await fetchAttestation(options.baseUrl, options.apiKey, options.model, { trustTier: 'encrypted', nonce, signingAlgo: algo, fetch: http })
  const binding = await checkBinding(attestation, nonce)
  if (!binding.bound) throw new Error(`the evidence does not bind the nonce and key: ${binding.steps.filter(step => !step.ok).map(step => step.reason).join('; ')}`)
  const ctx = contextFor(attestation, generateClientKeys(algo))
  const stream = options.stream === true
  const plain: Json = { model: options.model, messages: options.messages, stream, ...((options.tools?.length ?? 0) > 0 ? { tools: options.tools } : {}) }
  const allFields = needsAllFields(plain, ctx)
  // The gateway offers the backend's signature only for a non-streamed reply.
  const request = encryptChatRequest(plain, ctx, { encryptAllFields: allFields, responseEvidence: !stream })
  const rawRequest = new TextEncoder().encode(JSON.stringify(request.body))
  const response = await http(`${options.baseUrl.replace(/\/+$/, '')}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json', ...request.headers },
    body: rawRequest,
  })
  if (!response.ok || !response.body) throw new GatewayError(response.status, await response.json().catch(() => ({})))
  const result: EncryptedChatResult = { attestation, binding, authenticated: !stream, content: '', reasoning: '', toolCalls: [], usage: undefined, response: {} }
  if (!stream) {
    const decrypted = decryptChatResponse(signedReply((await response.json()) as Json, rawRequest, attestation), ctx, { encryptAllFields: allFields })
    const message = decrypted.choices?.[0]?.message ?? {}
    result.content = message.content ?? ''
    // Backends name it reasoning_content or reasoning (some send both, the same text).
    result.reasoning = message.reasoning_content || message.reasoning || ''
    result.toolCalls = (message.tool_calls ?? []).map((call: Json) => ({ id: call.id, name: call.function.name, arguments: call.function.arguments }))
    result.usage = decrypted.usage
    result.response = decrypted
    return result
  }
  for await (const chunk of decryptChatStream(response.body, ctx, { encryptAllFields: allFields })) {
    const delta = chunk.choices?.[0]?.delta ?? {}
    if (delta.content) {
      result.content += delta.content
      options.onDelta?.(delta.content)
    }
    const reasoning = delta.reasoning_content || delta.reasoning
    if (reasoning) result.reasoning += reasoning
    for (const call of delta.tool_calls ?? []) {
      const index = call.index ?? 0
      result.toolCalls[index] ??= { id: call.id ?? '', name: '', arguments: '' }
      if (call.function?.name) result.toolCalls[index]!.name += call.function.name
      if (call.function?.arguments) result.toolCalls[index]!.arguments += call.function.arguments
    }
    if (chunk.usage) result.usage = chunk.usage
    result.response = chunk
  }
  return result
}
