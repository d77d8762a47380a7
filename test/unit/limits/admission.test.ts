import { describe, expect, test } from 'bun:test'
import type { LimitsConfig } from '../../../src/config/config'
import { ApiError } from '../../../src/http/errors'
import { bucketKey, Limits } from '../../../src/limits/admission'
import { FakeClock } from '../../support/fake-clock'

const config: LimitsConfig = {
  inference: { key: { burst: 3, perSecond: 1 }, org: { burst: 5, perSecond: 2 } },
  management: { key: { burst: 2, perSecond: 0.5 }, org: { burst: 4, perSecond: 1 } },
  orgInferenceConcurrency: 2,
}
const alice = { orgId: 'org-1', keyId: 'key-a' }
const bob = { orgId: 'org-1', keyId: 'key-b' }

function caught(fn: () => unknown): ApiError {
  try {
    fn()
  } catch (error) {
    if (error instanceof ApiError) return error
    throw error
  }
  throw new Error('expected an ApiError')
}

describe('Limits.checkInference / checkManagement', () => {
  test('a key gets its burst, then 429 rate_limited with headers naming the key', () => {
    const clock = new FakeClock()
    const limits = new Limits(config, clock)
    expect([1, 2, 3].map(() => limits.checkInference(alice).remaining)).toEqual([2, 1, 0])
    const error = caught(() => limits.checkInference(alice))
    expect(error).toMatchObject({ status: 429, code: 'rate_limited' })
    expect(error.message).toBe('rate limit exceeded for this key (3 requests, refills 1/s); retry after 1s')
    expect(error.headers).toEqual({
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(clock.now() / 1000 + 3),
      'Retry-After': '1',
    })
    clock.advance(1000)
    expect(limits.checkInference(alice).allowed).toBe(true)
  })

  test('keys of one organization share its bucket; an org refusal names the organization and spares the key', () => {
    const limits = new Limits(config, new FakeClock())
    for (let i = 0; i < 3; i++) limits.checkInference(alice)
    limits.checkInference(bob)
    limits.checkInference(bob)
    const error = caught(() => limits.checkInference(bob))
    expect(error.message).toBe('rate limit exceeded for this organization (5 requests, refills 2/s); retry after 1s')
    expect(error.headers?.['X-RateLimit-Limit']).toBe('5')
    expect(limits.snapshot(bob).inference.key.remaining).toBe(1)
  })

  test('management limits are separate from inference limits', () => {
    const clock = new FakeClock()
    const limits = new Limits(config, clock)
    for (let i = 0; i < 3; i++) limits.checkInference(alice)
    expect(() => limits.checkInference(alice)).toThrow(ApiError)
    expect(limits.checkManagement(alice)).toMatchObject({ allowed: true, limit: 2, remaining: 1 })
    limits.checkManagement(alice)
    const error = caught(() => limits.checkManagement(alice))
    expect(error.message).toBe('rate limit exceeded for this key (2 requests, refills 0.5/s); retry after 2s')
    expect(error.headers?.['Retry-After']).toBe('2')
    clock.advance(1000)
    expect(limits.checkInference(alice).allowed).toBe(true)
    expect(() => limits.checkManagement(alice)).toThrow(ApiError)
  })

  test('management checks never take an inference slot', () => {
    const limits = new Limits(config, new FakeClock())
    limits.checkManagement(alice)
    expect(limits.concurrency.inUse(alice.orgId)).toBe(0)
  })

  test('a concurrent burst is admitted exactly up to burst', async () => {
    const limits = new Limits(config, new FakeClock())
    const results = await Promise.all(
      Array.from({ length: 20 }, async () => {
        try {
          return limits.checkInference(alice).allowed
        } catch {
          return false
        }
      }),
    )
    expect(results.filter(Boolean).length).toBe(3)
  })

  test('bucket keys follow the inf:/mgmt: key:/org: scheme', () => {
    expect(bucketKey('inference', 'key', 'k1')).toBe('inf:key:k1')
    expect(bucketKey('management', 'org', 'o1')).toBe('mgmt:org:o1')
    const limits = new Limits(config, new FakeClock())
    limits.checkInference(alice)
    expect(limits.limiter.peek('inf:key:key-a', config.inference.key).remaining).toBe(2)
    expect(limits.limiter.peek('inf:org:org-1', config.inference.org).remaining).toBe(4)
  })
})

describe('Limits.acquireInferenceSlot', () => {
  test('hands out the configured slots, then 429 with Retry-After 1; release frees one', () => {
    const clock = new FakeClock()
    const limits = new Limits(config, clock)
    const first = limits.acquireInferenceSlot('org-1')
    limits.acquireInferenceSlot('org-1')
    const error = caught(() => limits.acquireInferenceSlot('org-1'))
    expect(error).toMatchObject({ status: 429, code: 'rate_limited' })
    expect(error.message).toBe('too many concurrent inference requests for this organization (limit 2 in flight); retry after 1s')
    expect(error.headers).toEqual({
      'X-RateLimit-Limit': '2',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(clock.now() / 1000 + 1),
      'Retry-After': '1',
    })
    first()
    first()
    expect(limits.concurrency.inUse('org-1')).toBe(1)
    expect(typeof limits.acquireInferenceSlot('org-1')).toBe('function')
  })
})

describe('Limits.snapshot', () => {
  test('shows every window and the slots, and consumes nothing', () => {
    const clock = new FakeClock()
    const limits = new Limits(config, clock)
    limits.checkInference(alice)
    limits.checkManagement(alice)
    const release = limits.acquireInferenceSlot(alice.orgId)
    const nowS = clock.now() / 1000
    const expected = {
      inference: {
        key: { allowed: true, limit: 3, remaining: 2, resetAt: nowS + 1, retryAfterMs: 0, refillPerSecond: 1 },
        org: { allowed: true, limit: 5, remaining: 4, resetAt: nowS + 1, retryAfterMs: 0, refillPerSecond: 2 },
      },
      management: {
        key: { allowed: true, limit: 2, remaining: 1, resetAt: nowS + 2, retryAfterMs: 0, refillPerSecond: 0.5 },
        org: { allowed: true, limit: 4, remaining: 3, resetAt: nowS + 1, retryAfterMs: 0, refillPerSecond: 1 },
      },
      concurrency: { inUse: 1, limit: 2 },
    }
    for (let i = 0; i < 100; i++) expect(limits.snapshot(alice)).toEqual(expected)
    release()
    expect(limits.snapshot(alice).concurrency.inUse).toBe(0)
  })

  test('an unseen principal sees full windows and stores nothing', () => {
    const limits = new Limits(config, new FakeClock())
    const snapshot = limits.snapshot({ orgId: 'new-org', keyId: 'new-key' })
    expect(snapshot.inference.key.remaining).toBe(3)
    expect(snapshot.management.org.remaining).toBe(4)
    expect(limits.limiter.size).toBe(0)
  })
})
