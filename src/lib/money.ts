/** Integer USD nanos: 1 USD = 1_000_000_000n. Never a float, never a JS number. */
export type Nanos = bigint

export const NANOS_PER_USD = 1_000_000_000n

const USD_DECIMAL = /^(0|[1-9][0-9]*)(?:\.([0-9]{1,9}))?$/
const NANOS_DECIMAL = /^(0|[1-9][0-9]*)$/

/** Largest amount we accept anywhere: fits SQLite's signed 64-bit INTEGER. */
export const MAX_NANOS = (1n << 63n) - 1n

/**
 * Parses a non-negative USD decimal string ("20", "0.40", "0.000000001") into nanos.
 * Returns null for anything else: floats from YAML never reach here as strings.
 */
export function parseUsd(text: string): Nanos | null {
  const match = USD_DECIMAL.exec(text)
  if (!match) return null
  const whole = BigInt(match[1]!)
  const fraction = BigInt((match[2] ?? '').padEnd(9, '0'))
  const nanos = whole * NANOS_PER_USD + fraction
  return nanos <= MAX_NANOS ? nanos : null
}

/** Parses a non-negative decimal integer string of nanos ("1000000000"); null otherwise. */
export function parseNanos(text: string): Nanos | null {
  if (!NANOS_DECIMAL.test(text) || text.length > 19) return null
  const nanos = BigInt(text)
  return nanos <= MAX_NANOS ? nanos : null
}

/** Wire form of an amount: a decimal integer string. */
export function formatNanos(nanos: Nanos): string {
  return nanos.toString()
}

/** Human form for CLI output: "5.000000000" USD stays exact. */
export function formatUsd(nanos: Nanos): string {
  const sign = nanos < 0n ? '-' : ''
  const abs = nanos < 0n ? -nanos : nanos
  return `${sign}${abs / NANOS_PER_USD}.${(abs % NANOS_PER_USD).toString().padStart(9, '0')}`
}
