/**
 * Per-organization cap on inference requests in flight (ARCHITECTURE.md §6, §8 step 4).
 * Inference only: management routes never take a slot (spec §8). Per instance (§11).
 */
export class ConcurrencyGate {
  // Only organizations with a request in flight have an entry, so the map never outgrows them.
  private readonly inFlight = new Map<string, number>()

  constructor(
    /** Slots per organization. */
    readonly limit: number,
  ) {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError('concurrency limit must be a positive integer')
  }

  /**
   * Takes a slot for `orgId`, or returns null when all `limit` are in use. The returned release
   * function is idempotent: call it in every `finally`; a second call releases nothing.
   */
  tryAcquire(orgId: string): (() => void) | null {
    const used = this.inFlight.get(orgId) ?? 0
    if (used >= this.limit) return null
    this.inFlight.set(orgId, used + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const now = (this.inFlight.get(orgId) ?? 1) - 1
      if (now <= 0) this.inFlight.delete(orgId)
      else this.inFlight.set(orgId, now)
    }
  }

  /** Slots of `orgId` in use now. */
  inUse(orgId: string): number {
    return this.inFlight.get(orgId) ?? 0
  }

  /** Slots in use over all organizations (metrics). */
  get totalInUse(): number {
    let total = 0
    for (const used of this.inFlight.values()) total += used
    return total
  }

  /** Organizations with at least one slot in use (tests, metrics). */
  get size(): number {
    return this.inFlight.size
  }
}
