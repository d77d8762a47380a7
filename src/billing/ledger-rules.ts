// The spend-cap windows, the refusals the ledger answers with, and how much lease it asks for
// (split from ledger.ts).
import type { SpendCapPeriod } from '../db/schema'
import { ApiError } from '../http/errors'
import { utcDay, utcMonth, type Window } from '../lib/clock'
import { formatUsd, MAX_NANOS, type Nanos } from '../lib/money'
import type { ScopeRoom } from './scope-room'
import type { Purpose } from './ledger'
import { IDLE_RETURN_MS } from './sweeper'

export function capWindow(period: SpendCapPeriod, nowMs: number): Window {
  if (period === 'daily') return utcDay(nowMs)
  if (period === 'monthly') return utcMonth(nowMs)
  return { startMs: 0, endMs: Number.MAX_SAFE_INTEGER }
}

/**
 * Why a scope could not cover a call: what its spending left is too little ('spent': only the
 * cap's reset or a top-up helps), or the rest is only held, by this instance's calls in flight
 * ('held') or by another instance's lease ('leased'), and comes back. Without a room read (none
 * yet): 'spent', the answer that sends no client back too soon.
 */
export type Shortfall = 'spent' | 'held' | 'leased'

export function shortfall(room: ScopeRoom | null, estimate: Nanos): Shortfall {
  if (room === null || room.unspent < estimate) return 'spent'
  return room.unspent - room.leasedElsewhere < estimate ? 'leased' : 'held'
}

// Retry-After of a refusal that only held money caused, which both official SDKs honour up to
// 60 s. Calls in flight here give back what they do not spend as they settle, most within
// seconds; another instance's lease goes back once it has been idle IDLE_RETURN_MS (its next
// sweep), so asking sooner would mostly be refused again.
const HELD_RETRY_AFTER_S = 2
const LEASED_RETRY_AFTER_S = IDLE_RETURN_MS / 1000

/**
 * A refusal by held money: retry shortly. x-should-retry: true, since renderError tells the SDKs
 * not to retry any other insufficient_quota. `refused` says what could not cover what, `why`
 * who holds the rest: a caller whose own other calls hold it (a Fusion run's participants) words
 * it otherwise, since retrying would meet the same holds.
 */
export class HeldRefusal extends ApiError {
  constructor(
    readonly refused: string,
    readonly why: 'held' | 'leased',
  ) {
    const rest = why === 'held'
      ? 'calls in flight hold the rest and give back what they do not spend when they finish'
      : `another gateway instance holds the rest leased, and returns what it does not use once idle for ${LEASED_RETRY_AFTER_S} s`
    const retryAfter = String(why === 'held' ? HELD_RETRY_AFTER_S : LEASED_RETRY_AFTER_S)
    super('insufficient_quota', `${refused} for now: ${rest}; retry shortly`, undefined, { 'retry-after': retryAfter, 'x-should-retry': 'true' })
  }
}

/**
 * The key's cap refusing an admission of `estimate` (what the request holds already included);
 * a module function, not a closure per admission: this runs on every request's path.
 */
export function keyRefusal(cap: { period: SpendCapPeriod; nanos: Nanos }, purpose: Purpose, estimate: Nanos, nowMs: number, why: Shortfall): ApiError {
  return capRefusal(cap.period, cap.nanos, capWindow(cap.period, nowMs), nowMs, estimate, purpose !== 'chat' && purpose !== 'fusion', why)
}

/**
 * A call refused by its key's cap: what is left in the window cannot cover the call's
 * worst-case cost (its estimate). That need not mean the cap is used up: a smaller call (a lower
 * max_tokens) may still fit, calls in flight may hold what is left, and an overall cap's key
 * expires only once its spend reaches the cap (spec §3.1), so the message says which limit
 * refused and why. Only a cap that its spending left too little stops the key until its reset.
 */
function capRefusal(period: SpendCapPeriod, cap: Nanos, window: Window, nowMs: number, estimate: Nanos, fixedPrice: boolean, why: Shortfall): ApiError {
  const capText = `this key's ${period} spend cap of ${formatUsd(cap)} USD (${cap} nanos)`
  const costText = `this request's worst-case cost of ${formatUsd(estimate)} USD (${estimate} nanos)`
  if (why !== 'spent') return new HeldRefusal(`${capText} has less left than ${costText}`, why)
  // Said of the whole cap only when the cost exceeds it; otherwise what its spending left is short.
  const refused = estimate > cap ? `${capText} cannot cover ${costText}` : `${capText} has less left than ${costText} (after what it spent)`
  // No reset helps a call whose worst case exceeds the whole cap: a Retry-After would only send
  // the client back at the window's end to be refused again. A token-priced call may fit with a
  // smaller output cap or input (its input alone may exceed the cap); a fixed-price one (a page, a
  // search, a parse) cannot shrink.
  if (period === 'overall' || estimate > cap) {
    return new ApiError('insufficient_quota', `${refused}; ${fixedPrice ? 'the price of this call is fixed, so it cannot fit in what is left of the cap' : 'a smaller request (a lower max_tokens, a shorter input) may still fit'}`)
  }
  const retryAfter = Math.max(1, Math.ceil((window.endMs - nowMs) / 1000))
  return new ApiError('insufficient_quota', `${refused}; the cap resets at ${new Date(window.endMs).toISOString()}`, undefined, { 'retry-after': String(retryAfter) })
}

export function fundsRefusal(estimate: Nanos, why: Shortfall): ApiError {
  const cost = `(estimated ${formatUsd(estimate)} USD)`
  if (why !== 'spent') return new HeldRefusal(`insufficient funds: what the organization's plan allowance and prepaid balance have free cannot cover this call ${cost}`, why)
  return new ApiError('insufficient_quota', `insufficient funds: the organization's plan allowance and prepaid balance cannot cover this call ${cost}`)
}

export const min = (a: Nanos, b: Nanos): Nanos => (a < b ? a : b)
export const positive = (a: Nanos): Nanos => (a > 0n ? a : 0n)

// A lease is topped up by at least this much so that small requests rarely wait on the database.
const MIN_LEASE = 100_000_000n // 0.10 USD
const LEASE_MULTIPLE = 8n

/**
 * How much lease to ask for: what is `needed` at least, a few requests' worth (LEASE_MULTIPLE ×
 * the asking call's `estimate`), or the demand of the admissions waiting on the pool that its free
 * part does not cover (`unmet`), whichever is most; at least MIN_LEASE, at most MAX_NANOS (past
 * int64 it cannot be bound as an SQL argument, and no scope holds more). A burst leases about its
 * own demand: twice it kept the rest of an organization's money from its other instances (QA).
 */
export function leaseTarget(needed: Nanos, estimate: Nanos, unmet: Nanos): Nanos {
  let target = estimate * LEASE_MULTIPLE
  if (needed > target) target = needed
  if (unmet > target) target = unmet
  return target < MIN_LEASE ? MIN_LEASE : target > MAX_NANOS ? MAX_NANOS : target
}
