import { describe, expect, test } from 'bun:test'
import { cacheWritePrice, chargeForTokens, chargeForUnits, tokenCost } from '../../src/billing/pricing'
import { estimateCharge, highInputTokens, priceUsage } from '../../src/inference/meter'
import { parseUsd } from '../../src/lib/money'
import { chat } from '../support/anthropic-to-upstream'

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

describe('prompt-cache writes', () => {
  const price = { inputPerMillion: usd('0.123456789'), outputPerMillion: usd('1.000000001'), cachedInputPerMillion: usd('0.000000001') }

  test("unset, a write costs Anthropic's multiple of the input price: 1.25× rounded up to a whole nano per million, 2× for an hour", () => {
    // 123456789 × 1.25 = 154320986.25 → 154320987.
    expect([cacheWritePrice(price, '5m'), cacheWritePrice(price, '1h')]).toEqual([154_320_987n, 246_913_578n])
    expect([cacheWritePrice({ inputPerMillion: usd('3'), outputPerMillion: 0n }, '5m'), cacheWritePrice({ inputPerMillion: usd('3'), outputPerMillion: 0n }, '1h')]).toEqual([usd('3.75'), usd('6')])
    expect([cacheWritePrice({ inputPerMillion: 1n, outputPerMillion: 0n }, '5m'), cacheWritePrice({ inputPerMillion: 0n, outputPerMillion: 0n }, '5m')]).toEqual([2n, 0n])
    // Configured, each is as written (below the input price too).
    const set = { ...price, cacheWriteInputPerMillion: 7n, cacheWrite1hInputPerMillion: 9n }
    expect([cacheWritePrice(set, '5m'), cacheWritePrice(set, '1h')]).toEqual([7n, 9n])
  })

  test('writes at their price per lifetime, with the rest of the usage, in one rounding', () => {
    // 8 × 123.456789 + 2 × 0.001 + 6 × 154.320987 + 4 × 246.913578 + 3 × 1000.000001 = 5901.236549 → 5902.
    const usage = { inputTokens: 20, cachedInputTokens: 2, cacheWriteInputTokens: 10, cacheWrite1hInputTokens: 4, outputTokens: 3, webSearchRequests: 0, webFetchRequests: 0 }
    expect(priceUsage(price, usage)).toBe(5902n)
    // Without the split, every write is a 5-minute one: 8 × 123.456789 + 0.002 + 10 × 154.320987 + 3000.000003 = 5530.863877 → 5531.
    expect(priceUsage(price, { ...usage, cacheWrite1hInputTokens: undefined })).toBe(5531n)
    // Counts past their totals are held to them (a broken report): never a negative part.
    expect(priceUsage(price, { ...usage, cacheWriteInputTokens: 30, cacheWrite1hInputTokens: 40 })).toBe(priceUsage(price, { ...usage, cacheWriteInputTokens: 18, cacheWrite1hInputTokens: 18 }))
  })

  test("a request with cache hints reserves its input at the dearest write price its hints may incur", () => {
    const plain = chat()
    const route = plain.route
    const input = BigInt(highInputTokens(plain))
    const output = 8192n * route.price.outputPerMillion
    const reserve = (rate: bigint) => (input * rate + output + 999_999n) / 1_000_000n
    expect(estimateCharge(plain, route)).toBe(reserve(route.price.inputPerMillion))
    const fiveMinutes = chat({ messages: [{ role: 'user', parts: [{ type: 'text', text: 'Hi', cache: {} }] }] })
    expect(estimateCharge(fiveMinutes, route)).toBe(reserve(cacheWritePrice(route.price, '5m')))
    // One 1-hour hint anywhere (here a tool's) makes the whole input reservable at the 1-hour price.
    const hour = chat({ ...fiveMinutes, tools: [{ name: 'f', parameters: {}, cache: { ttl: '1h' } }] })
    const hourInput = BigInt(highInputTokens(hour))
    expect(estimateCharge(hour, route)).toBe((hourInput * cacheWritePrice(route.price, '1h') + output + 999_999n) / 1_000_000n)
    expect(estimateCharge(chat({ cache: { ttl: '1h' } }), route)).toBe(reserve(route.price.inputPerMillion * 2n))
  })

  test('a 5-minute write price configured above the 1-hour one is reserved for whenever a 5-minute write is possible', () => {
    // QA: 5-minute writes at 3 USD/M, the 1-hour ones at their 2 USD/M default. A 1-hour hint on a
    // one-word system and a 5-minute one on a long user text were reserved at the 1-hour rate
    // (1,019,000 nanos) and billed ~1,527,000 (the 5-minute part at 3 USD/M).
    const base = chat()
    const route = { ...base.route, maxOutputTokens: 1, price: { inputPerMillion: usd('1'), outputPerMillion: usd('1'), cacheWriteInputPerMillion: usd('3') } }
    const long = { role: 'user' as const, parts: [{ type: 'text' as const, text: 'word '.repeat(300), cache: { ttl: '5m' as const } }] }
    const request = chat({ route, sampling: { maxOutputTokens: 1 }, messages: [{ role: 'system', parts: [{ type: 'text', text: 'x', cache: { ttl: '1h' } }] }, long] })
    const high = highInputTokens(request)
    const settled = priceUsage(route.price, { inputTokens: high, cacheWriteInputTokens: high, cacheWrite1hInputTokens: 1, outputTokens: 1, webSearchRequests: 0, webFetchRequests: 0 })
    expect(settled).toBeLessThanOrEqual(estimateCharge(request, route))
    expect(estimateCharge(request, route)).toBe(BigInt(high) * 3000n + 1000n)
    // Only 1-hour hints still reserve for a 5-minute write (an upstream without the 1-hour lifetime writes for 5 minutes).
    const hourOnly = chat({ route, sampling: { maxOutputTokens: 1 }, cache: { ttl: '1h' } })
    expect(estimateCharge(hourOnly, route)).toBe(BigInt(highInputTokens(hourOnly)) * 3000n + 1000n)
  })
})

describe('a cache read priced above plain input', () => {
  test('reserves the input at the read price, so a prompt read whole from the cache stays within it', () => {
    const base = chat()
    const route = { ...base.route, maxOutputTokens: 1, price: { inputPerMillion: usd('1'), outputPerMillion: usd('1'), cachedInputPerMillion: usd('2') } }
    const request = chat({ route, sampling: { maxOutputTokens: 1 } })
    const high = highInputTokens(request)
    const settled = priceUsage(route.price, { inputTokens: high, cachedInputTokens: high, outputTokens: 1, webSearchRequests: 0, webFetchRequests: 0 })
    expect(settled).toBe(BigInt(high) * 2000n + 1000n)
    expect(estimateCharge(request, route)).toBe(settled)
  })
})

describe('chargeForUnits', () => {
  test('multiplies exactly', () => {
    expect(chargeForUnits(3, usd('0.002'))).toBe(6_000_000n)
    expect(() => chargeForUnits(1.5, 1n)).toThrow(RangeError)
  })
})
