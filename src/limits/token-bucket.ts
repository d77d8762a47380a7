import type { BucketRule } from '../config/config'

// Token-bucket maths, pure and clock-free: every function takes `nowMs` and returns new values.
//
// Tokens are held as integer nano-tokens (1 token = 1e9 units) and the refill rate as integer
// units per millisecond, so refill, comparison and rounding are exact integer arithmetic: a
// bucket refilled at 0.1/s for 10 s holds exactly 1 token, never 0.9999999999. The one float
// step is turning the configured `perSecond` into units/ms, rounded once to 1e-6 token/s
// (config rates are short decimals such as 0.5 or 2, which convert exactly).
// Magnitudes stay far below 2^53: burst ≤ 1e6 tokens (config schema) is ≤ 1e15 units.

/** Units per token: token counts are stored as integer nano-tokens. */
export const UNITS_PER_TOKEN = 1_000_000_000

/** A bucket's stored state: integer nano-tokens, as of `updatedAtMs` (epoch ms). */
export interface BucketState {
  readonly nanoTokens: number
  readonly updatedAtMs: number
}

/** What a bucket says at one instant, after refill (and after the take, for `takeFromBucket`). */
export interface BucketOutcome {
  /** For a take: whether `cost` was consumed. For a peek: whether a take of 1 would succeed. */
  readonly allowed: boolean
  /** Whole tokens left, rounded down. */
  readonly remaining: number
  /** Integer ms until the refused cost would be available; 0 when allowed. */
  readonly retryAfterMs: number
  /** Epoch ms (integer) at which the bucket is full again; `nowMs` when it is full now. */
  readonly resetAtMs: number
}

/** A take's outcome together with the state to store (unchanged, apart from refill, when refused). */
export interface BucketTake {
  readonly state: BucketState
  readonly outcome: BucketOutcome
}

/** Refill rate in integer units per ms; at least 1 so a positive rate never rounds to "never". */
export function unitsPerMs(rule: BucketRule): number {
  return Math.max(1, Math.round(rule.perSecond * 1_000_000))
}

/** The refill rate in effect, tokens per second: the configured one rounded to the bucket's 1e-6 step. */
export function refillPerSecond(rule: BucketRule): number {
  return unitsPerMs(rule) / 1_000_000
}

function capacityOf(rule: BucketRule): number {
  return rule.burst * UNITS_PER_TOKEN
}

/** A bucket as a key that has never been seen: full. */
export function fullBucket(rule: BucketRule, nowMs: number): BucketState {
  return { nanoTokens: capacityOf(rule), updatedAtMs: nowMs }
}

/**
 * The state at `nowMs`: tokens accrued since `updatedAtMs`, capped at burst. If the clock went
 * backwards, nothing accrues (never a negative refill) and the timestamp follows the clock
 * back, so a large backward step (an NTP correction) does not freeze the bucket for the size
 * of the step; the price is that the stepped-over interval may refill twice, bounded by burst.
 */
export function refill(state: BucketState, rule: BucketRule, nowMs: number): BucketState {
  const capacity = capacityOf(rule)
  const elapsedMs = nowMs - state.updatedAtMs
  if (elapsedMs <= 0 || state.nanoTokens >= capacity) return { nanoTokens: Math.min(state.nanoTokens, capacity), updatedAtMs: nowMs }
  const rate = unitsPerMs(rule)
  // Cap the elapsed time at what fills the bucket before multiplying, so the product stays small.
  const fillMs = Math.ceil((capacity - state.nanoTokens) / rate)
  const accrued = Math.min(elapsedMs, fillMs) * rate
  return { nanoTokens: Math.min(capacity, state.nanoTokens + accrued), updatedAtMs: nowMs }
}

/** Integer ms for an already-refilled bucket to go from `nanoTokens` to `target` units. */
function msUntil(nanoTokens: number, target: number, rule: BucketRule): number {
  return nanoTokens >= target ? 0 : Math.ceil((target - nanoTokens) / unitsPerMs(rule))
}

function outcomeOf(current: BucketState, rule: BucketRule, allowed: boolean, neededUnits: number): BucketOutcome {
  return {
    allowed,
    remaining: Math.floor(current.nanoTokens / UNITS_PER_TOKEN),
    retryAfterMs: allowed ? 0 : msUntil(current.nanoTokens, neededUnits, rule),
    resetAtMs: current.updatedAtMs + msUntil(current.nanoTokens, capacityOf(rule), rule),
  }
}

function checkCost(cost: number, rule: BucketRule): void {
  // A cost above burst could never be granted; that is a caller bug, not a client's 429.
  if (!Number.isSafeInteger(cost) || cost < 1 || cost > rule.burst) {
    throw new RangeError(`token bucket cost must be an integer from 1 to burst (${rule.burst}), got ${cost}`)
  }
}

/**
 * Takes `cost` whole tokens if the bucket (refilled to `nowMs`) holds them. On refusal nothing
 * is consumed and `retryAfterMs` says when the cost will be there.
 */
export function takeFromBucket(state: BucketState, rule: BucketRule, nowMs: number, cost = 1): BucketTake {
  checkCost(cost, rule)
  const current = refill(state, rule, nowMs)
  const needed = cost * UNITS_PER_TOKEN
  if (current.nanoTokens < needed) return { state: current, outcome: outcomeOf(current, rule, false, needed) }
  const after: BucketState = { nanoTokens: current.nanoTokens - needed, updatedAtMs: current.updatedAtMs }
  return { state: after, outcome: outcomeOf(after, rule, true, needed) }
}

/** The bucket at `nowMs` without consuming: `allowed` says whether a take of 1 would succeed. */
export function peekBucket(state: BucketState, rule: BucketRule, nowMs: number): BucketOutcome {
  const current = refill(state, rule, nowMs)
  return outcomeOf(current, rule, current.nanoTokens >= UNITS_PER_TOKEN, UNITS_PER_TOKEN)
}

/** True when the bucket has refilled to burst by `nowMs`: it then equals a fresh one and may be dropped. */
export function isFull(state: BucketState, rule: BucketRule, nowMs: number): boolean {
  return refill(state, rule, nowMs).nanoTokens >= capacityOf(rule)
}
