// The op that grows a lease, and what it does where a failed write may have committed (split
// from ledger.ts).
import { MAX_NANOS, type Nanos } from '../lib/money'
import type { LeasePool } from './lease-pool'
import { leaseGrant, leaseReturn, type LeaseGrantInput } from './ledger-ops'
import type { PlainOp } from './ledger-writer'
import { min } from './ledger-rules'

/** What a committed grant op did. */
export interface GrantOutcome {
  /** What it moved into the lease; null when too little was free and nothing was granted. */
  readonly granted: Nanos | null
  /** It created the lease row (there was none). */
  readonly created: boolean
  /** It deleted the lease row first (LeasePool.grantUnknown): the row now holds exactly `granted`, or is gone. */
  readonly reset: boolean
}

/**
 * The grant op of `pool` (leaseGrant), built afresh for every attempt. Where a failed write may
 * have committed (`ambiguous`), a rerun (the writer's, op by op, of a failed batch) may follow an
 * attempt that did commit, so it marks the pool `grantUnknown`. An attempt built while the pool is
 * so marked and nothing holds on it or settles against it (`quiet`) is a reset: it deletes the row
 * first, whatever it holds, then grants what is needed plus what the pool had leased, which leaves
 * memory as the op is built (whether the batch commits or not, the row then holds no less). A
 * rerun of a reset deletes what the attempt before it granted, so the row ends holding exactly
 * what the process knows. An attempt built while calls hold on the pool grants as before, and the
 * pool stays marked until a reset, the sweep or the shutdown returns its row.
 */
export function grantOp(pool: LeasePool, input: Omit<LeaseGrantInput, 'lease'>, ambiguous: boolean, quiet: () => boolean): PlainOp<GrantOutcome> {
  let attempts = 0
  let reset = false
  // What the pool had leased when an attempt took it out of memory, asked for again by every reset.
  let carried = 0n
  return {
    kind: 'plain',
    statements: () => {
      if (ambiguous && ++attempts > 1) pool.grantUnknown = true
      reset = pool.grantUnknown && pool.held === 0n && quiet()
      if (reset) [carried, pool.leased] = [carried + pool.leased, 0n]
      const more = reset ? carried : 0n
      const grant = leaseGrant({ ...input, lease: pool.ref, needNanos: min(input.needNanos + more, MAX_NANOS), targetNanos: min(input.targetNanos + more, MAX_NANOS) })
      return reset ? [...leaseReturn(pool.ref), ...grant] : grant
    },
    // The lease UPDATE … RETURNING is second to last; no row means nothing was granted. The
    // INSERT before it creates the row only when there was none.
    interpret: results => {
      const row = results[results.length - 2]?.rows[0]
      return { granted: row ? BigInt(row.last_grant_nanos as bigint) : null, created: (results[results.length - 3]?.changes ?? 0) > 0, reset }
    },
  }
}
