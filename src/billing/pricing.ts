import type { Nanos } from '../lib/money'

const PER_MILLION = 1_000_000n

/**
 * The one rounding rule (SECURITY-NOTES.md §3): a charge for `tokens` at `pricePerMillion`
 * nanos per million tokens is rounded up to a whole nano, once per charge, in integer
 * arithmetic (no floating point touches an amount).
 */
export function chargeForTokens(tokens: number | bigint, pricePerMillion: Nanos): Nanos {
  // Most usages have no cached and no reasoning tokens: two of a request's four charges.
  if (tokens === 0 && pricePerMillion >= 0n) return 0n
  const count = typeof tokens === 'bigint' ? tokens : BigInt(tokens)
  if (count < 0n || pricePerMillion < 0n) throw new RangeError('tokens and price must be non-negative')
  const product = count * pricePerMillion
  return (product + PER_MILLION - 1n) / PER_MILLION
}

/**
 * The same rule for a charge made of several token counts at their own prices (a usage's input,
 * cached input, output and reasoning): their exact sum, rounded up once, so a charge is never
 * more than one nano above its exact cost.
 */
export function chargeForTokenMix(parts: ReadonlyArray<readonly [tokens: number, pricePerMillion: Nanos]>): Nanos {
  let product = 0n
  for (const [tokens, pricePerMillion] of parts) {
    if (tokens < 0 || pricePerMillion < 0n) throw new RangeError('tokens and price must be non-negative')
    // Most usages have no cached and no reasoning tokens: skip their BigInt arithmetic.
    if (tokens !== 0) product += BigInt(tokens) * pricePerMillion
  }
  return (product + PER_MILLION - 1n) / PER_MILLION
}

/** A charge for `units` of a flat-priced item (a web fetch, a document parse). */
export function chargeForUnits(units: number, pricePerUnit: Nanos): Nanos {
  if (!Number.isSafeInteger(units) || units < 0) throw new RangeError('units must be a non-negative integer')
  return BigInt(units) * pricePerUnit
}
