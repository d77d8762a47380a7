// Why a scope refused a grant, read only then: never on an admitted call's path (split from
// ledger.ts).
import type { InValue } from '@libsql/client'
import type { Nanos } from '../lib/money'
import type { LeasePool } from './lease-pool'
import type { LedgerWriter } from './ledger-writer'

/**
 * What a scope had when it last refused a grant. A grant is refused when too little is *free*,
 * that is neither spent nor leased; this tells a scope whose spending left too little (a cap
 * reached, funds spent: only a reset or a top-up helps) from one whose rest is only held, which
 * comes back when calls in flight settle or another instance's lease is returned.
 */
export interface ScopeRoom {
  /** The cap less its window's spend; for an organization, its month's allowance left plus its prepaid balance. */
  readonly unspent: Nanos
  /** What other boots (other instances) hold leased of it. */
  readonly leasedElsewhere: Nanos
}

/**
 * Reads why `pool`'s scope refused a grant into `pool.room`, on the refusal path only (no admitted
 * call pays for it). A refused key-cap grant is either a window too full or an inactive key:
 * false for the latter. A prepaid refusal reads the organization's funds, with `allowance` (this
 * boot's pool of the admission month), as admission draws on both; an allowance refusal only
 * sends admission on to prepaid, and needs no read.
 */
export async function readRoom(writer: LedgerWriter, pool: LeasePool, capNanos: Nanos | undefined, allowance: LeasePool | undefined): Promise<boolean> {
  const { scope, orgId, keyId, periodStartMs } = pool.ref
  if (scope === 'key_cap') {
    const row = await readRow(
      writer,
      `SELECT k.status, COALESCE(s.spent_nanos, 0) AS spent, COALESCE(s.leased_nanos, 0) AS leased
       FROM api_keys k LEFT JOIN key_spend s ON s.key_id = k.id AND s.window_start_ms = ?2 WHERE k.id = ?1`,
      [keyId, periodStartMs],
    )
    pool.room = { unspent: capNanos! - nanos(row?.spent), leasedElsewhere: elsewhere(nanos(row?.leased), pool.leased) }
    return row?.status === 'active'
  }
  if (scope === 'prepaid') {
    const row = await readRow(
      writer,
      `SELECT (SELECT prepaid_nanos FROM balances WHERE org_id = ?1) AS prepaid,
              (SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?1) AS prepaid_leased,
              (SELECT MAX(0, granted_nanos - used_nanos) FROM allowances WHERE org_id = ?1 AND period_start_ms = ?2) AS allowance,
              (SELECT leased_nanos FROM allowances WHERE org_id = ?1 AND period_start_ms = ?2) AS allowance_leased`,
      [orgId, allowance!.ref.periodStartMs],
    )
    pool.room = {
      unspent: nanos(row?.allowance) + nanos(row?.prepaid),
      leasedElsewhere: elsewhere(nanos(row?.allowance_leased) + nanos(row?.prepaid_leased), allowance!.leased + pool.leased),
    }
  }
  return true
}

// Through the writer, like every ledger read that must see the settlements committed before it.
function readRow(writer: LedgerWriter, sql: string, args: InValue[]) {
  return writer.submit({ kind: 'plain', statements: [{ sql, args }], interpret: results => results[0]!.rows[0] })
}

const nanos = (value: unknown): Nanos => (value === undefined || value === null ? 0n : BigInt(value as bigint))

// The database's leased total less this boot's lease. A settlement in flight has already taken its
// draw out of this boot's pool but not yet out of the lease row, so this can read a little high for
// a moment (never low but by a grant racing the read: held at zero).
function elsewhere(leased: Nanos, ours: Nanos): Nanos {
  return leased > ours ? leased - ours : 0n
}
