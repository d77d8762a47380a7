import type { LeaseScope, SpendCapPeriod } from '../db/schema'
import type { Clock, Window } from '../lib/clock'
import type { Nanos } from '../lib/money'
import { PairMap } from '../lib/pair-map'
import { leaseReturn, type LeaseRef } from './ledger-ops'
import type { LedgerWriter } from './ledger-writer'
import { min, positive } from './ledger-rules'
import type { ScopeRoom } from './scope-room'

/** Lease rows this process named so far: each row a pool makes has an id of its own (LeasePools). */
let incarnations = 0

/**
 * This process's view of one lease: `leased` is what the database has moved to this boot for
 * the scope (less what settlements have drawn), `held` the sum of open reservations against it.
 * JavaScript is single-threaded, so check-and-hold on these numbers cannot race.
 */
export class LeasePool {
  /**
   * The lease row this pool grants into and draws on. Its id names the boot, the scope, the owner,
   * the period and an incarnation: once a DELETE of the row is sent where it may run late, the
   * pool moves to a new id (LeasePools.renew), so that no late statement about the old row (that
   * DELETE, a settlement's draw) ever reaches the row the pool makes next.
   */
  ref: LeaseRef
  leased = 0n
  held = 0n
  lastUsedMs: number
  /** A top-up op in flight; concurrent reservations wait for it instead of asking again. */
  growing: Promise<void> | null = null
  /** Sum of the estimates of admissions waiting on this pool and of settlements' overshoots not yet held: sizes the next top-up. */
  wanted = 0n
  /**
   * Until this instant (epoch ms) the scope is known not to have `emptyNeed` free: a request
   * needing at least that much is refused without asking the database again.
   */
  emptyUntilMs = 0
  emptyNeed = 0n
  /**
   * Read when the scope last refused a grant: whether spending or mere holds left it short. On a
   * prepaid pool it is the organization's funds (allowance and prepaid), which a refusal names.
   * Refusals from the cache above reuse it: a settlement since can only have spent what it read
   * as held, so at worst a refusal says "held" for that second, and its 2 s retry reads afresh.
   */
  room: ScopeRoom | null = null
  /**
   * This boot's lease row for the scope exists: a grant made or topped it up, and it was not
   * returned since. A lease drawn to 0 keeps its row, which must still go back: one left behind
   * outlives the boot (`svc ledger verify` flags it, and it keeps the instance row).
   */
  leaseRow = false
  /** returnPoolLease is deleting this lease's row (on a local file, where the pool keeps its id, a failed DELETE puts `leased` and `leaseRow` back). */
  returning = false

  constructor(ref: LeaseRef, nowMs: number) {
    this.ref = ref
    this.lastUsedMs = nowMs
  }

  get free(): bigint {
    return this.leased - this.held
  }

  /**
   * Memory holds nothing of this scope's lease row and expects none: no row made or topped up by a
   * grant this process heard back from, nothing leased, no grant in flight, no return in flight.
   * A row of this boot's for it is then one that a grant whose reply was lost left behind
   * (Sweeper.returnUnknownLeases). Read when an op is queued: the writer runs ops in that order,
   * so a grant queued later runs after that op, and one queued earlier is `growing` now.
   */
  get rowUnknown(): boolean {
    return !this.leaseRow && this.leased === 0n && this.growing === null && !this.returning
  }
}

/** A reservation's holds, per funding source. */
export interface Holds {
  allowance: { pool: LeasePool; amount: Nanos } | null
  prepaid: { pool: LeasePool; amount: Nanos } | null
  key: { pool: LeasePool; amount: Nanos; window: Window; period: SpendCapPeriod; cap: Nanos } | null
}

/**
 * Holds `estimate` on the pools if their free parts cover it, allowance first (§7.3); the key's
 * hold is the caller's to add. A negative free part (holds on a lease another instance returned)
 * counts as none: it must not block admission on the other pool (Ledger.admit grows prepaid by
 * what it lacks, its negative part included).
 */
export function holdOn(estimate: Nanos, allowance: LeasePool, prepaid: LeasePool, keyPool: LeasePool | null, nowMs: number): Holds | null {
  if (keyPool && keyPool.free < estimate) return null
  const allowanceFree = positive(allowance.free)
  if (allowanceFree + positive(prepaid.free) < estimate) return null
  const fromAllowance = allowanceFree < estimate ? allowanceFree : estimate
  const fromPrepaid = estimate - fromAllowance
  allowance.held += fromAllowance
  prepaid.held += fromPrepaid
  if (keyPool) keyPool.held += estimate
  for (const pool of [allowance, prepaid, keyPool]) if (pool) pool.lastUsedMs = nowMs
  return {
    // The admission month's allowance pool is kept even with nothing held on it: allowance that
    // a concurrent call gives back before this one settles pays first (§7.3), not prepaid.
    allowance: { pool: allowance, amount: fromAllowance },
    prepaid: fromPrepaid > 0n ? { pool: prepaid, amount: fromPrepaid } : null,
    key: null,
  }
}

/** Ends a reservation's holds on its pools (it settled or was released). */
export function releaseHolds({ allowance, prepaid, key }: Holds): void {
  if (allowance) allowance.pool.held -= allowance.amount
  if (prepaid) prepaid.pool.held -= prepaid.amount
  if (key) key.pool.held -= key.amount
}

/**
 * All lease pools of this boot, by scope identity: scope, owner (the org, or the key for a key
 * cap) and period. Admission looks pools up two or three times per request, so the lookup is two
 * map reads on strings the caller already holds, not a key string built per call.
 */
export class LeasePools {
  private readonly byScope: Record<LeaseScope, PairMap<LeasePool>> = { prepaid: new PairMap(), allowance: new PairMap(), key_cap: new PairMap() }

  constructor(private readonly bootId: string) {}

  get(scope: LeaseScope, orgId: string, keyId: string | null, periodStartMs: number, nowMs: number): LeasePool {
    const owner = ownerOf(scope, orgId, keyId)
    const pools = this.byScope[scope]
    let pool = pools.get(owner, periodStartMs)
    if (pool === undefined) {
      pool = new LeasePool(this.refOf(scope, orgId, keyId, periodStartMs), nowMs)
      pools.set(owner, periodStartMs, pool)
    }
    return pool
  }

  /**
   * Moves `pool` to a lease row of a new id, for its next grant: its row is being deleted by a
   * DELETE that a libSQL server may run late, after the pool leased again. Under the old id a
   * settlement's draw run late took from the row made since, which memory believed whole (QA:
   * 0.10 USD in memory, 0.09 in the row), and a late DELETE could take it. Only while no grant is
   * in flight: it was built on the old id, and its outcome is applied to the pool.
   */
  renew(pool: LeasePool): void {
    const { scope, orgId, keyId, periodStartMs } = pool.ref
    pool.ref = this.refOf(scope, orgId, keyId, periodStartMs)
  }

  /** A lease row's id: boot, scope, owner, period and incarnation (unique within the boot). */
  private refOf(scope: LeaseScope, orgId: string, keyId: string | null, periodStartMs: number): LeaseRef {
    incarnations += 1
    return { id: `${this.bootId}|${scope}|${ownerOf(scope, orgId, keyId)}|${periodStartMs}|${incarnations}`, scope, orgId, keyId, periodStartMs }
  }

  /** Pools with no open holds, idle since before `idleBeforeMs` (their lease, if any, can go back). */
  idle(idleBeforeMs: number): LeasePool[] {
    return this.all().filter(pool => pool.held === 0n && pool.growing === null && pool.lastUsedMs < idleBeforeMs)
  }

  all(): LeasePool[] {
    return [...this.byScope.prepaid.values(), ...this.byScope.allowance.values(), ...this.byScope.key_cap.values()]
  }

  /**
   * Forgets a pool whose lease went back to the database, unless an admission started using it
   * meanwhile (a second pool object for the same lease row would split its bookkeeping).
   */
  drop(pool: LeasePool): void {
    if (pool.held !== 0n || pool.leased !== 0n || pool.growing !== null || pool.wanted !== 0n) return
    const { scope, orgId, keyId, periodStartMs } = pool.ref
    const pools = this.byScope[scope]
    const owner = ownerOf(scope, orgId, keyId)
    if (pools.get(owner, periodStartMs) === pool) pools.delete(owner, periodStartMs)
  }
}

/**
 * Returns a pool's whole lease to the database (idle, shutdown: Ledger.returnLease), its row too
 * even when drawn to 0; a pool without a lease row is only forgotten.
 *
 * On a libSQL server (`ambiguousCommits`) the DELETE, and a settlement's draw that failed before
 * it, may run late: the pool moves to a new row id first (LeasePools.renew), and a grant meanwhile
 * or later makes a row of its own. The DELETE may also fail having committed, its reply lost:
 * memory keeps neither lease nor row then, and the old row, which no pool names any more, is one
 * the sweeper's next tick returns if it is still there (Sweeper.returnUnknownLeases). Putting the
 * lease back held, for up to a heartbeat, money whose row was gone and which another instance
 * could lease and spend too. A DELETE that fails on a local file did not commit, and nothing runs
 * late there: the pool keeps its id and the lease is memory's again.
 */
export async function returnPoolLease(writer: LedgerWriter, pools: LeasePools, pool: LeasePool): Promise<void> {
  if (pool.held !== 0n || pool.growing) return
  if (!pool.leaseRow) return pools.drop(pool)
  const amount = pool.leased
  const ref = pool.ref
  pool.leased = 0n
  pool.leaseRow = false // before the await: a grant meanwhile makes it again
  pool.returning = true // meanwhile the row is not one memory knows nothing of (LeasePool.rowUnknown)
  if (writer.ambiguousCommits) pools.renew(pool)
  try {
    await writer.submit({ kind: 'plain', statements: leaseReturn(ref), interpret: () => undefined })
    pools.drop(pool)
  } catch (error) {
    if (!writer.ambiguousCommits) {
      pool.leased += amount
      pool.leaseRow = true
    }
    throw error
  } finally {
    pool.returning = false
  }
}

/** Whose money a scope's lease holds: the key's for a key cap, else the organization's. */
function ownerOf(scope: LeaseScope, orgId: string, keyId: string | null): string {
  return scope === 'key_cap' ? keyId! : orgId
}

/**
 * Counts an admission's estimate once in the demand of a pool it waits to grow (`wanted`, which
 * sizes the growth), until the admission ends (admit's finally), not only while it waits in
 * grow(): the waiters a growth wakes all leave grow() before any looks again, and a demand counted
 * only there sized every next growth for one call (QA: 174 of 300 concurrent calls refused).
 */
export function demand(waiting: LeasePool[] | undefined, pool: LeasePool, estimate: Nanos): LeasePool[] {
  const pools = waiting ?? []
  if (!pools.includes(pool)) {
    pools.push(pool)
    pool.wanted += estimate
  }
  return pools
}

/**
 * A charge above its allowance hold (an overshoot) held on the lease, grown (`grow`, for a need of
 * the given size) for it and the other overshoots waiting (`wanted`), so the allowance left pays
 * before prepaid (§7.3; QA: 0.116 of a 0.42 USD call to prepaid, 19.6 USD of allowance unleased).
 * Each take is synchronous: a waiter a growth wakes never counts what another took (QA: 8 of 10
 * concurrent overshoots went to prepaid). What the allowance cannot cover is left to prepaid.
 */
export async function holdOvershoot(hold: NonNullable<Holds['allowance']>, actual: Nanos, clock: Clock, grow: (excess: Nanos) => Promise<string>): Promise<void> {
  const { pool } = hold
  pool.wanted += actual - hold.amount
  try {
    // Each round takes or grows; a bound as admissions have, should growths keep being outrun.
    for (let round = 0; round < 64; round += 1) {
      const take = min(actual - hold.amount, positive(pool.free))
      pool.held += take
      hold.amount += take
      pool.wanted -= take
      if (hold.amount >= actual || pool.emptyUntilMs > clock.now()) return
      if ((await grow(actual - hold.amount)) === 'empty') return
    }
  } finally {
    pool.wanted -= actual - hold.amount
  }
}
