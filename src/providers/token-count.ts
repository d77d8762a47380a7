/**
 * A token count as an upstream reported it: a finite number ≥ 0, floored to an integer (a
 * backend that reports 1.5 tokens is rounded, not trusted to be priced: a charge is BigInt
 * arithmetic on whole tokens), else undefined. Every provider reads usage through this.
 */
export function tokenCount(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.floor(value) : undefined
}
