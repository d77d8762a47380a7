import type { BucketRule } from '../config/config'
import type { Clock } from '../lib/clock'
import { fullBucket, isFull, peekBucket, refillPerSecond, takeFromBucket, type BucketOutcome, type BucketState } from './token-bucket'

/** One bucket's state as shown to clients: integers only, reset in whole epoch seconds. */
export interface RateSnapshot {
  /** Take: whether the cost was consumed. Peek: whether a take of 1 would succeed now. */
  readonly allowed: boolean
  /** The bucket's burst (`X-RateLimit-Limit`). */
  readonly limit: number
  /** Whole tokens left (`X-RateLimit-Remaining`). */
  readonly remaining: number
  /** Epoch seconds, rounded up, at which the bucket is full again (`X-RateLimit-Reset`). */
  readonly resetAt: number
  /** Integer ms until a refused request could pass; 0 when allowed. */
  readonly retryAfterMs: number
  /** The refill rate in effect, tokens per second (may be fractional, e.g. 0.5; steps of 1e-6). */
  readonly refillPerSecond: number
}

/** The outcome of `RateLimiter.take`: same fields as a snapshot, `allowed` meaning "consumed". */
export type RateDecision = RateSnapshot

/** Which bucket of a pair a decision is about; names the scope in the 429 message. */
export type RateScope = 'key' | 'organization'

/** A bucket to take from: its key string (`inf:key:<keyId>`, …) and its rule. */
export interface BucketRef {
  readonly key: string
  readonly rule: BucketRule
}

/** The outcome of `takeBoth`: whether both were consumed, and the tighter bucket's decision for headers. */
export interface PairDecision {
  readonly allowed: boolean
  readonly decision: RateDecision
  readonly scope: RateScope
}

interface Entry {
  state: BucketState
  rule: BucketRule
}

/** Default soft bound on stored buckets; see `RateLimiter` for what happens past it. */
export const DEFAULT_MAX_BUCKETS = 100_000

/**
 * In-process keyed token buckets (ARCHITECTURE.md §6, §11: per instance).
 *
 * Memory: only buckets that have been taken from are stored, in least-recently-taken order.
 * When the map reaches `maxBuckets`, the oldest buckets that have refilled to full are dropped
 * (a full bucket equals a fresh one, so dropping it changes nothing). A partially drained
 * bucket is never dropped: evicting it would hand its owner a fresh burst, and anyone able to
 * touch many keys could use that to reset their own. So the bound is soft: it can be exceeded
 * only by buckets drained within their last refill period, i.e. by principals that were
 * actually active. A sweep stops at 3/4 of the bound; if drained buckets keep it above that,
 * the next sweep waits until the map has doubled, so eviction costs O(1) amortized per insert.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, Entry>()
  private nextSweepAt: number

  constructor(
    private readonly clock: Clock,
    private readonly maxBuckets = DEFAULT_MAX_BUCKETS,
  ) {
    if (!Number.isSafeInteger(maxBuckets) || maxBuckets < 1) throw new RangeError('maxBuckets must be a positive integer')
    this.nextSweepAt = maxBuckets
  }

  /** Takes `cost` tokens from bucket `key` if it holds them; on refusal consumes nothing. */
  take(key: string, rule: BucketRule, cost = 1): RateDecision {
    const nowMs = this.clock.now()
    const { state, outcome } = takeFromBucket(this.stateOf(key, rule, nowMs), rule, nowMs, cost)
    if (outcome.allowed) this.store(key, rule, state, nowMs)
    return toSnapshot(outcome, rule)
  }

  /** The bucket now, without consuming or storing anything (backs GET /api/v1/rate-limits). */
  peek(key: string, rule: BucketRule): RateSnapshot {
    const nowMs = this.clock.now()
    return toSnapshot(peekBucket(this.stateOf(key, rule, nowMs), rule, nowMs), rule)
  }

  /**
   * Takes `cost` from both buckets or from neither: if either would refuse, nothing is consumed
   * and the refusing bucket (the one with the longer wait, if both refuse) is reported. When
   * both allow, the one with fewer tokens left is reported, so headers show the binding limit.
   */
  takeBoth(key: BucketRef, org: BucketRef, cost = 1): PairDecision {
    if (key.key === org.key) throw new RangeError(`takeBoth needs two distinct buckets, got "${key.key}" twice`)
    const nowMs = this.clock.now()
    const keyTake = takeFromBucket(this.stateOf(key.key, key.rule, nowMs), key.rule, nowMs, cost)
    const orgTake = takeFromBucket(this.stateOf(org.key, org.rule, nowMs), org.rule, nowMs, cost)
    const allowed = keyTake.outcome.allowed && orgTake.outcome.allowed
    if (allowed) {
      this.store(key.key, key.rule, keyTake.state, nowMs)
      this.store(org.key, org.rule, orgTake.state, nowMs)
    }
    const keyDecision = toSnapshot(keyTake.outcome, key.rule)
    const orgDecision = toSnapshot(orgTake.outcome, org.rule)
    return tighter(keyDecision, orgDecision) === keyDecision
      ? { allowed, decision: keyDecision, scope: 'key' }
      : { allowed, decision: orgDecision, scope: 'organization' }
  }

  /** Number of stored buckets (tests, metrics). */
  get size(): number {
    return this.buckets.size
  }

  private stateOf(key: string, rule: BucketRule, nowMs: number): BucketState {
    return this.buckets.get(key)?.state ?? fullBucket(rule, nowMs)
  }

  private store(key: string, rule: BucketRule, state: BucketState, nowMs: number): void {
    // Delete then set moves the key to the end: the map iterates least recently taken first.
    const existed = this.buckets.delete(key)
    if (!existed && this.buckets.size >= this.nextSweepAt) this.sweep(nowMs)
    this.buckets.set(key, { state, rule })
  }

  private sweep(nowMs: number): void {
    const lowWater = Math.floor(this.maxBuckets * 0.75)
    for (const [key, entry] of this.buckets) {
      if (this.buckets.size <= lowWater) break
      if (isFull(entry.state, entry.rule, nowMs)) this.buckets.delete(key)
    }
    // Back under the low-water mark: sweep again at the bound. Still above it (drained buckets
    // the sweep may not drop): wait until the map doubles, so sweeping stays O(1) amortized.
    this.nextSweepAt = this.buckets.size <= lowWater ? this.maxBuckets : this.buckets.size * 2
  }
}

function toSnapshot(outcome: BucketOutcome, rule: BucketRule): RateSnapshot {
  return {
    allowed: outcome.allowed,
    limit: rule.burst,
    remaining: outcome.remaining,
    resetAt: Math.ceil(outcome.resetAtMs / 1000),
    retryAfterMs: outcome.retryAfterMs,
    refillPerSecond: refillPerSecond(rule),
  }
}

/** The decision that binds: a refusal over an allowance, then the longer wait, then fewer left. */
function tighter(a: RateDecision, b: RateDecision): RateDecision {
  if (a.allowed !== b.allowed) return a.allowed ? b : a
  if (a.retryAfterMs !== b.retryAfterMs) return a.retryAfterMs > b.retryAfterMs ? a : b
  if (a.remaining !== b.remaining) return a.remaining < b.remaining ? a : b
  return a.resetAt >= b.resetAt ? a : b
}
