import { describe, expect, test } from 'bun:test'
import { formatRate, rateLimitedError, rateLimitHeaders, retryAfterSeconds } from '../../../src/limits/headers'
import type { RateDecision } from '../../../src/limits/limiter'

const allowed: RateDecision = { allowed: true, limit: 60, remaining: 59, resetAt: 1_768_478_401, retryAfterMs: 0, refillPerSecond: 1 }
const refused: RateDecision = { allowed: false, limit: 30, remaining: 0, resetAt: 1_768_478_460, retryAfterMs: 1500, refillPerSecond: 0.5 }

describe('rate-limit headers', () => {
  test('an allowed decision has limit, remaining and reset, without Retry-After', () => {
    expect(rateLimitHeaders(allowed)).toEqual({ 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '59', 'X-RateLimit-Reset': '1768478401' })
  })

  test('a refusal adds Retry-After in whole seconds, rounded up', () => {
    expect(rateLimitHeaders(refused)).toEqual({
      'X-RateLimit-Limit': '30',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '1768478460',
      'Retry-After': '2',
    })
  })

  test('Retry-After is at least 1 and never fractional', () => {
    expect([0, 1, 999, 1000, 1001, 2000, 2001, 59_999].map(retryAfterSeconds)).toEqual([1, 1, 1, 1, 2, 2, 3, 60])
  })

  test('every header value is an integer string', () => {
    for (const value of Object.values(rateLimitHeaders({ ...refused, retryAfterMs: 3334 }))) expect(value).toMatch(/^[0-9]+$/)
  })
})

describe('rateLimitedError', () => {
  test('a 429 rate_limited error naming the scope, limit, rate and wait, with the headers', () => {
    const error = rateLimitedError(refused, 'key')
    expect(error.status).toBe(429)
    expect(error.code).toBe('rate_limited')
    expect(error.param).toBeUndefined()
    expect(error.message).toBe('rate limit exceeded for this key (30 requests, refills 0.5/s); retry after 2s')
    expect(error.headers).toEqual(rateLimitHeaders(refused))
  })

  test('organization scope, and a Retry-After even if handed an allowed decision', () => {
    const error = rateLimitedError({ ...allowed, remaining: 0 }, 'organization')
    expect(error.message).toBe('rate limit exceeded for this organization (60 requests, refills 1/s); retry after 1s')
    expect(error.headers?.['Retry-After']).toBe('1')
  })

  test('rates are shown at the precision the buckets use', () => {
    expect([0.5, 2, 1 / 3, 0.1 + 0.2, 1_000_000].map(formatRate)).toEqual(['0.5', '2', '0.333333', '0.3', '1000000'])
  })
})
