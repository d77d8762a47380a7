// A backend attestation report → the checked, normalized evidence the gateway relies on
// (TEE-PROTOCOL.md B2, B3 rows 8–12). Consistency checks only: nothing here verifies the
// hardware quote chain, so `verified` is always false wherever this evidence is shown.

import { expectedBindingHalf } from '../../tee/binding'
import { bytesToHex, ethAddress, hexToBytes, isHex, normalizeSecpPublicKey, type SigningAlgo } from '../../tee/keys'
import type { ProofFormat } from '../../tee/proof-format'
import { readQuote } from '../../tee/quote'
import { ApiError } from '../../http/errors'

/** What the gateway asked for: the evidence must agree with every part of it. */
export interface EvidenceRequest {
  readonly nonce: string
  readonly algo: SigningAlgo
  readonly signingAddress?: string
  /**
   * Without a signing address: the model key (Evidence.modelPublicKey's form) the caller
   * encrypted to. An aggregator lists one report per instance, in an order of its choosing, and
   * the report holding this key is the one to check, if there is one. A backend with no report
   * holding it is not the key's: its rejection says so (EvidenceRejected.otherKey).
   */
  readonly modelKey?: string
  readonly proofFormat: ProofFormat
}

/** Evidence that passed every check. */
export interface Evidence {
  readonly signingAlgo: SigningAlgo
  /** Verbatim, as the backend wrote it. */
  readonly signingAddress: string
  /** Verbatim `signing_public_key`. */
  readonly signingKey: string
  /** ed25519: 64 lowercase hex; ecdsa: normalized to 65 bytes (130 hex, `04…`). */
  readonly modelPublicKey: string
  /** The backend-native form, forwarded as X-Model-Pub-Key. */
  readonly nativeModelKey: string
  readonly subject: string
  /** The selected report, verbatim minus `all_attestations`. */
  readonly report: Record<string, unknown>
}

/** 503 unavailable: the backend's evidence is empty or contradicts what was asked. */
export class EvidenceRejected extends ApiError {
  constructor(
    reason: string,
    /**
     * The request named a model key (EvidenceRequest.modelKey) and no report of this backend
     * carries it: the backend is not the one the caller encrypted to, whatever its evidence says.
     */
    readonly otherKey: boolean,
  ) {
    super('unavailable', `attestation evidence rejected: ${reason}`)
  }
}

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
}

/** The candidate reports of either shape: flat + all_attestations, or NEAR-gw model_attestations. */
function candidates(body: Record<string, unknown>): Record<string, unknown>[] {
  const list = Array.isArray(body.model_attestations) ? body.model_attestations : Array.isArray(body.all_attestations) ? body.all_attestations : [body]
  return list.map(record).filter((entry): entry is Record<string, unknown> => entry !== undefined)
}

const same = (a: unknown, b: string) => typeof a === 'string' && a.toLowerCase() === b.toLowerCase()

/** The report for the request's signing address; else the one holding its model key; else the first. */
function select(forAlgo: Record<string, unknown>[], request: EvidenceRequest, holdsKey: (report: Record<string, unknown>) => boolean): Record<string, unknown> | undefined {
  const { signingAddress, modelKey } = request
  if (signingAddress !== undefined) return forAlgo.find(entry => same(entry.signing_address, signingAddress))
  if (modelKey !== undefined && forAlgo.length > 1) return forAlgo.find(holdsKey) ?? forAlgo[0]
  return forAlgo[0]
}

/**
 * Whether a report is the one of `modelKey`: it carries the key, or names the signing address
 * the key implies (the selection by signing_address, so a report whose key contradicts its
 * address is still that address's).
 */
function keyHolder(modelKey: string, algo: SigningAlgo): (report: Record<string, unknown>) => boolean {
  const address = algo === 'ed25519' ? modelKey : modelKey.length === 130 ? ethAddress(hexToBytes(modelKey)) : undefined
  return report => modelKeyOf(report, algo) === modelKey || (address !== undefined && same(report.signing_address, address))
}

/** A report's signing key as Evidence.modelPublicKey (ecdsa normalized to 65 bytes), or null when malformed. */
function modelKeyOf(report: Record<string, unknown>, algo: SigningAlgo): string | null {
  const key = report.signing_public_key
  if (typeof key !== 'string') return null
  if (algo === 'ed25519') return isHex(key, 32) ? key.toLowerCase() : null
  const normalized = key.length === 128 || key.length === 130 ? normalizeSecpPublicKey(key) : null
  return normalized === null ? null : bytesToHex(normalized)
}

/** Selects the report for the request and runs B3 checks 8–12; throws 503 unavailable naming the failure. */
export function checkEvidence(raw: unknown, request: EvidenceRequest): Evidence {
  const body = record(raw)
  const reports = body === undefined ? [] : candidates(body)
  const holdsKey = request.modelKey === undefined ? () => false : keyHolder(request.modelKey, request.algo)
  // Over every report, whatever algorithm it echoes: a report of the key is that key's even when it contradicts.
  const otherKey = request.modelKey !== undefined && !reports.some(holdsKey)
  const unavailable = (reason: string) => new EvidenceRejected(reason, otherKey)
  if (reports.length === 0) throw unavailable('the backend answered no report')
  const forAlgo = reports.filter(entry => entry.signing_algo === request.algo)
  if (forAlgo.length === 0) throw unavailable(`no report for signing_algo ${request.algo} (the backend echoed ${String(reports[0]!.signing_algo).slice(0, 20)})`)
  const report = select(forAlgo, request, holdsKey)
  if (report === undefined) throw unavailable('the backend echoed another signing_address')

  // Empty evidence.
  const quoteHex = report.intel_quote
  if (typeof quoteHex !== 'string' || quoteHex === '' || !isHex(quoteHex)) throw unavailable('the hardware quote is empty or not hex')
  const quote = readQuote(hexToBytes(quoteHex))
  if (quote === null) throw unavailable('the hardware quote is too short or not a TDX quote')
  let gpu: Record<string, unknown> | undefined
  if (request.proofFormat.gpu) {
    try {
      gpu = record(typeof report.nvidia_payload === 'string' ? JSON.parse(report.nvidia_payload) : undefined)
    } catch {
      gpu = undefined
    }
    if (gpu === undefined || !Array.isArray(gpu.evidence_list) || gpu.evidence_list.length === 0) throw unavailable('the GPU evidence is missing or empty')
  }

  // The challenge, echoed three ways: each must be ours.
  if (!same(report.request_nonce, request.nonce)) throw unavailable('the report echoes another nonce')
  if (gpu !== undefined && !same(gpu.nonce, request.nonce)) throw unavailable('the GPU evidence carries another nonce')
  if (bytesToHex(quote.reportData.subarray(32)) !== request.nonce.toLowerCase()) throw unavailable("the quote's report data carries another nonce")

  // The signing key, bound through the address to the quote.
  const address = report.signing_address
  const key = report.signing_public_key
  if (typeof address !== 'string' || typeof key !== 'string') throw unavailable('the report has no signing address or key')
  const modelPublicKey = modelKeyOf(report, request.algo)
  if (request.algo === 'ed25519') {
    if (modelPublicKey === null || !same(address, key)) throw unavailable('the ed25519 signing key is malformed or is not the signing address')
  } else {
    if (modelPublicKey === null) throw unavailable('the ecdsa signing key is malformed or not on secp256k1')
    if (ethAddress(hexToBytes(modelPublicKey)) !== address.toLowerCase()) throw unavailable('the ecdsa signing key does not hash to the signing address')
  }
  const tls = typeof report.tls_cert_fingerprint === 'string' ? report.tls_cert_fingerprint : undefined
  const half = expectedBindingHalf(request.proofFormat.binding, request.algo, address, tls)
  if (half === null || bytesToHex(quote.reportData.subarray(0, 32)) !== bytesToHex(half)) {
    throw unavailable(`the quote's report data does not bind the signing address as ${request.proofFormat.name} requires`)
  }

  const { all_attestations: _all, ...verbatim } = report
  const info = record(report.info)
  const subject = typeof report.model_name === 'string' ? report.model_name : typeof info?.app_id === 'string' ? info.app_id : address
  return { signingAlgo: request.algo, signingAddress: address, signingKey: key, modelPublicKey, nativeModelKey: key, subject, report: verbatim }
}
