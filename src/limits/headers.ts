import { ApiError } from '../http/errors'
import type { RateDecision, RateScope } from './limiter'

/** Whole seconds to wait, rounded up and at least 1 (a `Retry-After: 0` invites a hot retry loop). */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000))
}

/**
 * The rate-limit response headers for a decision (spec §7, §8): limit, remaining and reset
 * (epoch seconds) always, as integers; `Retry-After` (integer seconds) only on a refusal.
 */
export function rateLimitHeaders(decision: RateDecision): Record<string, string> {
  const headers: Record<string, string> = {
    'X-RateLimit-Limit': String(decision.limit),
    'X-RateLimit-Remaining': String(decision.remaining),
    'X-RateLimit-Reset': String(decision.resetAt),
  }
  if (!decision.allowed) headers['Retry-After'] = String(retryAfterSeconds(decision.retryAfterMs))
  return headers
}

/** A refill rate for messages: at most 6 decimals, the precision the buckets work at (0.5, 2, 0.333333). */
export function formatRate(perSecond: number): string {
  return String(Math.round(perSecond * 1_000_000) / 1_000_000)
}

/** The 429 `rate_limited` error for a refused decision, carrying its headers. */
export function rateLimitedError(decision: RateDecision, scope: RateScope): ApiError {
  const headers = rateLimitHeaders({ ...decision, allowed: false })
  const message =
    `rate limit exceeded for this ${scope} (${decision.limit} requests, refills ${formatRate(decision.refillPerSecond)}/s); ` +
    `retry after ${headers['Retry-After']}s`
  return new ApiError('rate_limited', message, undefined, headers)
}
