// Encrypted chat rules (spec §4.10; TEE-PROTOCOL.md B3 "POST /v1/chat/completions with an
// :encrypted model"): the svc-encrypted-* header set, ciphertext shape checks, and the refusal
// every other route uses. Pure checks: nothing here decrypts, logs or keeps content.

import { ApiError } from '../http/errors'
import type { ParameterDoc } from '../http/openapi-complete'
import { isHex, normalizeSecpPublicKey, parseEd25519PublicKey, bytesToHex, type SigningAlgo } from '../tee/keys'
import type { ProofFormat } from '../tee/proof-format'

const PREFIX = 'svc-encrypted'
/** Phala v2 replay window, checked early so a stale request never reaches a backend. */
const TIMESTAMP_WINDOW_SEC = 300

const bad = (message: string, param?: string) => new ApiError('invalid_request', message, param)

/** Whether any Encrypted header (`svc-encrypted`, `svc-encrypted-*`) is present. */
export function hasEncryptedHeaders(headers: Headers): boolean {
  for (const name of headers.keys()) if (name.startsWith(PREFIX)) return true
  return false
}

/**
 * The one "Encrypted is refused on this route" rule (spec §4.10): every route except
 * POST /v1/chat/completions calls it with the request headers and, once resolved, the route
 * (`/v1/responses`, `/v1/messages`, `/v1/messages/count_tokens`, Fusion, web fetch and search,
 * document parsing, MCP tools). Throws 400
 * invalid_request when Encrypted headers are present or the model is an `:encrypted` id.
 */
export function refuseEncrypted(headers: Headers | undefined, route: { id: string; level: string } | undefined, where: string): void {
  if (headers !== undefined && hasEncryptedHeaders(headers)) {
    throw bad(`Encrypted requests are supported only on POST /v1/chat/completions, not on ${where}: remove the svc-encrypted headers`)
  }
  if (route?.level === 'encrypted') {
    throw bad(`model ${route.id} is Encrypted, which is supported only on POST /v1/chat/completions, not on ${where}`, 'model')
  }
}

/** The Encrypted headers, shape-checked (the parts that do not depend on the backend). */
export interface EncryptedHeaders {
  readonly algo: SigningAlgo
  /** As sent (hex, lowercased): forwarded to the backend, never stored or logged. */
  readonly clientKey: string
  /** Normalized: ed25519 64 hex; ecdsa 130 hex `04…`. */
  readonly modelKey: string
  readonly version: 1 | 2
  readonly nonce?: string
  readonly timestamp?: number
  readonly allFields: boolean
  readonly responseEvidence: boolean
}

/** B3 rows 1–2: presence and each header's shape. */
export function parseEncryptedHeaders(headers: Headers, stream: boolean): EncryptedHeaders {
  const get = (name: string) => headers.get(`${PREFIX}-${name}`)
  const flag = headers.get(PREFIX)
  if (flag === null) throw bad('svc-encrypted-* headers need svc-encrypted: 1')
  if (flag !== '1') throw bad('svc-encrypted must be 1')
  for (const name of headers.keys()) {
    if (name.startsWith(`${PREFIX}-`) && !KNOWN.has(name.slice(PREFIX.length + 1))) throw bad(`unknown Encrypted header "${name.slice(0, 60)}"`)
  }
  const algo = get('signing-algo')
  if (algo !== 'ed25519' && algo !== 'ecdsa') throw bad('svc-encrypted-signing-algo must be ed25519 or ecdsa')
  const client = get('client-pub-key') ?? ''
  if (algo === 'ed25519' ? parseEd25519PublicKey(client) === null : !(isHex(client, 65) && client.startsWith('04') && normalizeSecpPublicKey(client) !== null)) {
    throw bad(`svc-encrypted-client-pub-key must be hex of ${algo === 'ed25519' ? 'a 32-byte Ed25519 public key' : 'a 65-byte uncompressed secp256k1 point (04…)'}`)
  }
  const model = get('model-pub-key') ?? ''
  let modelKey: string
  if (algo === 'ed25519') {
    if (!isHex(model, 32)) throw bad('svc-encrypted-model-pub-key must be 32 bytes of hex for ed25519 (the attestation model_public_key)')
    modelKey = model.toLowerCase()
  } else {
    const normalized = (isHex(model, 64) || isHex(model, 65)) ? normalizeSecpPublicKey(model) : null
    if (normalized === null) throw bad('svc-encrypted-model-pub-key must be 64 or 65 bytes of hex for ecdsa, a point on secp256k1 (the attestation model_public_key)')
    modelKey = bytesToHex(normalized)
  }
  const versionText = get('encryption-version')
  if (versionText !== null && versionText !== '2') throw bad('svc-encrypted-encryption-version must be 2 (omit it for the legacy protocol)')
  const nonce = get('nonce') ?? undefined
  if (nonce !== undefined && !/^[A-Za-z0-9_-]{16,128}$/.test(nonce)) throw bad('svc-encrypted-nonce must be 16 to 128 characters of A-Z, a-z, 0-9, _ or -')
  const timestampText = get('timestamp')
  let timestamp: number | undefined
  if (timestampText !== null) {
    timestamp = /^[1-9][0-9]{0,15}$/.test(timestampText) ? Number(timestampText) : NaN
    if (!Number.isSafeInteger(timestamp)) throw bad('svc-encrypted-timestamp must be a positive Unix timestamp in seconds')
  }
  const allText = get('encrypt-all-fields')
  if (allText !== null && allText !== '1') throw bad('svc-encrypted-encrypt-all-fields must be 1')
  const evidenceText = get('response-evidence')
  if (evidenceText !== null && evidenceText !== '1') throw bad('svc-encrypted-response-evidence must be 1')
  if (evidenceText !== null && stream) throw bad('svc-encrypted-response-evidence needs stream: false (a stream is signed only after it ends)')
  return { algo, clientKey: client.toLowerCase(), modelKey, version: versionText === '2' ? 2 : 1, nonce, timestamp, allFields: allText === '1', responseEvidence: evidenceText === '1' }
}

const KNOWN = new Set(['client-pub-key', 'model-pub-key', 'signing-algo', 'encryption-version', 'nonce', 'timestamp', 'encrypt-all-fields', 'response-evidence'])

/** B3 row 3: the headers agree with the backend's protocol (`format` has an E2EE protocol). */
export function checkHeadersForFormat(h: EncryptedHeaders, format: ProofFormat, nowSec: number): void {
  const e2ee = format.e2ee!
  if (e2ee.version === 2 && h.version !== 2) throw bad(`${format.name} needs svc-encrypted-encryption-version: 2`)
  if (e2ee.version === 1 && h.version === 2) throw bad(`${format.name} is the legacy protocol: omit svc-encrypted-encryption-version`)
  const replay = e2ee.family === 'phala' && e2ee.version === 2
  if (replay) {
    if (h.nonce === undefined || h.timestamp === undefined) throw bad(`${format.name} needs svc-encrypted-nonce and svc-encrypted-timestamp`)
    if (Math.abs(nowSec - h.timestamp) > TIMESTAMP_WINDOW_SEC) throw bad(`svc-encrypted-timestamp is more than ${TIMESTAMP_WINDOW_SEC} s from now`)
  } else if (h.nonce !== undefined || h.timestamp !== undefined) {
    // A client must never believe it has replay protection the backend does not give.
    throw bad(`${format.name} has no replay protection: omit svc-encrypted-nonce and svc-encrypted-timestamp`)
  }
  if (h.allFields && e2ee.family !== 'nearai') throw bad(`${format.name} cannot encrypt tool fields: omit svc-encrypted-encrypt-all-fields (and function tools)`)
}

const header = (name: string, description: string, schema: Record<string, unknown>): ParameterDoc => ({ name: name === '' ? PREFIX : `${PREFIX}-${name}`, in: 'header', required: false, description, schema })

/** The Encrypted request headers as OpenAPI documents them (spec §4.10), in parseEncryptedHeaders' terms. */
export const ENCRYPTED_HEADERS: ParameterDoc[] = [
  header('', 'Encrypted requests only (an :encrypted model): `1`; every other svc-encrypted header is refused without it', { type: 'string', enum: ['1'] }),
  header('client-pub-key', 'Encrypted: the client public key, hex: 32 bytes for ed25519, 65 bytes uncompressed (04…) for ecdsa; shape-checked, never stored', { type: 'string', pattern: '^[0-9a-fA-F]+$' }),
  header('model-pub-key', 'Encrypted: the attestation\'s model_public_key (GET /api/v1/attestation), hex', { type: 'string', pattern: '^[0-9a-fA-F]+$' }),
  header('signing-algo', 'Encrypted: the attestation\'s signing_algo', { type: 'string', enum: ['ed25519', 'ecdsa'] }),
  header('encryption-version', 'Encrypted: `2` for protocol version 2; omitted when the proof_format is the legacy protocol', { type: 'string', enum: ['2'] }),
  header('nonce', 'Encrypted, where the backend\'s version 2 protocol needs one: a fresh request-bound nonce', { type: 'string', pattern: '^[A-Za-z0-9_-]{16,128}$' }),
  header('timestamp', `Encrypted, with svc-encrypted-nonce: Unix seconds, within ${TIMESTAMP_WINDOW_SEC} s of the gateway's clock`, { type: 'string', pattern: '^[0-9]+$' }),
  header('encrypt-all-fields', 'Encrypted with function tools: `1` (tool names, schemas, calls and results are ciphertext too)', { type: 'string', enum: ['1'] }),
  header('response-evidence', 'Encrypted, stream false, on supported backends: `1` adds svc_response_evidence (the raw body and its signature) to the reply', { type: 'string', enum: ['1'] }),
]
