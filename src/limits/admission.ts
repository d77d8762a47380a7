import type { BucketRule, LimitsConfig } from '../config/config'
import { ApiError } from '../http/errors'
import type { Principal } from '../keys/principal'
import type { Clock } from '../lib/clock'
import { ConcurrencyGate } from './concurrency'
import { rateLimitedError } from './headers'
import { RateLimiter, type RateDecision, type RateSnapshot } from './limiter'

/** The part of a principal the limits look at. */
export type LimitedPrincipal = Pick<Principal, 'orgId' | 'keyId'>

/** Which family of buckets: inference and management are limited separately (spec §8). */
export type LimitSurface = 'inference' | 'management'

/** A key bucket and an org bucket of one surface. */
export interface BucketPairSnapshot {
  readonly key: RateSnapshot
  readonly org: RateSnapshot
}

/** Everything GET /api/v1/rate-limits shows, read without consuming. */
export interface LimitsSnapshot {
  readonly inference: BucketPairSnapshot
  readonly management: BucketPairSnapshot
  readonly concurrency: { readonly inUse: number; readonly limit: number }
}

const PREFIX: Record<LimitSurface, string> = { inference: 'inf', management: 'mgmt' }

/** The bucket key string: `inf:key:<keyId>`, `inf:org:<orgId>`, `mgmt:key:<keyId>`, `mgmt:org:<orgId>`. */
export function bucketKey(surface: LimitSurface, scope: 'key' | 'org', id: string): string {
  return `${PREFIX[surface]}:${scope}:${id}`
}

/** Retry-After for a full concurrency gate: slots free as soon as a request ends, so 1 s. */
const CONCURRENCY_RETRY_SECONDS = 1

/**
 * Admission control for one instance (ARCHITECTURE.md §8 steps 2 and 4): per-key and per-org
 * token buckets for inference and, separately, for management, plus the per-org inference
 * concurrency gate. Management checks never touch inference buckets or slots.
 */
export class Limits {
  /** The keyed buckets (exposed for metrics and tests). */
  readonly limiter: RateLimiter
  /** The per-org inference concurrency gate. */
  readonly concurrency: ConcurrencyGate

  constructor(
    private readonly config: LimitsConfig,
    private readonly clock: Clock,
    options: { maxBuckets?: number } = {},
  ) {
    this.limiter = new RateLimiter(clock, options.maxBuckets)
    this.concurrency = new ConcurrencyGate(config.orgInferenceConcurrency)
  }

  /** Takes one inference request from the key and org buckets (both or neither); throws 429 `rate_limited`. */
  checkInference(principal: LimitedPrincipal): RateDecision {
    return this.check('inference', principal)
  }

  /** Takes one management request from the key and org buckets (both or neither); throws 429 `rate_limited`. */
  checkManagement(principal: LimitedPrincipal): RateDecision {
    return this.check('management', principal)
  }

  /**
   * Takes an inference slot for the org and returns its (idempotent) release, to be called in
   * the request's `finally`. Throws 429 `rate_limited` with `Retry-After: 1` when the org has
   * `orgInferenceConcurrency` requests in flight.
   */
  acquireInferenceSlot(orgId: string): () => void {
    const release = this.concurrency.tryAcquire(orgId)
    if (release !== null) return release
    const limit = this.concurrency.limit
    // The X-RateLimit-* headers describe the limit that refused: the gate, with nothing left.
    throw new ApiError(
      'rate_limited',
      `too many concurrent inference requests for this organization (limit ${limit} in flight); retry after ${CONCURRENCY_RETRY_SECONDS}s`,
      undefined,
      {
        'X-RateLimit-Limit': String(limit),
        'X-RateLimit-Remaining': '0',
        'X-RateLimit-Reset': String(Math.ceil(this.clock.now() / 1000) + CONCURRENCY_RETRY_SECONDS),
        'Retry-After': String(CONCURRENCY_RETRY_SECONDS),
      },
    )
  }

  /** The caller's buckets and slots now, consuming nothing. */
  snapshot(principal: LimitedPrincipal): LimitsSnapshot {
    return {
      inference: this.peekPair('inference', principal),
      management: this.peekPair('management', principal),
      concurrency: { inUse: this.concurrency.inUse(principal.orgId), limit: this.concurrency.limit },
    }
  }

  private rules(surface: LimitSurface): { key: BucketRule; org: BucketRule } {
    return this.config[surface]
  }

  private check(surface: LimitSurface, principal: LimitedPrincipal): RateDecision {
    const rules = this.rules(surface)
    const result = this.limiter.takeBoth(
      { key: bucketKey(surface, 'key', principal.keyId), rule: rules.key },
      { key: bucketKey(surface, 'org', principal.orgId), rule: rules.org },
    )
    if (!result.allowed) throw rateLimitedError(result.decision, result.scope)
    return result.decision
  }

  private peekPair(surface: LimitSurface, principal: LimitedPrincipal): BucketPairSnapshot {
    const rules = this.rules(surface)
    return {
      key: this.limiter.peek(bucketKey(surface, 'key', principal.keyId), rules.key),
      org: this.limiter.peek(bucketKey(surface, 'org', principal.orgId), rules.org),
    }
  }
}
