// The spend-cap windows and the refusals the ledger answers with (split from ledger.ts).
import type { SpendCapPeriod } from '../db/schema'
import { ApiError } from '../http/errors'
import { utcDay, utcMonth, type Window } from '../lib/clock'
import { formatUsd, type Nanos } from '../lib/money'

export function capWindow(period: SpendCapPeriod, nowMs: number): Window {
  if (period === 'daily') return utcDay(nowMs)
  if (period === 'monthly') return utcMonth(nowMs)
  return { startMs: 0, endMs: Number.MAX_SAFE_INTEGER }
}

export function capRefusal(period: SpendCapPeriod, cap: Nanos, window: Window, nowMs: number): ApiError {
  if (period === 'overall') {
    return new ApiError('insufficient_quota', `this key's overall spend cap of ${formatUsd(cap)} USD (${cap} nanos) is used up`)
  }
  const retryAfter = Math.max(1, Math.ceil((window.endMs - nowMs) / 1000))
  return new ApiError(
    'insufficient_quota',
    `this key's ${period} spend cap of ${formatUsd(cap)} USD (${cap} nanos) is reached; it resets at ${new Date(window.endMs).toISOString()}`,
    undefined,
    { 'retry-after': String(retryAfter) },
  )
}

export function fundsRefusal(estimate: Nanos): ApiError {
  return new ApiError(
    'insufficient_quota',
    `insufficient funds: the organization's plan allowance and prepaid balance cannot cover this call (estimated ${formatUsd(estimate)} USD)`,
  )
}

export const min = (a: Nanos, b: Nanos): Nanos => (a < b ? a : b)
export const positive = (a: Nanos): Nanos => (a > 0n ? a : 0n)
