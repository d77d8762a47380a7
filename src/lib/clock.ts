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
