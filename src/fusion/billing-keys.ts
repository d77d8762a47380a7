import { ApiError } from '../http/errors'
import type { ChatRequest } from '../inference/canonical'
import { UUID } from '../lib/ids'
import type { FusionRequest } from './schema'
import type { FusionDeps } from './service'

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
 * charges a billing key once, so repeating the same request with the same Idempotency-Key never
 * bills a part twice, though inference runs again (it is not a cache). Reusing the key for a
 * different request is refused (refuseReusedKey); another organization's use of the same UUID
 * is its own. `stream` and `user` are left out of the digest: they do not change what is inferred.
 * What spells the same request differently digests alike (QA: a retry rebuilt from a map, or with
 * `tools: []`, was refused as another request): object members in any order (RFC 8259 gives their
 * order no meaning), and the hosted tools as resolved (`hosted`: the flags and their tool entries).
 */
export function fusionBillingKeys(idempotencyKey: string, orgId: string, request: FusionRequest, hosted: ChatRequest['hosted'], judgeId: string, hostedDefaults?: { webSearch: boolean; webFetch: boolean }) {
  const shape = canonicalJson([
    orgId, request.models, request.messages, request.temperature ?? null, request.top_p ?? null, request.max_tokens ?? null, hosted, judgeId,
    // MCP's web defaults shape the inference too (absent for HTTP).
    ...(hostedDefaults ? [hostedDefaults.webSearch, hostedDefaults.webFetch] : []),
  ])
  const digest = new Bun.CryptoHasher('sha256').update(shape).digest('hex').slice(0, 32)
  const family = `fusion:${idempotencyKey}:`
  const base = `${family}${digest}`
  return {
    /** Every billing key under this Idempotency-Key, whatever the request, starts with this. */
    family,
    /** Every billing key of this request (its parts, their hosted web work, its documents) starts with this. */
    request: `${base}:`,
    participant: (modelId: string) => `${base}:participant:${modelId}`,
    judge: `${base}:judge:${judgeId}`,
    /** The run's attached documents, extracted once before the parts (service.ts extractOnce). */
    documents: `${base}:documents`,
  }
}

/**
 * Refuses an Idempotency-Key the organization was already charged under for a different request
 * (SECURITY-NOTES L5: same key, different body: 4xx), before anything is reserved or run: the
 * client reused a key by mistake, and billing the new request under it would make the key's
 * repeat-safety a lie. Checked against committed charges, so two first requests with different
 * bodies sent at the same moment may both run (each billed once); a key whose request was never
 * charged (every part failed) can still be used.
 */
export async function refuseReusedKey(deps: Pick<FusionDeps, 'billedOutside'>, orgId: string, keys: ReturnType<typeof fusionBillingKeys>): Promise<void> {
  if (await deps.billedOutside(orgId, keys.family, keys.request)) {
    throw new ApiError('invalid_request', 'this Idempotency-Key was used for a different request; send a new key', 'Idempotency-Key')
  }
}

/** JSON with every object's members in code-unit order of their names; arrays keep theirs. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, member: unknown) => {
    if (member === null || typeof member !== 'object' || Array.isArray(member)) return member
    // fromEntries makes own members of them all, a `__proto__` too (an assignment would not).
    return Object.fromEntries(Object.entries(member).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
  })
}
