import { describe, expect, test } from 'bun:test'
import type { BucketRule } from '../../../src/config/config'
import {
  fullBucket,
  isFull,
  peekBucket,
  refill,
  takeFromBucket,
  UNITS_PER_TOKEN,
  unitsPerMs,
  type BucketState,
} from '../../../src/limits/token-bucket'

const T0 = Date.UTC(2026, 0, 15, 12, 0, 0)

/** Takes `n` times at `nowMs`, returning the final state and outcomes. */
function drain(state: BucketState, rule: BucketRule, nowMs: number, n: number) {
  const outcomes = []
  for (let i = 0; i < n; i++) {
    const take = takeFromBucket(state, rule, nowMs)
    state = take.state
    outcomes.push(take.outcome)
  }
  return { state, outcomes }
}

describe('token bucket: burst then per-second refill', () => {
  const rule: BucketRule = { burst: 3, perSecond: 1 }

  test('a fresh bucket allows burst requests at once, then refuses', () => {
    const { state, outcomes } = drain(fullBucket(rule, T0), rule, T0, 4)
    expect(outcomes.map(o => o.allowed)).toEqual([true, true, true, false])
    expect(outcomes.map(o => o.remaining)).toEqual([2, 1, 0, 0])
    expect(outcomes[3]!.retryAfterMs).toBe(1000)
    expect(state.nanoTokens).toBe(0)
  })

  test('refills one token per second, never above burst', () => {
    let { state } = drain(fullBucket(rule, T0), rule, T0, 3)
    expect(takeFromBucket(state, rule, T0 + 999).outcome.allowed).toBe(false)
    const take = takeFromBucket(state, rule, T0 + 1000)
    expect(take.outcome).toMatchObject({ allowed: true, remaining: 0 })
    state = take.state
    // A long idle period refills to burst, not beyond.
    expect(peekBucket(state, rule, T0 + 3_600_000).remaining).toBe(3)
    expect(drain(state, rule, T0 + 3_600_000, 4).outcomes.map(o => o.allowed)).toEqual([true, true, true, false])
  })

  test('a refused take consumes nothing and says how long to wait', () => {
    const { state } = drain(fullBucket(rule, T0), rule, T0, 3)
    const refused = takeFromBucket(state, rule, T0 + 400)
    expect(refused.outcome).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 600 })
    expect(refused.state.nanoTokens).toBe(400 * unitsPerMs(rule))
    expect(takeFromBucket(refused.state, rule, T0 + 1000).outcome.allowed).toBe(true)
  })

  test('reset is when the bucket is full again', () => {
    const r: BucketRule = { burst: 5, perSecond: 2 }
    const { outcomes } = drain(fullBucket(r, T0), r, T0, 2)
    expect(outcomes[0]!.resetAtMs).toBe(T0 + 500)
    expect(outcomes[1]!.resetAtMs).toBe(T0 + 1000)
    expect(peekBucket(fullBucket(r, T0), r, T0).resetAtMs).toBe(T0)
  })

  test('a cost above one takes several tokens; bad costs are programming errors', () => {
    const r: BucketRule = { burst: 5, perSecond: 1 }
    const take = takeFromBucket(fullBucket(r, T0), r, T0, 4)
    expect(take.outcome).toMatchObject({ allowed: true, remaining: 1 })
    expect(takeFromBucket(take.state, r, T0, 2).outcome).toMatchObject({ allowed: false, retryAfterMs: 1000 })
    for (const cost of [0, -1, 1.5, 6, Number.NaN]) expect(() => takeFromBucket(fullBucket(r, T0), r, T0, cost)).toThrow(RangeError)
  })

  test('peek consumes nothing and says whether one request would pass', () => {
    const full = fullBucket(rule, T0)
    expect(peekBucket(full, rule, T0)).toEqual({ allowed: true, remaining: 3, retryAfterMs: 0, resetAtMs: T0 })
    const { state } = drain(full, rule, T0, 3)
    expect(peekBucket(state, rule, T0 + 250)).toEqual({ allowed: false, remaining: 0, retryAfterMs: 750, resetAtMs: T0 + 3000 })
    expect(full.nanoTokens).toBe(3 * UNITS_PER_TOKEN) // inputs are never mutated
  })
})

describe('token bucket: fractional rates and integer maths', () => {
  test('0.5/s: a token every two seconds', () => {
    const rule: BucketRule = { burst: 2, perSecond: 0.5 }
    const { state, outcomes } = drain(fullBucket(rule, T0), rule, T0, 3)
    expect(outcomes[2]).toMatchObject({ allowed: false, retryAfterMs: 2000, resetAtMs: T0 + 4000 })
    expect(takeFromBucket(state, rule, T0 + 1999).outcome).toMatchObject({ allowed: false, retryAfterMs: 1 })
    expect(takeFromBucket(state, rule, T0 + 2000).outcome).toMatchObject({ allowed: true, remaining: 0 })
  })

  test('0.1/s refilled in 100 small steps gives exactly one token after 10 s (no 0.999…)', () => {
    const rule: BucketRule = { burst: 5, perSecond: 0.1 }
    let { state } = drain(fullBucket(rule, T0), rule, T0, 5)
    for (let step = 1; step <= 100; step++) {
      state = refill(state, rule, T0 + step * 100)
      if (step < 100) expect(takeFromBucket(state, rule, T0 + step * 100).outcome.allowed).toBe(false)
    }
    expect(state.nanoTokens).toBe(UNITS_PER_TOKEN)
    expect(takeFromBucket(state, rule, T0 + 10_000).outcome).toMatchObject({ allowed: true, remaining: 0 })
  })

  test('a rate that does not divide a second rounds the wait up to a whole ms', () => {
    const rule: BucketRule = { burst: 1, perSecond: 0.3 }
    const { state, outcomes } = drain(fullBucket(rule, T0), rule, T0, 2)
    // 1 token / 0.3 per s = 3333.33… ms → 3334 ms, an integer.
    expect(outcomes[1]).toMatchObject({ allowed: false, retryAfterMs: 3334, resetAtMs: T0 + 3334 })
    expect(takeFromBucket(state, rule, T0 + 3333).outcome.allowed).toBe(false)
    expect(takeFromBucket(state, rule, T0 + 3334).outcome.allowed).toBe(true)
  })

  test('every outcome field is an integer, even at odd rates and times', () => {
    for (const perSecond of [0.3, 1 / 3, 0.7, 2.5, 1_000_000, 0.000001]) {
      const rule: BucketRule = { burst: 7, perSecond }
      let state = fullBucket(rule, T0)
      for (let i = 0; i < 20; i++) {
        const take = takeFromBucket(state, rule, T0 + i * 137)
        state = take.state
        for (const value of Object.values(take.outcome)) if (typeof value === 'number') expect(Number.isSafeInteger(value)).toBe(true)
        expect(Number.isSafeInteger(state.nanoTokens)).toBe(true)
      }
    }
  })

  test('a huge idle gap and the largest configurable bucket stay exact', () => {
    const rule: BucketRule = { burst: 1_000_000, perSecond: 1_000_000 }
    const { state } = drain(fullBucket(rule, T0), rule, T0, 3)
    expect(peekBucket(state, rule, T0 + 10 ** 12).remaining).toBe(1_000_000)
    const slow: BucketRule = { burst: 1_000_000, perSecond: 0.000001 }
    const drained = takeFromBucket(fullBucket(slow, T0), slow, T0, 1_000_000).state
    expect(isFull(drained, slow, T0 + 10 ** 15)).toBe(true)
  })
})

describe('token bucket: clock going backwards', () => {
  const rule: BucketRule = { burst: 2, perSecond: 1 }

  test('no negative refill, and refill resumes from the new time', () => {
    const { state } = drain(fullBucket(rule, T0), rule, T0, 2)
    const back = refill(state, rule, T0 - 60_000)
    expect(back).toEqual({ nanoTokens: 0, updatedAtMs: T0 - 60_000 })
    expect(peekBucket(state, rule, T0 - 60_000)).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 1000 })
    // The bucket does not freeze for the 60 s step: one second later one token is back.
    expect(takeFromBucket(back, rule, T0 - 59_000).outcome).toMatchObject({ allowed: true, remaining: 0 })
  })

  test('a backwards step never adds tokens or exceeds burst', () => {
    const half = takeFromBucket(fullBucket(rule, T0), rule, T0).state
    expect(refill(half, rule, T0 - 1).nanoTokens).toBe(UNITS_PER_TOKEN)
    expect(refill(fullBucket(rule, T0), rule, T0 - 5000).nanoTokens).toBe(2 * UNITS_PER_TOKEN)
    expect(isFull(half, rule, T0 - 10_000)).toBe(false)
  })
})
