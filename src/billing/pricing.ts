import type { Price } from '../catalog/types'
import type { CacheTtl } from '../inference/canonical'
import type { Nanos } from '../lib/money'

const PER_MILLION = 1_000_000n

/**
 * The one rounding rule (SECURITY-NOTES.md §3): a charge is its exact amount in nano-millionths
 * (tokens × nanos per million tokens, summed over the charge's parts) rounded up to a whole
 * nano once, in integer arithmetic (no floating point touches an amount).
 */
export function roundUpCharge(millionths: bigint): Nanos {
  return (millionths + PER_MILLION - 1n) / PER_MILLION
}

/** One part of a charge, exact: `tokens` at `pricePerMillion` nanos per million tokens, in nano-millionths. */
export function tokenCost(tokens: number | bigint, pricePerMillion: Nanos): bigint {
  // Most usages have no cached and no reasoning tokens: skip their BigInt arithmetic.
  if (tokens === 0 && pricePerMillion >= 0n) return 0n
  const count = typeof tokens === 'bigint' ? tokens : BigInt(tokens)
  if (count < 0n || pricePerMillion < 0n) throw new RangeError('tokens and price must be non-negative')
  return count * pricePerMillion
}

/** A charge of one part: `tokens` at `pricePerMillion`, rounded up once. */
export function chargeForTokens(tokens: number | bigint, pricePerMillion: Nanos): Nanos {
  return roundUpCharge(tokenCost(tokens, pricePerMillion))
}

/** A charge for `units` of a flat-priced item (a web fetch, a document parse). */
export function chargeForUnits(units: number, pricePerUnit: Nanos): Nanos {
  if (!Number.isSafeInteger(units) || units < 0) throw new RangeError('units must be a non-negative integer')
  return BigInt(units) * pricePerUnit
}

/**
 * A model's price per million prompt-cache writes of `ttl`: the configured one, else what
 * Anthropic bills over its input price (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#pricing):
 * 1.25× for 5 minutes, rounded up to a whole nano per million, and 2× for an hour. So an
 * operator who sets only the input price is never charged more by Anthropic than it charges.
 */
export function cacheWritePrice(price: Price, ttl: CacheTtl): Nanos {
  if (ttl === '1h') return price.cacheWrite1hInputPerMillion ?? price.inputPerMillion * 2n
  return price.cacheWriteInputPerMillion ?? (price.inputPerMillion * 5n + 3n) / 4n
}
