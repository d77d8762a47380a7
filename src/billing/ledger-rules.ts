// The spend-cap windows, the refusals the ledger answers with, and how much lease it asks for
// (split from ledger.ts).
import type { SpendCapPeriod } from '../db/schema'
import { ApiError } from '../http/errors'
import { utcDay, utcMonth, type Window } from '../lib/clock'
import { formatUsd, MAX_NANOS, type Nanos } from '../lib/money'

export function capWindow(period: SpendCapPeriod, nowMs: number): Window {
  if (period === 'daily') return utcDay(nowMs)
  if (period === 'monthly') return utcMonth(nowMs)
  return { startMs: 0, endMs: Number.MAX_SAFE_INTEGER }
}

/**
 * A call refused by its key's cap: what is left in the window cannot cover the call's
 * worst-case cost (its estimate). That need not mean the cap is used up: a smaller call (a lower
 * max_tokens) may still fit, and an overall cap's key expires only once its spend reaches the
 * cap (spec §3.1), so the message says which limit refused and why.
 */
export function capRefusal(period: SpendCapPeriod, cap: Nanos, window: Window, nowMs: number, estimate: Nanos, fixedPrice: boolean): ApiError {
  const capText = `this key's ${period} spend cap of ${formatUsd(cap)} USD (${cap} nanos)`
  const costText = `this request's worst-case cost of ${formatUsd(estimate)} USD (${estimate} nanos)`
  // Said of the whole cap only when the cost exceeds it; otherwise what is left (the cap less what
  // was spent in the window and what calls in flight hold) is short, not the cap.
  const refused = estimate > cap ? `${capText} cannot cover ${costText}` : `${capText} has less left than ${costText} (after what it spent and what calls in flight hold)`
  // No reset helps a call whose worst case exceeds the whole cap: a Retry-After would only send
  // the client back at the window's end to be refused again. A token-priced call may fit with a
  // smaller output cap; a fixed-price one (a page, a search, a parse) cannot shrink.
  if (period === 'overall' || estimate > cap) {
    return new ApiError('insufficient_quota', `${refused}; ${fixedPrice ? 'the price of this call is fixed, so it cannot fit in what is left of the cap' : 'a request for fewer output tokens may still fit'}`)
  }
  const retryAfter = Math.max(1, Math.ceil((window.endMs - nowMs) / 1000))
  return new ApiError('insufficient_quota', `${refused}; the cap resets at ${new Date(window.endMs).toISOString()}`, undefined, { 'retry-after': String(retryAfter) })
}

export function fundsRefusal(estimate: Nanos): ApiError {
  return new ApiError(
    'insufficient_quota',
    `insufficient funds: the organization's plan allowance and prepaid balance cannot cover this call (estimated ${formatUsd(estimate)} USD)`,
  )
}

export const min = (a: Nanos, b: Nanos): Nanos => (a < b ? a : b)
export const positive = (a: Nanos): Nanos => (a > 0n ? a : 0n)

// A lease is topped up by at least this much so that small requests rarely wait on the database.
const MIN_LEASE = 100_000_000n // 0.10 USD
const LEASE_MULTIPLE = 8n

/**
 * How much lease to ask for: a few requests' worth (LEASE_MULTIPLE × `need`, or twice the demand
 * `wanted` on the pool), at least MIN_LEASE, at most MAX_NANOS (past int64 it cannot be bound as
 * an SQL argument, and no scope holds more).
 */
export function leaseTarget(need: Nanos, wanted: Nanos): Nanos {
  let target = need * LEASE_MULTIPLE
  if (wanted * 2n > target) target = wanted * 2n
  return target < MIN_LEASE ? MIN_LEASE : target > MAX_NANOS ? MAX_NANOS : target
}
