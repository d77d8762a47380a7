import type { LeaseScope } from '../db/schema'
import type { LeaseRef } from './ledger-ops'

/**
 * This process's view of one lease: `leased` is what the database has moved to this boot for
 * the scope (less what settlements have drawn), `held` the sum of open reservations against it.
 * JavaScript is single-threaded, so check-and-hold on these numbers cannot race.
 */
export class LeasePool {
  leased = 0n
  held = 0n
  lastUsedMs: number
  /** A top-up op in flight; concurrent reservations wait for it instead of asking again. */
  growing: Promise<void> | null = null
  /** Sum of the estimates of admissions waiting on this pool: sizes the next top-up. */
  wanted = 0n
  /**
   * Until this instant (epoch ms) the scope is known not to have `emptyNeed` free: a request
   * needing at least that much is refused without asking the database again.
   */
  emptyUntilMs = 0
  emptyNeed = 0n

  constructor(
    readonly ref: LeaseRef,
    nowMs: number,
  ) {
    this.lastUsedMs = nowMs
  }

  get free(): bigint {
    return this.leased - this.held
  }
}

/** All lease pools of this boot, by scope identity. */
export class LeasePools {
  private readonly pools = new Map<string, LeasePool>()

  constructor(private readonly bootId: string) {}

  get(scope: LeaseScope, orgId: string, keyId: string | null, periodStartMs: number, nowMs: number): LeasePool {
    const name = `${scope}|${scope === 'key_cap' ? keyId : orgId}|${periodStartMs}`
    let pool = this.pools.get(name)
    if (pool === undefined) {
      pool = new LeasePool({ id: `${this.bootId}|${name}`, scope, orgId, keyId, periodStartMs }, nowMs)
      this.pools.set(name, pool)
    }
    return pool
  }

  /** Pools with no open holds, idle since before `idleBeforeMs` (their lease, if any, can go back). */
  idle(idleBeforeMs: number): LeasePool[] {
    return [...this.pools.values()].filter(pool => pool.held === 0n && pool.growing === null && pool.lastUsedMs < idleBeforeMs)
  }

  all(): LeasePool[] {
    return [...this.pools.values()]
  }

  /**
   * Forgets a pool whose lease went back to the database, unless an admission started using it
   * meanwhile (a second pool object for the same lease row would split its bookkeeping).
   */
  drop(pool: LeasePool): void {
    if (pool.held !== 0n || pool.leased !== 0n || pool.growing !== null || pool.wanted !== 0n) return
    this.pools.delete(pool.ref.id.slice(this.bootId.length + 1))
  }
}
