import { describe, expect, test } from 'bun:test'
import type { BucketRule } from '../../../src/config/config'
import { RateLimiter } from '../../../src/limits/limiter'
import { FakeClock } from '../../support/fake-clock'

const rule: BucketRule = { burst: 3, perSecond: 1 }

describe('RateLimiter take and peek', () => {
  test('decisions carry limit, integer remaining, reset in epoch seconds and the refill rate', () => {
    const clock = new FakeClock()
    const limiter = new RateLimiter(clock)
    const nowS = clock.now() / 1000
    expect(limiter.take('inf:key:a', rule)).toEqual({ allowed: true, limit: 3, remaining: 2, resetAt: nowS + 1, retryAfterMs: 0, refillPerSecond: 1 })
    limiter.take('inf:key:a', rule)
    limiter.take('inf:key:a', rule)
    expect(limiter.take('inf:key:a', rule)).toEqual({ allowed: false, limit: 3, remaining: 0, resetAt: nowS + 3, retryAfterMs: 1000, refillPerSecond: 1 })
  })

  test('resetAt rounds up to the next whole second', () => {
    const clock = new FakeClock()
    clock.advance(1) // T0 + 1 ms
    const limiter = new RateLimiter(clock)
    const decision = limiter.take('k', { burst: 2, perSecond: 0.5 })
    // Full again at T0 + 2001 ms → the header says second T0/1000 + 3.
    expect(decision.resetAt).toBe((clock.now() - 1) / 1000 + 3)
  })

  test('keys are independent', () => {
    const limiter = new RateLimiter(new FakeClock())
    for (let i = 0; i < 3; i++) limiter.take('inf:key:a', rule)
    expect(limiter.take('inf:key:a', rule).allowed).toBe(false)
    expect(limiter.take('inf:key:b', rule).allowed).toBe(true)
    expect(limiter.take('mgmt:key:a', rule).allowed).toBe(true)
  })

  test('peek neither consumes nor stores', () => {
    const clock = new FakeClock()
    const limiter = new RateLimiter(clock)
    expect(limiter.peek('k', rule)).toMatchObject({ allowed: true, remaining: 3 })
    expect(limiter.size).toBe(0)
    limiter.take('k', rule)
    for (let i = 0; i < 100; i++) expect(limiter.peek('k', rule).remaining).toBe(2)
    clock.advance(1000)
    expect(limiter.peek('k', rule)).toMatchObject({ remaining: 3, resetAt: clock.now() / 1000 })
  })

  test('a refused take stores nothing extra: the wait is not extended by retrying', () => {
    const clock = new FakeClock()
    const limiter = new RateLimiter(clock)
    for (let i = 0; i < 3; i++) limiter.take('k', rule)
    clock.advance(500)
    for (let i = 0; i < 10; i++) expect(limiter.take('k', rule).retryAfterMs).toBe(500)
    clock.advance(500)
    expect(limiter.take('k', rule).allowed).toBe(true)
  })
})

describe('RateLimiter eviction', () => {
  test('flooding with other keys never resets a drained bucket', () => {
    const clock = new FakeClock()
    const limiter = new RateLimiter(clock, 8)
    for (let i = 0; i < 3; i++) limiter.take('victim', rule)
    expect(limiter.take('victim', rule).allowed).toBe(false)
    for (let i = 0; i < 1000; i++) limiter.take(`flood:${i}`, rule)
    expect(limiter.take('victim', rule)).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 1000 })
    // The bound is soft: drained buckets are kept even past it.
    expect(limiter.size).toBe(1001)
  })

  test('full, idle buckets are dropped once the bound is reached; partially drained ones stay', () => {
    const clock = new FakeClock()
    const limiter = new RateLimiter(clock, 8)
    for (let i = 0; i < 3; i++) limiter.take('drained', { burst: 3, perSecond: 0.001 })
    for (let i = 0; i < 7; i++) limiter.take(`idle:${i}`, rule)
    expect(limiter.size).toBe(8)
    clock.advance(1000) // every idle:* bucket is full again; "drained" has barely refilled
    limiter.take('new', rule)
    expect(limiter.size).toBeLessThanOrEqual(8)
    expect(limiter.peek('drained', { burst: 3, perSecond: 0.001 })).toMatchObject({ allowed: false, remaining: 0 })
    expect(limiter.take('drained', { burst: 3, perSecond: 0.001 }).allowed).toBe(false)
    // A dropped bucket behaves exactly like the full one it replaced.
    expect(limiter.take('idle:0', rule)).toMatchObject({ allowed: true, remaining: 2 })
  })

  test('stays bounded under steady churn of short-lived keys', () => {
    const clock = new FakeClock()
    const limiter = new RateLimiter(clock, 100)
    for (let i = 0; i < 10_000; i++) {
      limiter.take(`k:${i}`, rule)
      clock.advance(50) // each bucket is full 1 s after its take
    }
    expect(limiter.size).toBeLessThanOrEqual(100)
  })

  test('rejects a nonsensical bound', () => {
    expect(() => new RateLimiter(new FakeClock(), 0)).toThrow(RangeError)
  })
})

describe('RateLimiter.takeBoth (key and org atomically)', () => {
  const keyRule: BucketRule = { burst: 2, perSecond: 1 }
  const orgRule: BucketRule = { burst: 3, perSecond: 1 }
  const pair = (keyId: string) => [{ key: `inf:key:${keyId}`, rule: keyRule }, { key: 'inf:org:o', rule: orgRule }] as const

  test('both allow: both consumed, the one with fewer left reported', () => {
    const limiter = new RateLimiter(new FakeClock())
    const first = limiter.takeBoth(...pair('a'))
    expect(first).toMatchObject({ allowed: true, scope: 'key', decision: { limit: 2, remaining: 1 } })
    expect(limiter.peek('inf:org:o', orgRule).remaining).toBe(2)
    const second = limiter.takeBoth(...pair('b'))
    expect(second).toMatchObject({ allowed: true, scope: 'organization', decision: { limit: 3, remaining: 1 } })
  })

  test('key refuses: the org bucket is not consumed', () => {
    const limiter = new RateLimiter(new FakeClock())
    limiter.takeBoth(...pair('a'))
    limiter.takeBoth(...pair('a'))
    expect(limiter.peek('inf:org:o', orgRule).remaining).toBe(1)
    for (let i = 0; i < 5; i++) {
      expect(limiter.takeBoth(...pair('a'))).toMatchObject({ allowed: false, scope: 'key', decision: { allowed: false, remaining: 0, retryAfterMs: 1000 } })
    }
    expect(limiter.peek('inf:org:o', orgRule).remaining).toBe(1)
  })

  test('org refuses: the key bucket is not consumed', () => {
    const limiter = new RateLimiter(new FakeClock())
    limiter.takeBoth(...pair('a'))
    limiter.takeBoth(...pair('b'))
    limiter.takeBoth(...pair('c'))
    expect(limiter.takeBoth(...pair('d'))).toMatchObject({ allowed: false, scope: 'organization', decision: { limit: 3, remaining: 0 } })
    expect(limiter.peek('inf:key:d', keyRule).remaining).toBe(2)
    expect(limiter.size).toBe(4) // d was never stored
  })

  test('both refuse: the longer wait is reported', () => {
    const clock = new FakeClock()
    const limiter = new RateLimiter(clock)
    const slowOrg: BucketRule = { burst: 2, perSecond: 0.25 }
    const refs = [{ key: 'k', rule: keyRule }, { key: 'o', rule: slowOrg }] as const
    limiter.takeBoth(...refs)
    limiter.takeBoth(...refs)
    expect(limiter.takeBoth(...refs)).toMatchObject({ allowed: false, scope: 'organization', decision: { retryAfterMs: 4000 } })
  })

  test('the same bucket twice is a programming error', () => {
    const limiter = new RateLimiter(new FakeClock())
    expect(() => limiter.takeBoth({ key: 'x', rule: keyRule }, { key: 'x', rule: orgRule })).toThrow(RangeError)
  })
})
