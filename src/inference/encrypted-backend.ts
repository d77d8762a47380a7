// The attested backend's side of an Encrypted relay (TEE-PROTOCOL.md B1, B3, B4): which backend
// holds the client's key now, the headers its protocol wants, what its refusals tell the client,
// and the evidence over its answer.

import { sha256 } from '@noble/hashes/sha2.js'
import type { AttestationService, AttestedBackend } from '../attestation/service'
import { ApiError } from '../http/errors'
import { EvidenceRejected, type Evidence } from '../providers/attested/evidence'
import { UpstreamError } from '../providers/types'
import { bytesToHex, randomBytes } from '../tee/keys'
import type { EncryptedHeaders } from './encrypted'
import type { CheckedBody } from './encrypted-body'
import { toApiError } from './upstream-errors'

/**
 * B3 row 4: the client's model key must be the one fresh evidence shows now. Only a backend
 * attested with that key is used; contradicting evidence from it is 503 at once.
 *
 * Candidates come cooling-last (AttestationService.backends), so a backend that just failed is
 * attested only after the others; it is never skipped, since only the backend holding the
 * client's key can serve the request. Round-robin does not apply: the client chose the backend
 * by the key it encrypted to (GET /api/v1/attestation answers with the first ready backend, or
 * the one `signing_address` names). For the same reason, rejected evidence from a backend none of
 * whose reports carries the client's key refuses nothing: it could never serve this ciphertext,
 * just as GET /api/v1/attestation passes over a backend that does not serve the `signing_address`
 * asked for. Its rejection is still counted (AttestedProvider.attest) and goes to `passedOver`.
 */
export async function pinKey(
  attestation: AttestationService,
  candidates: Array<{ target: AttestedBackend; checked: CheckedBody }>,
  h: EncryptedHeaders,
  on: {
    /** The client's request: its leaving ends the evidence fetch, and asks no other backend. */
    signal: AbortSignal
    /** Each backend as its evidence is fetched (the log line names the last one). */
    attesting: (target: AttestedBackend) => void
    passedOver: (target: AttestedBackend, error: EvidenceRejected) => void
  },
) {
  let attested = 0
  let unreachable = 0
  let rejected: EvidenceRejected | undefined
  for (const candidate of candidates) {
    let evidence: Evidence
    on.attesting(candidate.target)
    try {
      evidence = await attestation.attestAt(candidate.target, { nonce: bytesToHex(randomBytes(32)), algo: h.algo, modelKey: h.modelKey, signal: on.signal })
    } catch (error) {
      // Whatever the fetch failed with once the client left, the caller answers it as gone.
      if (on.signal.aborted) throw error
      if (error instanceof UpstreamError) {
        unreachable += 1
        continue
      }
      if (!(error instanceof EvidenceRejected && error.otherKey)) throw error
      on.passedOver(candidate.target, error)
      rejected ??= error
      continue
    }
    attested += 1
    if (evidence.modelPublicKey === h.modelKey) return { ...candidate, evidence }
  }
  // The key may be that of a backend that did not answer: an outage, not the client's mistake.
  if (attested > 0 && unreachable > 0) throw new ApiError('unavailable', 'no reachable attested backend of this model attests svc-encrypted-model-pub-key now, and some did not answer; retry shortly, or re-attest (GET /api/v1/attestation) and encrypt again')
  if (attested > 0) throw new ApiError('invalid_request', 'model key mismatch: svc-encrypted-model-pub-key is not the key the backend attests now; re-attest (GET /api/v1/attestation) and encrypt again', 'svc-encrypted-model-pub-key')
  // No backend showed sound evidence: the rejection is the answer, as with a single backend.
  if (rejected !== undefined) throw rejected
  throw new ApiError('unavailable', 'no attested backend of this model could produce evidence')
}

/** B1: the backend's header names for this family and version, plus X-Request-Hash. */
export function backendHeaders(h: EncryptedHeaders, target: AttestedBackend, evidence: Evidence, rawBody: Uint8Array, requestId: string): Record<string, string> {
  const e2ee = target.provider.proofFormat.e2ee!
  const out: Record<string, string> = {
    // Sent upstream on every call, so one request can be traced through both logs (README, Privacy levels).
    'x-request-id': requestId,
    'x-signing-algo': h.algo,
    'x-client-pub-key': h.clientKey,
    'x-model-pub-key': evidence.nativeModelKey,
    'x-request-hash': bytesToHex(sha256(rawBody)),
  }
  if (e2ee.family === 'nearai') {
    if (e2ee.version === 2) out['x-encryption-version'] = '2'
    if (h.allFields) out['x-encrypt-all-fields'] = 'true'
  } else if (e2ee.version === 2) {
    out['x-e2ee-version'] = '2'
    out['x-e2ee-nonce'] = h.nonce!
    out['x-e2ee-timestamp'] = String(h.timestamp!)
  }
  return out
}

/** A backend 400 (for example a failed decryption) is the caller's 400, carrying the backend's error type only. */
export function backendRefusal(error: unknown): ApiError {
  if (error instanceof UpstreamError && error.kind === 'bad-request') {
    let type = 'bad_request'
    try {
      const parsed = JSON.parse(error.details.bodySnippet ?? '') as { error?: { type?: unknown } }
      if (typeof parsed.error?.type === 'string' && /^[a-z0-9_.-]{1,64}$/i.test(parsed.error.type)) type = parsed.error.type
    } catch {
      // No JSON: the generic type stands.
    }
    return new ApiError('invalid_request', `the attested backend refused the encrypted request (${type})`)
  }
  return toApiError(error)
}

/** B4: the exact body bytes and the backend's signature over them, fetched from the same backend. */
export async function responseEvidence(target: AttestedBackend, h: EncryptedHeaders, bytes: Uint8Array, parsed: Record<string, unknown>): Promise<Record<string, unknown>> {
  const base = { object: 'response_evidence', raw_body_b64: Buffer.from(bytes).toString('base64'), proof_format: target.provider.proofFormat.name, signing_algo: h.algo, response_sha256: bytesToHex(sha256(bytes)), verified: false }
  const id = typeof parsed.id === 'string' ? parsed.id : undefined
  const record = id === undefined ? null : await target.provider.signature(id, h.algo, target.backend.model)
  if (record === null) return { ...base, evidence_available: false, reason: id === undefined ? 'the response has no id' : 'the backend has no signature for this response', signing_address: null, signature: null, text: null, request_sha256: null }
  const parts = record.text.split(':')
  return { ...base, evidence_available: true, signing_address: record.signing_address, signature: record.signature, text: record.text, request_sha256: parts.length >= 2 ? parts[parts.length - 2] : null }
}
