import { ApiError } from '../http/errors'
import { UUID } from '../lib/ids'
import type { FusionRequest } from './schema'

/** The `Idempotency-Key` header: absent, or a UUID (any version); anything else is a 400. */
export function parseIdempotencyKey(value: string | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined
  const trimmed = value.trim()
  if (!UUID.test(trimmed)) throw new ApiError('invalid_request', 'Idempotency-Key must be a UUID, e.g. 0f8fad5b-d9cb-469f-a165-70867728950e', 'Idempotency-Key')
  return trimmed.toLowerCase()
}

/**
 * Billing keys for the parts of one Fusion request (issue 9 point 3). A part's key is the
 * Idempotency-Key, a digest of the organization and of everything that shapes the request's
 * inference (models, messages, sampling, hosted tools, judge), and the part's role. The ledger
 * charges a billing key once, so:
 * - repeating the same request with the same Idempotency-Key never bills a part twice, though
 *   inference runs again (it is not a cache);
 * - reusing an Idempotency-Key for a different request, or from another organization, bills
 *   that request normally: a key cannot make new work free.
 * `stream` and `user` are left out of the digest: they do not change what is inferred.
 */
export function fusionBillingKeys(idempotencyKey: string, orgId: string, request: FusionRequest, judgeId: string, hostedDefaults?: { webSearch: boolean; webFetch: boolean }) {
  const shape = JSON.stringify([
    orgId, request.models, request.messages, request.temperature ?? null, request.top_p ?? null, request.max_tokens ?? null,
    request.web_search === true, request.web_fetch === true, request.tools ?? null, judgeId,
    // MCP's web defaults shape the inference too (absent for HTTP, so its digests are unchanged).
    ...(hostedDefaults ? [hostedDefaults.webSearch, hostedDefaults.webFetch] : []),
  ])
  const digest = new Bun.CryptoHasher('sha256').update(shape).digest('hex').slice(0, 32)
  const base = `fusion:${idempotencyKey}:${digest}`
  return {
    participant: (modelId: string) => `${base}:participant:${modelId}`,
    judge: `${base}:judge:${judgeId}`,
    /** The run's attached documents, extracted once before the parts (service.ts extractOnce). */
    documents: `${base}:documents`,
  }
}
