// The simulated backend's E2EE request side (TEE-PROTOCOL.md A2, B5 steps 2–3): header rules
// per family, request-field decryption, and the reply's field encryption.

import { decryptField, encryptField, newEphemeral, requestAad, responseAad, type Ephemeral, type NearV1Cipher, type Variant } from '../cipher'
import { bytesToHex, isHex, normalizeSecpPublicKey, parseEd25519PublicKey, type KeyPair, type SigningAlgo } from '../keys'
import type { SimKeys } from './types'

export interface E2eeContext {
  readonly variant: Variant
  readonly algo: SigningAlgo
  readonly client: Uint8Array
  readonly server: KeyPair
  readonly allFields: boolean
  readonly nonce?: string
  readonly timestamp?: number
}

/** A request the backend refuses: 400 with the family's error shape. */
export class E2eeRefusal extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message)
  }
}

function serverKeyMatches(algo: SigningAlgo, server: KeyPair, given: string): boolean {
  if (algo === 'ed25519') return given.toLowerCase() === bytesToHex(server.publicKey)
  const normalized = normalizeSecpPublicKey(given)
  return normalized !== null && bytesToHex(normalized) === bytesToHex(server.publicKey)
}

function clientKey(algo: SigningAlgo, hex: string): Uint8Array | null {
  return algo === 'ed25519' ? parseEd25519PublicKey(hex) : normalizeSecpPublicKey(hex)
}

/** The E2EE context of a request, null for a plain one; throws E2eeRefusal. */
export function parseE2ee(family: 'nearai' | 'phala', headers: Headers, keys: SimKeys, nowSec: number, windowSec: number): E2eeContext | null {
  const algoHeader = headers.get('x-signing-algo')
  const clientHeader = headers.get('x-client-pub-key')
  const modelHeader = headers.get('x-model-pub-key')
  if (family === 'nearai') {
    if (algoHeader === null && clientHeader === null) return null
    if (algoHeader === null || clientHeader === null) throw new E2eeRefusal('bad_request', 'X-Signing-Algo and X-Client-Pub-Key must be sent together')
    const algo = algoHeader.toLowerCase()
    if (algo !== 'ecdsa' && algo !== 'ed25519') throw new E2eeRefusal('bad_request', 'invalid X-Signing-Algo')
    const client = clientKey(algo, clientHeader)
    if (client === null) throw new E2eeRefusal('bad_request', 'invalid X-Client-Pub-Key')
    const server = keys[algo]
    if (modelHeader !== null && !serverKeyMatches(algo, server, modelHeader)) throw new E2eeRefusal('bad_request', 'X-Model-Pub-Key does not match this instance')
    const versionHeader = headers.get('x-encryption-version') ?? '1'
    if (versionHeader !== '1' && versionHeader !== '2') throw new E2eeRefusal('bad_request', 'invalid X-Encryption-Version')
    const allFields = (headers.get('x-encrypt-all-fields') ?? '').toLowerCase() === 'true'
    return { variant: { family, version: Number(versionHeader) as 1 | 2 }, algo, client, server, allFields }
  }
  if (algoHeader === null && clientHeader === null && modelHeader === null) return null
  if (algoHeader === null || clientHeader === null || modelHeader === null) throw new E2eeRefusal('e2ee_header_missing', 'X-Signing-Algo, X-Client-Pub-Key and X-Model-Pub-Key are required')
  const algo = algoHeader.toLowerCase()
  if (algo !== 'ecdsa' && algo !== 'ed25519') throw new E2eeRefusal('e2ee_invalid_signing_algo', 'invalid X-Signing-Algo')
  const client = clientKey(algo, clientHeader)
  if (client === null) throw new E2eeRefusal('e2ee_invalid_public_key', 'invalid X-Client-Pub-Key')
  const server = keys[algo]
  if (!serverKeyMatches(algo, server, modelHeader)) throw new E2eeRefusal('e2ee_model_key_mismatch', 'X-Model-Pub-Key does not match this instance')
  const nonce = headers.get('x-e2ee-nonce')
  const ts = headers.get('x-e2ee-timestamp')
  if ((nonce === null) !== (ts === null)) throw new E2eeRefusal('e2ee_invalid_nonce', 'X-E2EE-Nonce and X-E2EE-Timestamp go together')
  const versionHeader = headers.get('x-e2ee-version') ?? (nonce !== null ? '2' : '1')
  if (versionHeader !== '1' && versionHeader !== '2') throw new E2eeRefusal('e2ee_invalid_version', 'invalid X-E2EE-Version')
  const version = Number(versionHeader) as 1 | 2
  if (version === 1) return { variant: { family, version }, algo, client, server, allFields: false }
  if (nonce === null || ts === null || nonce.length < 16) throw new E2eeRefusal('e2ee_invalid_nonce', 'X-E2EE-Nonce of at least 16 characters is required in v2')
  const timestamp = Number(ts)
  if (!/^[0-9]+$/.test(ts) || Math.abs(nowSec - timestamp) > windowSec) throw new E2eeRefusal('e2ee_invalid_timestamp', 'X-E2EE-Timestamp is outside the allowed window')
  return { variant: { family, version }, algo, client, server, allFields: false, nonce, timestamp }
}

/** Decrypts the request body in place (strict fields throw; all-fields ones are lenient). */
export function decryptRequest(body: Record<string, any>, e2ee: E2eeContext): void {
  const { variant, algo, server } = e2ee
  const aad = (messageIndex: number, contentIndex?: number) =>
    variant.family === 'phala' && variant.version === 2
      ? requestAad({ algo, model: String(body.model), messageIndex, contentIndex, nonce: e2ee.nonce!, timestamp: e2ee.timestamp! })
      : undefined
  const strict = (value: unknown, messageIndex: number, contentIndex?: number): string => {
    if (typeof value !== 'string') throw new E2eeRefusal('e2ee_decryption_failed', 'Decryption failed')
    try {
      return decryptField(value, variant, algo, server.secretKey, { aad: aad(messageIndex, contentIndex) })
    } catch {
      throw new E2eeRefusal(variant.family === 'phala' ? 'e2ee_decryption_failed' : 'bad_request', 'Decryption failed')
    }
  }
  const lenient = (value: unknown): unknown => {
    if (typeof value !== 'string' || !isHex(value)) return value
    try {
      return decryptField(value, variant, algo, server.secretKey)
    } catch {
      return value
    }
  }
  const messages: any[] = Array.isArray(body.messages) ? body.messages : []
  messages.forEach((message, index) => {
    if (typeof message.content === 'string') message.content = strict(message.content, index)
    else if (Array.isArray(message.content)) {
      message.content.forEach((part: any, partIndex: number) => {
        if (part?.type === 'text') part.text = strict(part.text, index, partIndex)
      })
    }
    if (variant.family === 'phala') return
    for (const field of ['reasoning_content', 'reasoning']) if (typeof message[field] === 'string') message[field] = strict(message[field], index)
    if (!e2ee.allFields) return
    if (message.name !== undefined) message.name = lenient(message.name)
    if (message.refusal !== undefined) message.refusal = lenient(message.refusal)
    for (const call of message.tool_calls ?? []) {
      call.function.name = lenient(call.function.name)
      call.function.arguments = lenient(call.function.arguments)
    }
  })
  if (variant.family === 'nearai' && e2ee.allFields) {
    for (const tool of body.tools ?? []) {
      const fn = tool.function ?? {}
      fn.name = lenient(fn.name)
      if (fn.description !== undefined) fn.description = lenient(fn.description)
      if (typeof fn.parameters === 'string') {
        const text = lenient(fn.parameters)
        try {
          fn.parameters = JSON.parse(String(text))
        } catch {
          throw new E2eeRefusal('bad_request', 'Decryption failed')
        }
      }
    }
    if (typeof body.tool_choice === 'object' && body.tool_choice?.function) body.tool_choice.function.name = lenient(body.tool_choice.function.name)
  }
}

/** Encrypts reply fields: NEAR with a fresh ephemeral key per field, Phala with one per request and v2 AAD. */
export class ReplyEncryptor {
  private readonly ephemeral: Ephemeral | undefined

  constructor(
    private readonly e2ee: E2eeContext,
    private readonly nearV1Cipher: NearV1Cipher,
  ) {
    this.ephemeral = e2ee.variant.family === 'phala' ? newEphemeral(e2ee.algo) : undefined
  }

  field(text: string, where: { id: string; model: string; choice: number; field: string }): string {
    const { variant, algo } = this.e2ee
    const aad = variant.family === 'phala' && variant.version === 2 ? responseAad({ algo, ...where, nonce: this.e2ee.nonce!, timestamp: this.e2ee.timestamp! }) : undefined
    return encryptField(text, variant, algo, this.e2ee.client, { aad, ephemeral: this.ephemeral, nearV1Cipher: this.nearV1Cipher })
  }

  get allFields(): boolean {
    return this.e2ee.allFields
  }
}

