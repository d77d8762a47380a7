import { describe, expect, test } from 'bun:test'
import { chargeForTokens, chargeForUnits, tokenCost } from '../../src/billing/pricing'
import { priceUsage } from '../../src/inference/meter'
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

describe('priceUsage: a usage is rounded up once, not per part', () => {
  // 0.123456789 and 1.000000001 USD per million tokens: every part has a fraction of a nano.
  const price = { inputPerMillion: usd('0.123456789'), outputPerMillion: usd('1.000000001') }

  test('7 input and 3 output tokens cost ceil(3864.197526) nanos', () => {
    // Rounded per part this would be 865 + 3001 = 3866.
    expect(priceUsage(price, { inputTokens: 7, outputTokens: 3, webSearchRequests: 0, webFetchRequests: 0 })).toBe(3865n)
  })

  test('cached and reasoning tokens at their own prices, in the same single rounding', () => {
    const full = { ...price, cachedInputPerMillion: usd('0.000000001'), reasoningPerMillion: usd('2.000000003') }
    // 5 × 123.456789 + 2 × 0.001 + 1 × 1000.000001 + 2 × 2000.000003 = 5617.285952 → 5618.
    expect(priceUsage(full, { inputTokens: 7, cachedInputTokens: 2, outputTokens: 3, reasoningTokens: 2, webSearchRequests: 0, webFetchRequests: 0 })).toBe(5618n)
  })

  test('nothing used costs nothing; negative parts are programming errors', () => {
    expect(priceUsage(price, { inputTokens: 0, outputTokens: 0, webSearchRequests: 0, webFetchRequests: 0 })).toBe(0n)
    expect(() => tokenCost(-1, 1n)).toThrow(RangeError)
  })
})

describe('chargeForUnits', () => {
  test('multiplies exactly', () => {
    expect(chargeForUnits(3, usd('0.002'))).toBe(6_000_000n)
    expect(() => chargeForUnits(1.5, 1n)).toThrow(RangeError)
  })
})
