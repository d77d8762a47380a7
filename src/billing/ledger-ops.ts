import type { InValue } from '@libsql/client'
import type { FundingSource, LeaseScope } from '../db/schema'
import { MAX_NANOS } from '../lib/money'
import type { Statement, StatementResult } from './executor'

// SQL for every ledger operation. Guards live in SQL so that one write transaction decides
// them against the current database, whatever other processes did (ARCHITECTURE.md §7.2).
// Leased totals on balances, allowances and key_spend are always recomputed from the leases
// rows, so they cannot drift from Σ open leases.

const statement = (sql: string, ...args: InValue[]): Statement => ({ sql, args })

/** Identifies one lease row: a process boot's slice of one funding scope. */
export interface LeaseRef {
  readonly id: string
  readonly scope: LeaseScope
  readonly orgId: string
  readonly keyId: string | null
  readonly periodStartMs: number
}

/**
 * A lease row's `updated_at_ms` after a grant or a draw (`?n` binds the write's time): the time,
 * but above the row's previous stamp, so a row's stamp never goes backwards, whatever order a
 * libSQL server runs its writes in (a settlement's first try run late carried an older time) or
 * the wall clock steps. The column is the row's last activity, for an operator; no guard reads it
 * (each row a pool makes has an id of its own: LeasePools.renew). A stamp a few ms ahead of the
 * clock, after several writes in one millisecond, is harmless. The writer's DRAW_LEASES follows.
 */
const nextStamp = (n: number) => `MAX(updated_at_ms + 1, ?${n})`

/** Recomputes the parent row's leased total from its leases. */
export function recomputeLeased(lease: LeaseRef): Statement {
  if (lease.scope === 'prepaid') {
    return statement(
      `UPDATE balances SET prepaid_leased_nanos =
         (SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE org_id = ?1 AND scope = 'prepaid') WHERE org_id = ?1`,
      lease.orgId,
    )
  }
  if (lease.scope === 'allowance') {
    return statement(
      `UPDATE allowances SET leased_nanos =
         (SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE org_id = ?1 AND scope = 'allowance' AND period_start_ms = ?2)
       WHERE org_id = ?1 AND period_start_ms = ?2`,
      lease.orgId,
      lease.periodStartMs,
    )
  }
  return statement(
    `UPDATE key_spend SET leased_nanos =
       (SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE key_id = ?1 AND scope = 'key_cap' AND period_start_ms = ?2)
     WHERE key_id = ?1 AND window_start_ms = ?2`,
    lease.keyId,
    lease.periodStartMs,
  )
}

/** SQL expression for the free amount of a scope, evaluated against its parent row. */
function freeExpression(scope: LeaseScope): { table: string; free: string; where: string } {
  if (scope === 'prepaid') return { table: 'balances', free: 'prepaid_nanos - prepaid_leased_nanos', where: 'org_id = ?4' }
  if (scope === 'allowance') {
    return { table: 'allowances', free: 'granted_nanos - used_nanos - leased_nanos', where: 'org_id = ?4 AND period_start_ms = ?5' }
  }
  return { table: 'key_spend', free: '?6 - spent_nanos - leased_nanos', where: 'key_id = ?7 AND window_start_ms = ?5' }
}

export interface LeaseGrantInput {
  lease: LeaseRef
  instanceId: string
  bootId: string
  /** The grant is refused unless at least this much is free. */
  needNanos: bigint
  /** Grant up to this much (never more than is free). */
  targetNanos: bigint
  nowMs: number
  /** allowance scope: SQL CASE mapping the org's plan to its monthly allowance. */
  planGrantSql?: { sql: string; args: InValue[] }
  /** key_cap scope: the key's cap. */
  capNanos?: bigint
  /**
   * Memory knows the lease row (LeasePool.leaseRow): the grant only tops it up, and never makes it
   * again. A row gone meanwhile was swept, and settlements may still draw on its id (one unconfirmed,
   * one run late): made again under it, their draws would take from money memory believes whole.
   * The statement that would make the row reads whether it is there instead (`present`).
   */
  rowKnown?: boolean
}

/**
 * Moves up to `target` (at least `need`) from the free part of a scope into this boot's lease.
 * Statement results: [..., the lease UPDATE … RETURNING amount_nanos, last_grant_nanos (no row =
 * refused), recompute, key status row (key_cap only)].
 */
export function leaseGrant(input: LeaseGrantInput): Statement[] {
  const { lease } = input
  // The instance's row first, if another instance's sweep forgot it (this one looked stale and
  // had no lease then): a lease without its instance row would never be swept (forgetStaleInstances).
  const statements: Statement[] = [
    statement('INSERT INTO instances (instance_id, boot_id, started_at_ms, heartbeat_at_ms) VALUES (?1, ?2, ?3, ?3) ON CONFLICT(instance_id) DO NOTHING', input.instanceId, input.bootId, input.nowMs),
  ]
  if (lease.scope === 'prepaid') {
    statements.push(statement('INSERT INTO balances (org_id, prepaid_nanos, prepaid_leased_nanos) VALUES (?, 0, 0) ON CONFLICT(org_id) DO NOTHING', lease.orgId))
  } else if (lease.scope === 'allowance') {
    // The period rolls over lazily: its row appears with the plan's allowance on first use.
    const plan = input.planGrantSql!
    statements.push({
      sql: `INSERT INTO allowances (org_id, period_start_ms, granted_nanos, used_nanos, leased_nanos)
            VALUES (?, ?, ${plan.sql}, 0, 0) ON CONFLICT(org_id, period_start_ms) DO NOTHING`,
      args: [lease.orgId, lease.periodStartMs, ...plan.args],
    })
  } else {
    statements.push(statement('INSERT INTO key_spend (key_id, window_start_ms, spent_nanos, leased_nanos) VALUES (?, ?, 0, 0) ON CONFLICT DO NOTHING', lease.keyId, lease.periodStartMs))
  }
  const { table, free, where } = freeExpression(lease.scope)
  // ?1 target, ?2 need, ?3 lease id, ?4 org, ?5 period, ?6 cap, ?7 key, ?8 time. The grant
  // subquery runs twice in one statement on one snapshot, so both uses see the same value.
  const grant = `(SELECT MIN(?1, ${free}) FROM ${table} WHERE ${where} AND ${free} >= ?2)`
  const keyActive = lease.scope === 'key_cap' ? ` AND EXISTS (SELECT 1 FROM api_keys WHERE id = ?7 AND status = 'active')` : ''
  const args = [input.targetNanos, input.needNanos, lease.id, lease.orgId, lease.periodStartMs, input.capNanos ?? 0n, lease.keyId, input.nowMs]
  // The lease row appears only when something will be granted: a refusal writes no lease. The
  // UPDATE after it fills it and stamps it (from 0, so with the write's time).
  statements.push(
    input.rowKnown
      ? statement('SELECT COUNT(*) AS present FROM leases WHERE id = ?', lease.id)
      : {
          sql: `INSERT INTO leases (id, instance_id, boot_id, scope, org_id, key_id, period_start_ms, amount_nanos, last_grant_nanos, updated_at_ms)
                SELECT ?3, ?9, ?10, ?11, ?4, ?7, ?5, 0, 0, 0 WHERE ${grant} IS NOT NULL${keyActive} ON CONFLICT(id) DO NOTHING`,
          args: [...args, input.instanceId, input.bootId, lease.scope],
        },
  )
  statements.push(
    statement(
      `UPDATE leases SET amount_nanos = amount_nanos + ${grant}, last_grant_nanos = ${grant}, updated_at_ms = ${nextStamp(8)}
       WHERE id = ?3 AND ${grant} IS NOT NULL${keyActive}
       RETURNING amount_nanos, last_grant_nanos`,
      ...args,
    ),
  )
  statements.push(recomputeLeased(lease))
  return statements
}

/**
 * What a leaseGrant batch did: the lease UPDATE … RETURNING is second to last (no row: nothing
 * granted); the statement before it made the row (`created`) or, for a row memory knows, found it
 * `gone` (swept by another instance: nothing was granted or made).
 */
export function leaseGranted(results: StatementResult[], rowKnown: boolean): { granted: bigint | null; created: boolean; gone: boolean } {
  const row = results[results.length - 2]?.rows[0]
  const made = results[results.length - 3]
  return {
    granted: row ? BigInt(row.last_grant_nanos as bigint) : null,
    created: !rowKnown && (made?.changes ?? 0) > 0,
    gone: rowKnown && Number(made?.rows[0]?.present ?? 1) === 0,
  }
}

/**
 * Returns a whole lease to its scope. Safe to race: a gone row adds nothing. A server may run the
 * DELETE late, after writes the client sent after it:
 * - this boot's own returns (a pool's, the sweeper's of a row memory has no record of) take the
 *   row whole all the same: the pool that leased into it has moved to a new id before the DELETE
 *   was sent (LeasePools.renew), so no grant made since is in that row, and a settlement's draw
 *   run late on it is one memory kept out;
 * - another boot's (the sweep, with `ownerStaleBefore`) only while that boot has not beaten since:
 *   its row is there when the DELETE runs, so a boot that beat again in between (a paused
 *   instance, resumed) and renewed its trust in its lease keeps it. Unguarded, a sweep run late
 *   took a lease a live instance spent from, and another instance leased and spent the same money
 *   (QA: 0.09 USD spent twice). The instance row names the boot now heartbeating (`svc ledger
 *   verify` reads leases the same way), so an earlier boot's lease goes whatever the instance does.
 */
export function leaseReturn(lease: LeaseRef, ownerStaleBefore?: number): Statement[] {
  const remove =
    ownerStaleBefore === undefined
      ? statement('DELETE FROM leases WHERE id = ?', lease.id)
      : statement(
          `DELETE FROM leases WHERE id = ? AND NOT EXISTS (SELECT 1 FROM instances i
             WHERE i.instance_id = leases.instance_id AND i.boot_id = leases.boot_id AND i.heartbeat_at_ms >= ?)`,
          lease.id, ownerStaleBefore,
        )
  return [remove, recomputeLeased(lease)]
}

/** One ledger entry row. */
export interface EntryRow {
  opId: string
  idempotencyKey: string | null
  orgId: string
  keyId: string | null
  kind: 'top_up' | 'settle' | 'adjust'
  source: FundingSource
  amountNanos: bigint
  periodStartMs: number | null
  capWindowStartMs: number | null
  purpose: string | null
  requestId: string | null
  note: string | null
  createdAtMs: number
}

const ENTRY_COLUMNS =
  'op_id, idempotency_key, org_id, key_id, kind, source, amount_nanos, period_start_ms, cap_window_start_ms, purpose, request_id, note, created_at_ms'
const ENTRY_PLACEHOLDERS = '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'

function entryArgs(row: EntryRow): InValue[] {
  return [
    row.opId, row.idempotencyKey, row.orgId, row.keyId, row.kind, row.source, row.amountNanos,
    row.periodStartMs, row.capWindowStartMs, row.purpose, row.requestId, row.note, row.createdAtMs,
  ]
}

/** A multi-row INSERT of any entries (one prepared statement per row count, reused). */
export function insertEntries(rows: readonly EntryRow[]): Statement {
  return {
    sql: `INSERT INTO ledger_entries (${ENTRY_COLUMNS}) VALUES ${Array(rows.length).fill(ENTRY_PLACEHOLDERS).join(', ')}`,
    args: rows.flatMap(entryArgs),
  }
}

// The writer's aggregated settlements: kind 'settle', no idempotency key (a settlement with a
// billing key goes through settle-guarded.ts) and no note, written into the SQL instead of bound:
// 10 bound values per row instead of 13 (libsql binds at ~0.18 µs a value; a batch has up to 128
// rows).
const SETTLE_COLUMNS = 'op_id, org_id, key_id, source, amount_nanos, period_start_ms, cap_window_start_ms, purpose, request_id, created_at_ms, kind, idempotency_key, note'
const SETTLE_PLACEHOLDERS = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'settle', NULL, NULL)"
const settleTexts = new Map<number, string>()

/** The multi-row INSERT of a batch's settle entries (kind 'settle', no idempotency key, no note). */
export function insertSettleEntries(rows: readonly EntryRow[]): Statement {
  let sql = settleTexts.get(rows.length)
  if (sql === undefined) {
    sql = `INSERT INTO ledger_entries (${SETTLE_COLUMNS}) VALUES ${Array(rows.length).fill(SETTLE_PLACEHOLDERS).join(', ')}`
    settleTexts.set(rows.length, sql)
  }
  const args: InValue[] = []
  for (const row of rows) {
    if (row.kind !== 'settle' || row.idempotencyKey !== null || row.note !== null) throw new Error('insertSettleEntries: only plain settle entries')
    args.push(row.opId, row.orgId, row.keyId, row.source, row.amountNanos, row.periodStartMs, row.capWindowStartMs, row.purpose, row.requestId, row.createdAtMs)
  }
  return { sql, args }
}

// The unique index on idempotency_key is partial (only entries that have one), and SQLite takes
// a partial index as a conflict target only when the target repeats its WHERE.
const ON_KEY_CONFLICT = 'ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL'

/**
 * The arbitrated claim of an idempotent op: inserts the op's first entry (which must have an
 * idempotency key) unless the key was used before. Later statements of the op are guarded by
 * `claimed()` with the same key and op id.
 */
export function claimEntry(row: EntryRow): Statement {
  if (row.idempotencyKey === null) throw new Error('claimEntry: the entry needs an idempotency key')
  return { sql: `INSERT INTO ledger_entries (${ENTRY_COLUMNS}) VALUES ${ENTRY_PLACEHOLDERS} ${ON_KEY_CONFLICT} DO NOTHING`, args: entryArgs(row) }
}

/** Whose claim an idempotency key holds: the op id that claimed it (no row: unclaimed). */
export function claimHolder(idempotencyKey: string): Statement {
  return statement('SELECT op_id FROM ledger_entries WHERE idempotency_key = ?', idempotencyKey)
}

/** The organization and amount of the entry an idempotency key holds (a top-up reference's booking). */
export function claimedEntry(idempotencyKey: string): Statement {
  return statement('SELECT org_id, amount_nanos FROM ledger_entries WHERE idempotency_key = ?', idempotencyKey)
}

/**
 * One entry of `orgId` claimed under an idempotency key that starts with `family` but not with
 * `own` (no row: none). Both are prefixes ending in a separator; each becomes a key range
 * (`family` up to the same text with its last character's successor), so the claims' partial
 * unique index serves it as a range scan: a range on idempotency_key implies its IS NOT NULL.
 */
export function claimInFamilyOutside(orgId: string, family: string, own: string): Statement {
  return statement(
    `SELECT idempotency_key FROM ledger_entries
     WHERE idempotency_key >= ?1 AND idempotency_key < ?2 AND NOT (idempotency_key >= ?3 AND idempotency_key < ?4) AND org_id = ?5 LIMIT 1`,
    family, prefixEnd(family), own, prefixEnd(own), orgId,
  )
}

// The least text above every text starting with `prefix` (keys are ASCII; compared bytewise).
const prefixEnd = (prefix: string): string => prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1)

/** An idempotent op's claim: its idempotency key and the op id of this attempt. */
export interface Claim {
  readonly idempotencyKey: string
  readonly opId: string
}

/** Inserts a further entry of an op only if the op's claim went in. */
export function insertEntryIfClaimed(row: EntryRow, claim: Claim): Statement {
  return {
    sql: `INSERT INTO ledger_entries (${ENTRY_COLUMNS}) SELECT ${ENTRY_PLACEHOLDERS.slice(1, -1)} WHERE ${claimed(14)}`,
    args: [...entryArgs(row), claim.idempotencyKey, claim.opId],
  }
}

/**
 * SQL condition: the claim row with this key carries this attempt's op id, i.e. this attempt's
 * claim went in (served by the idempotency index). Binds the key at ?n and the op id at ?n+1.
 * Op ids must be fresh per attempt (settle-guarded.ts): after a lost COMMIT reply, the retry
 * must not find the first attempt's claim and take it for its own.
 */
function claimed(n: number): string {
  return `EXISTS (SELECT 1 FROM ledger_entries WHERE idempotency_key = ?${n} AND op_id = ?${n + 1})`
}

/**
 * Moves an org's prepaid balance (creating the row), optionally guarded by a claim: a top-up is
 * `credited`, a settlement's charge `spent`. The balance's top-up projection (spec §2.2) keeps
 * both as running totals beside it, so prepaid = credited - spent holds row by row.
 */
export function addPrepaid(orgId: string, change: { credited?: bigint; spent?: bigint }, claim?: Claim): Statement {
  const credited = change.credited ?? 0n
  const spent = change.spent ?? 0n
  if (claim === undefined) return statement(ADD_PREPAID, orgId, credited - spent, credited, spent)
  return statement(ADD_PREPAID_IF_CLAIMED, orgId, credited - spent, credited, spent, claim.idempotencyKey, claim.opId)
}

const PREPAID_COLUMNS = 'org_id, prepaid_nanos, prepaid_leased_nanos, top_up_credited_nanos, top_up_spent_nanos'
// A credit that would take the balance or its credited total past a 64-bit integer makes the
// update NULL, which the NOT NULL columns refuse, so the op fails whole: SQLite would otherwise
// turn the sum into a float and the money would stop being exact (Ledger.topUp names the cause).
const PREPAID_UPDATE = `ON CONFLICT(org_id) DO UPDATE SET
  prepaid_nanos = CASE WHEN prepaid_nanos <= ${MAX_NANOS} - ?3 AND top_up_credited_nanos <= ${MAX_NANOS} - ?3 THEN prepaid_nanos + ?2 END,
  top_up_credited_nanos = top_up_credited_nanos + ?3, top_up_spent_nanos = top_up_spent_nanos + ?4`
const ADD_PREPAID = `INSERT INTO balances (${PREPAID_COLUMNS}) VALUES (?1, ?2, 0, ?3, ?4) ${PREPAID_UPDATE}`
const ADD_PREPAID_IF_CLAIMED = `INSERT INTO balances (${PREPAID_COLUMNS}) SELECT ?1, ?2, 0, ?3, ?4 WHERE ${claimed(5)} ${PREPAID_UPDATE}`

/** Adds to an allowance period's used total. */
export function addAllowanceUsed(orgId: string, periodStartMs: number, amount: bigint, claim?: Claim): Statement {
  const guard = claim === undefined ? '' : ` AND ${claimed(4)}`
  return statement(
    `UPDATE allowances SET used_nanos = used_nanos + ?3 WHERE org_id = ?1 AND period_start_ms = ?2${guard}`,
    ...[orgId, periodStartMs, amount, ...claimArgs(claim)],
  )
}

/** Adds to a key's spend in a cap window (creating the row). */
export function addKeySpend(keyId: string, windowStartMs: number, amount: bigint, claim?: Claim): Statement {
  const guard = claim === undefined ? '' : ` WHERE ${claimed(4)}`
  return statement(
    `INSERT INTO key_spend (key_id, window_start_ms, spent_nanos, leased_nanos) SELECT ?1, ?2, ?3, 0${guard}
     ON CONFLICT(key_id, window_start_ms) DO UPDATE SET spent_nanos = spent_nanos + ?3`,
    ...[keyId, windowStartMs, amount, ...claimArgs(claim)],
  )
}

/** Takes spent money out of a lease (never below zero: a swept lease must not fail a settlement). */
export function drawLease(leaseId: string, amount: bigint, nowMs: number, claim?: Claim): Statement {
  const guard = claim === undefined ? '' : ` AND ${claimed(4)}`
  return statement(
    `UPDATE leases SET amount_nanos = MAX(0, amount_nanos - ?2), updated_at_ms = ${nextStamp(3)} WHERE id = ?1${guard}`,
    ...[leaseId, amount, nowMs, ...claimArgs(claim)],
  )
}

const claimArgs = (claim: Claim | undefined): InValue[] => (claim === undefined ? [] : [claim.idempotencyKey, claim.opId])

/** An overall cap that is used up turns its key `expired` in the same transaction. */
export function expireExhaustedKey(keyId: string): Statement {
  return statement(
    `UPDATE api_keys SET status = 'expired'
     WHERE id = ?1 AND status = 'active' AND spend_cap_period = 'overall'
       AND spend_cap_nanos <= (SELECT spent_nanos FROM key_spend WHERE key_id = ?1 AND window_start_ms = 0)`,
    keyId,
  )
}

/** Heartbeat of this process (also records a new boot). */
export function heartbeat(instanceId: string, bootId: string, nowMs: number): Statement {
  return statement(
    `INSERT INTO instances (instance_id, boot_id, started_at_ms, heartbeat_at_ms) VALUES (?1, ?2, ?3, ?3)
     ON CONFLICT(instance_id) DO UPDATE SET boot_id = ?2, heartbeat_at_ms = ?3,
       started_at_ms = CASE WHEN boot_id = ?2 THEN started_at_ms ELSE ?3 END`,
    instanceId, bootId, nowMs,
  )
}

// An instance row stays while the instance holds a lease, so that the sweep (which finds leases
// through their instance's stale heartbeat) keeps finding it; leaseGrant puts back the row of an
// instance that leases again after another's sweep forgot it.
const UNLEASED = 'NOT EXISTS (SELECT 1 FROM leases WHERE leases.instance_id = instances.instance_id)'

/** Forgets this boot's own instance row at a clean shutdown, once its leases are back. */
export function forgetInstance(instanceId: string, bootId: string): Statement {
  return statement(`DELETE FROM instances WHERE instance_id = ? AND boot_id = ? AND ${UNLEASED}`, instanceId, bootId)
}

/** Forgets the instances silent since `staleBeforeMs` whose leases the sweep has returned. */
export function forgetStaleInstances(staleBeforeMs: number): Statement {
  return statement(`DELETE FROM instances WHERE heartbeat_at_ms < ? AND ${UNLEASED}`, staleBeforeMs)
}
