// Client library for Confidential and Encrypted models (spec §4.9, §4.10; TEE-PROTOCOL.md B6).
// It fetches attestation through the gateway, checks that the evidence binds your nonce and the
// model key, encrypts requests to that key, and decrypts replies. What it does NOT verify: the
// hardware quote's signature chain (Intel DCAP) and the GPU evidence (NVIDIA NRAS). Pass
// `verifyQuote` / `verifyGpu` to checkBinding to add them; until then `hardwareVerified` is false.
// Self-contained: it imports only src/tee (@noble/*) and the chat route's dependency-free value
// rules (unsupported-values.ts), never gateway code.

import { sha256 } from '@noble/hashes/sha2.js'
import { expectedBindingHalf } from '../tee/binding'
import { decryptField as decryptBlob, encryptField as encryptBlob, requestAad, responseAad, type Variant } from '../tee/cipher'
import { bytesToHex, ethAddress, generateKeyPair, hexToBytes, isHex, normalizeSecpPublicKey, randomBytes, type SigningAlgo } from '../tee/keys'
import { parseProofFormat } from '../tee/proof-format'
import { readQuote } from '../tee/quote'
import { verifyText } from '../tee/signature'

export type { SigningAlgo } from '../tee/keys'

export interface ClientKeys {
  readonly algo: SigningAlgo
  /** ed25519: 32 bytes; ecdsa: 65 bytes 04‖x‖y. */
  readonly publicKeyHex: string
  readonly secretKey: Uint8Array
}

/** The spec 2.4 attestation object. */
export interface Attestation {
  object: 'attestation'
  model: string
  provider_model_id: string
  privacy_tier: 'confidential' | 'encrypted'
  attestation_available: boolean
  attestation_subject: string
  verified: boolean
  verifier_provenance: string
  nonce: string
  proof_format: string
  signing_algo: SigningAlgo
  signing_address: string
  signing_key: string
  model_public_key: string
  evidence: Record<string, any>
}

export interface E2eeContext {
  readonly proofFormat: string
  readonly variant: Variant
  readonly algo: SigningAlgo
  readonly modelPublicKeyHex: string
  readonly providerModelId: string
  readonly client: ClientKeys
  /** Phala v2 only: the request's replay nonce and timestamp (also bound in every AAD). */
  readonly nonce?: string
  readonly timestamp?: number
}

export function generateClientKeys(algo: SigningAlgo): ClientKeys {
  const pair = generateKeyPair(algo)
  return { algo, publicKeyHex: bytesToHex(pair.publicKey), secretKey: pair.secretKey }
}

export class GatewayError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`HTTP ${status}: ${(body as { error?: { message?: string } })?.error?.message ?? 'request failed'}`)
  }
}

/** GET {baseUrl}/api/v1/attestation. `baseUrl` is the gateway root (no /v1). */
export async function fetchAttestation(
  baseUrl: string,
  apiKey: string,
  model: string,
  options: { trustTier?: 'confidential' | 'encrypted'; nonce?: string; signingAlgo?: SigningAlgo; fetch?: typeof fetch } = {},
): Promise<Attestation> {
  const query = new URLSearchParams({ model })
  if (options.trustTier) query.set('trust_tier', options.trustTier)
  if (options.nonce) query.set('nonce', options.nonce)
  if (options.signingAlgo) query.set('signing_algo', options.signingAlgo)
  const response = await (options.fetch ?? fetch)(`${baseUrl.replace(/\/+$/, '')}/api/v1/attestation?${query}`, { headers: { authorization: `Bearer ${apiKey}` } })
  const body = await response.json().catch(() => ({}))
  if (!response.ok) throw new GatewayError(response.status, body)
  return body as Attestation
}

export interface BindingStep {
  readonly name: string
  readonly ok: boolean
  readonly reason?: string
}

export interface BindingReport {
  /** Every consistency step passed: the evidence binds your nonce and this model key. */
  readonly bound: boolean
  /** False unless verifyQuote and verifyGpu callbacks both returned true. */
  readonly hardwareVerified: boolean
  /** The simulator's marks (DEBUG TD or a zero QE vendor id): never trust such evidence in production. */
  readonly simulated: boolean
  readonly steps: readonly BindingStep[]
}

/** B6 checkBinding: each step yields ok and a reason; `bound` only when all pass. */
export async function checkBinding(
  attestation: Attestation,
  expectedNonceHex: string,
  hooks: { verifyQuote?: (quoteHex: string) => Promise<boolean>; verifyGpu?: (nvidiaPayload: string) => Promise<boolean> } = {},
): Promise<BindingReport> {
  const steps: BindingStep[] = []
  const step = (name: string, ok: boolean, reason?: string) => steps.push(ok ? { name, ok } : { name, ok, reason })
  const nonce = expectedNonceHex.toLowerCase()
  const evidence = attestation.evidence ?? {}
  const format = parseProofFormat(attestation.proof_format)
  step('proof_format known', format !== null, `unknown proof_format ${attestation.proof_format}`)
  step('nonce echoed', String(attestation.nonce ?? '').toLowerCase() === nonce && String(evidence.request_nonce ?? '').toLowerCase() === nonce, 'the attestation or report nonce is not yours')
  // Read from the gateway's answer, not trusted to be there: without it nothing binds, and no step throws.
  const address = typeof attestation.signing_address === 'string' ? attestation.signing_address : undefined
  step('signing address present', address !== undefined, 'signing_address is missing or not a string')
  const quote = isHex(evidence.intel_quote) ? readQuote(hexToBytes(evidence.intel_quote)) : null
  step('quote readable', quote !== null, 'intel_quote is not a TDX v4/v5 quote')
  step('quote binds nonce', quote !== null && bytesToHex(quote.reportData.subarray(32)) === nonce, 'report_data[32:64] is not your nonce')
  const algo = attestation.signing_algo
  const half = format && address !== undefined ? expectedBindingHalf(format.binding, algo, address, evidence.tls_cert_fingerprint) : null
  step('quote binds signing address', quote !== null && half !== null && bytesToHex(quote.reportData.subarray(0, 32)) === bytesToHex(half), 'report_data[0:32] does not bind the signing address')
  let keyOk = false
  if (address === undefined) keyOk = false
  else if (algo === 'ed25519') keyOk = isHex(attestation.model_public_key, 32) && attestation.model_public_key.toLowerCase() === address.toLowerCase()
  else {
    const key = normalizeSecpPublicKey(attestation.model_public_key ?? '')
    keyOk = key !== null && ethAddress(key) === address.toLowerCase()
  }
  step('model key is the signing key', keyOk, 'model_public_key does not belong to the signing address')
  let gpu: { nonce?: unknown; evidence_list?: unknown } = {}
  try {
    gpu = JSON.parse(evidence.nvidia_payload) ?? {}
  } catch {
    gpu = {}
  }
  step('GPU evidence present', Array.isArray(gpu.evidence_list) && gpu.evidence_list.length > 0, 'nvidia_payload has no evidence')
  step('GPU evidence binds nonce', String(gpu.nonce ?? '').toLowerCase() === nonce, 'nvidia_payload.nonce is not your nonce')
  const info = evidence.info ?? {}
  const compose = typeof info.tcb_info?.app_compose === 'string' ? bytesToHex(sha256(new TextEncoder().encode(info.tcb_info.app_compose))) : ''
  step(
    'compose hash',
    compose !== '' && compose === info.compose_hash && compose === info.tcb_info?.compose_hash && quote !== null && bytesToHex(quote.mrConfigId).startsWith(`01${compose}`),
    'app_compose does not hash to compose_hash and mr_config_id',
  )
  const quoteOk = hooks.verifyQuote ? await hooks.verifyQuote(evidence.intel_quote) : false
  const gpuOk = hooks.verifyGpu ? await hooks.verifyGpu(evidence.nvidia_payload) : false
  return { bound: steps.every(entry => entry.ok), hardwareVerified: quoteOk && gpuOk, simulated: quote !== null && (quote.debug || quote.zeroQeVendor), steps }
}

/**
 * The context to encrypt one request for an Encrypted attestation. Refuses a proof_format it
 * does not know. Phala v2 binds a fresh nonce and timestamp into every request (the backend
 * refuses replays): make one context per request.
 */
export function contextFor(attestation: Attestation, client: ClientKeys): E2eeContext {
  const format = parseProofFormat(attestation.proof_format)
  if (format?.e2ee === undefined) throw new Error(`unknown or non-E2EE proof_format ${attestation.proof_format}: refusing to encrypt`)
  if (client.algo !== attestation.signing_algo) throw new Error('the client key algorithm must match the attestation signing_algo')
  const replay = format.e2ee.family === 'phala' && format.e2ee.version === 2
  return {
    proofFormat: format.name,
    variant: format.e2ee,
    algo: client.algo,
    modelPublicKeyHex: attestation.model_public_key,
    providerModelId: attestation.provider_model_id,
    client,
    ...(replay ? { nonce: Buffer.from(randomBytes(24)).toString('base64url'), timestamp: Math.floor(Date.now() / 1000) } : {}),
  }
}

const v2Aad = (ctx: E2eeContext) => ctx.variant.family === 'phala' && ctx.variant.version === 2

export function encryptField(plaintext: string, ctx: E2eeContext, aad?: { messageIndex: number; contentIndex?: number }): string {
  const bytes = aad && v2Aad(ctx) ? requestAad({ algo: ctx.algo, model: ctx.providerModelId, ...aad, nonce: ctx.nonce!, timestamp: ctx.timestamp! }) : undefined
  return encryptBlob(plaintext, ctx.variant, ctx.algo, hexToBytes(ctx.modelPublicKeyHex), { aad: bytes })
}

export function decryptField(hex: string, ctx: E2eeContext, aad?: { id: string; model: string; choice: number; field: string }): string {
  const bytes = aad && v2Aad(ctx) ? responseAad({ algo: ctx.algo, ...aad, nonce: ctx.nonce!, timestamp: ctx.timestamp! }) : undefined
  return decryptBlob(hex, ctx.variant, ctx.algo, ctx.client.secretKey, { aad: bytes })
}

export { decryptChatResponse, decryptChatStream, verifyResponseSignature, signedReply, encryptedChat } from './tee-chat'
export { encryptChatRequest } from './tee-request'
export { verifyText }
