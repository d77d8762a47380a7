import { describe, expect, test } from 'bun:test'
import { chargeForTokens, chargeForUnits } from '../../src/billing/pricing'
import { parseUsd } from '../../src/lib/money'

const usd = (text: string) => parseUsd(text)!

describe('chargeForTokens: ceil(tokens × price ÷ 10^6), in integers', () => {
  test('boundaries', () => {
    // 0.40 USD per million tokens = 400 nanos per token.
    expect(chargeForTokens(1, usd('0.40'))).toBe(400n)
    expect(chargeForTokens(999_999, usd('0.40'))).toBe(399_999_600n)
    expect(chargeForTokens(1_000_000, usd('0.40'))).toBe(400_000_000n)
    expect(chargeForTokens(0, usd('0.40'))).toBe(0n)
  })

  test('prices below one nano per token round up once per charge, not per token', () => {
    // 0.0001 USD per million = 0.1 nano per token.
    expect(chargeForTokens(1, usd('0.0001'))).toBe(1n)
    expect(chargeForTokens(9, usd('0.0001'))).toBe(1n)
    expect(chargeForTokens(10, usd('0.0001'))).toBe(1n)
    expect(chargeForTokens(11, usd('0.0001'))).toBe(2n)
    expect(chargeForTokens(999_999, usd('0.000000001'))).toBe(1n)
  })

  test('exact where a float would not be', () => {
    // 0.1 + 0.2 style prices: 3 tokens at 0.3 USD/M is exactly 900 nanos.
    expect(chargeForTokens(3, usd('0.3'))).toBe(900n)
    // Large counts stay exact beyond 2^53.
    expect(chargeForTokens(10n ** 12n, usd('15'))).toBe(15n * 10n ** 15n)
    expect(chargeForTokens(9_007_199_254_740_993n, 1n)).toBe(9_007_199_255n)
  })

  test('negative inputs are programming errors', () => {
    expect(() => chargeForTokens(-1, 1n)).toThrow(RangeError)
    expect(() => chargeForTokens(1, -1n)).toThrow(RangeError)
  })
})

describe('chargeForUnits', () => {
  test('multiplies exactly', () => {
    expect(chargeForUnits(3, usd('0.002'))).toBe(6_000_000n)
    expect(() => chargeForUnits(1.5, 1n)).toThrow(RangeError)
  })
})
