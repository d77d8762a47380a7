/** Source of the current time in epoch milliseconds; tests pass a fake one. */
export interface Clock {
  now(): number
}

/** The wall clock. */
export const systemClock: Clock = { now: () => Date.now() }

/** RFC 3339 UTC rendering used on the wire (`2026-11-22T01:22:29.000Z`). */
export function toRfc3339(epochMs: number): string {
  return new Date(epochMs).toISOString()
}

/** A UTC calendar window: [startMs, endMs). */
export interface Window {
  readonly startMs: number
  readonly endMs: number
}

/** The UTC day containing `epochMs`. */
export function utcDay(epochMs: number): Window {
  const date = new Date(epochMs)
  const startMs = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate())
  return { startMs, endMs: Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate() + 1) }
}

/** The UTC calendar month containing `epochMs` (allowance periods, monthly caps). */
export function utcMonth(epochMs: number): Window {
  const date = new Date(epochMs)
  const startMs = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1)
  return { startMs, endMs: Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1) }
}
