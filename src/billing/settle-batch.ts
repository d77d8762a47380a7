import type { InValue } from '@libsql/client'
import { PairMap } from '../lib/pair-map'
import type { Statement } from './executor'
import { insertSettleEntries, type EntryRow, type LeaseRef } from './ledger-ops'
import type { SettleOp } from './ledger-writer'

// A batch's settlements as a few statements (LedgerWriter): the entries as multi-row INSERTs, and
// one statement per table of running totals over every organization, allowance period, key window
// and lease the batch involves.

// MAX_BATCH (64) settlements × at most 2 entries fit one INSERT.
const ROWS_PER_INSERT = 128

/**
 * Appends the aggregated statements for `settles` to `statements`: the entries as multi-row
 * INSERTs, then one statement per kind of running total for the whole batch, ending with the
 * key-expiry check (its RETURNING rows name the keys it expired). Returns that statement's
 * index, or -1.
 */
export function aggregateSettles(settles: SettleOp[], statements: Statement[]): number {
  if (settles.length === 0) return -1
  // The rows of the aggregated statements. Allowance and key-spend rows are [owner, period, the
  // batch's delta]; a row that is only a drawn lease's parent has a NULL delta (updated if it
  // exists, never inserted; see the statements below).
  const prepaid = new Map<string, bigint>()
  const allowance = new PairMap<InValue[]>()
  const keySpend = new PairMap<InValue[]>()
  const draws = new Map<string, { lease: LeaseRef; amount: bigint }>()
  const overallKeys = new Set<string>()
  const rows: EntryRow[] = []
  for (const settle of settles) {
    for (const entry of settle.entries) {
      rows.push(entry)
      if (entry.source === 'top_up') prepaid.set(entry.orgId, (prepaid.get(entry.orgId) ?? 0n) + entry.amountNanos)
    }
    const orgId = settle.entries[0]?.orgId
    if (settle.allowance && orgId) {
      const { periodStartMs, amount } = settle.allowance
      const row = allowance.get(orgId, periodStartMs)
      if (row) row[2] = (row[2] as bigint) + amount
      else allowance.set(orgId, periodStartMs, [orgId, periodStartMs, amount])
    }
    if (settle.keySpend) {
      const { keyId, windowStartMs, amount } = settle.keySpend
      const row = keySpend.get(keyId, windowStartMs)
      if (row) row[2] = (row[2] as bigint) + amount
      else keySpend.set(keyId, windowStartMs, [keyId, windowStartMs, amount])
      if (settle.keySpend.overallCap) overallKeys.add(keyId)
    }
    for (const draw of settle.leaseDraws) {
      const sum = draws.get(draw.lease.id)
      if (sum) sum.amount += draw.amount
      else draws.set(draw.lease.id, { lease: draw.lease, amount: draw.amount })
    }
  }
  const nowMs = settles[settles.length - 1]!.nowMs
  for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) statements.push(insertSettleEntries(rows.slice(start, start + ROWS_PER_INSERT)))
  // The lease draws go first: each running total below is updated together with its parent's
  // leased total, recomputed from the leases in the same statement (one statement per table,
  // not two).
  const drawRows: InValue[][] = []
  const prepaidRows = new Map<string, InValue[]>()
  for (const [orgId, amount] of prepaid) if (amount !== 0n) prepaidRows.set(orgId, [orgId, -amount, amount])
  for (const { lease, amount } of draws.values()) {
    if (amount > 0n) drawRows.push([lease.id, amount])
    // Every lease drawn on (even by nothing) has its parent's leased total recomputed.
    if (lease.scope === 'prepaid') {
      if (!prepaidRows.has(lease.orgId)) prepaidRows.set(lease.orgId, [lease.orgId, null, null])
    } else if (lease.scope === 'allowance') {
      if (!allowance.get(lease.orgId, lease.periodStartMs)) allowance.set(lease.orgId, lease.periodStartMs, [lease.orgId, lease.periodStartMs, 0n])
    } else if (!keySpend.get(lease.keyId!, lease.periodStartMs)) {
      keySpend.set(lease.keyId!, lease.periodStartMs, [lease.keyId, lease.periodStartMs, null])
    }
  }
  if (drawRows.length > 0) push(statements, DRAW_LEASES, drawRows, [nowMs])
  push(statements, ADD_PREPAID, [...prepaidRows.values()])
  push(statements, ADD_ALLOWANCE_USED, allowance.values())
  push(statements, ADD_KEY_SPEND, keySpend.values())
  // Positioned last, after the key spend it reads.
  return push(statements, EXPIRE_EXHAUSTED_KEYS, [...overallKeys].map(keyId => [keyId]))
}

// The batch forms of the single-op statements in ledger-ops.ts (addPrepaid, addAllowanceUsed,
// addKeySpend, drawLease, recomputeLeased, expireExhaustedKey), which a change there must follow:
// the same SQL, applied to a VALUES list of one row per organization, key window or lease (each
// total's statement also does its row's recomputeLeased; bench/ledger-writer-equivalence.ts
// checks the two agree). Per organization they took ~7 µs each, ~10 per organization and batch,
// so a batch spanning 64 organizations ran ~450 statements and blocked the event loop ~6 ms
// (bench/README.md); one statement per kind costs ~6 µs plus ~1–3 µs per row.

/** A statement over `VALUES (…), (…)`, prepared once per row count rounded up to a power of two. */
class ValuesStatement {
  private readonly texts = new Map<number, string>()
  constructor(
    private readonly width: number,
    private readonly text: (values: string) => string,
  ) {}

  /** The SQL for `rows` rows, padded with all-NULL rows, which match and insert nothing. */
  build(rows: readonly InValue[][], leading: readonly InValue[]): Statement {
    let size = 1
    while (size < rows.length) size *= 2
    let sql = this.texts.get(size)
    if (sql === undefined) {
      sql = this.text(Array(size).fill(`(${Array(this.width).fill('?').join(', ')})`).join(', '))
      this.texts.set(size, sql)
    }
    const args: InValue[] = [...leading]
    for (const row of rows) for (const value of row) args.push(value)
    for (let index = rows.length * this.width; index < size * this.width; index += 1) args.push(null)
    return { sql, args }
  }
}

/** Appends `statement` over `rows` unless there are none; returns its index, or -1. */
function push(statements: Statement[], statement: ValuesStatement, rows: readonly InValue[][], leading: readonly InValue[] = []): number {
  if (rows.length === 0) return -1
  return statements.push(statement.build(rows, leading)) - 1
}

// Each running total is added together with the recompute of its row's leased total
// (recomputeLeased), after the batch's lease draws: one statement per table instead of two.
// Recomputing a row whose leases did not change writes the value it already holds (a leased
// total always equals the sum of its leases; verify checks it). A row that is only a lease's
// parent (NULL delta) is updated where it exists and never inserted, as the recompute alone did;
// an inserted row has no leases yet (leaseGrant inserts the parent row first), so its leased total
// is the 0 it got before. INSERT … SELECT needs a WHERE before ON CONFLICT (SQLite's upsert
// parsing rule); it also drops the padding rows.
// Rows are [org, prepaid delta, spent]: a settlement's charge lowers prepaid and adds to what
// settlements charged to top-ups (addPrepaid's `spent`).
const ADD_PREPAID = new ValuesStatement(3, values =>
  `INSERT INTO balances (org_id, prepaid_nanos, prepaid_leased_nanos, top_up_spent_nanos)
   SELECT v.column1, COALESCE(v.column2, 0), (SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE leases.org_id = v.column1 AND leases.scope = 'prepaid'), COALESCE(v.column3, 0)
   FROM (VALUES ${values}) AS v
   WHERE v.column1 IS NOT NULL AND (v.column2 IS NOT NULL OR EXISTS (SELECT 1 FROM balances WHERE balances.org_id = v.column1))
   ON CONFLICT(org_id) DO UPDATE SET prepaid_nanos = prepaid_nanos + excluded.prepaid_nanos, prepaid_leased_nanos = excluded.prepaid_leased_nanos,
     top_up_spent_nanos = top_up_spent_nanos + excluded.top_up_spent_nanos`)
const ADD_ALLOWANCE_USED = new ValuesStatement(3, values =>
  `UPDATE allowances SET used_nanos = used_nanos + v.column3, leased_nanos =
     (SELECT COALESCE(SUM(amount_nanos), 0) FROM leases
      WHERE leases.org_id = allowances.org_id AND leases.scope = 'allowance' AND leases.period_start_ms = allowances.period_start_ms)
   FROM (VALUES ${values}) AS v
   WHERE allowances.org_id = v.column1 AND allowances.period_start_ms = v.column2`)
const ADD_KEY_SPEND = new ValuesStatement(3, values =>
  `INSERT INTO key_spend (key_id, window_start_ms, spent_nanos, leased_nanos)
   SELECT v.column1, v.column2, COALESCE(v.column3, 0),
     (SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE leases.key_id = v.column1 AND leases.scope = 'key_cap' AND leases.period_start_ms = v.column2)
   FROM (VALUES ${values}) AS v
   WHERE v.column1 IS NOT NULL
     AND (v.column3 IS NOT NULL OR EXISTS (SELECT 1 FROM key_spend WHERE key_spend.key_id = v.column1 AND key_spend.window_start_ms = v.column2))
   ON CONFLICT(key_id, window_start_ms) DO UPDATE SET spent_nanos = spent_nanos + excluded.spent_nanos, leased_nanos = excluded.leased_nanos`)
// The leading argument is the write's time (its `?` comes first in the text); a row's stamp never
// goes backwards (drawLease's nextStamp).
const DRAW_LEASES = new ValuesStatement(2, values =>
  `UPDATE leases SET amount_nanos = MAX(0, amount_nanos - v.column2), updated_at_ms = MAX(leases.updated_at_ms + 1, ?) FROM (VALUES ${values}) AS v WHERE leases.id = v.column1`)
const EXPIRE_EXHAUSTED_KEYS = new ValuesStatement(1, values =>
  `UPDATE api_keys SET status = 'expired'
   WHERE id IN (VALUES ${values}) AND status = 'active' AND spend_cap_period = 'overall'
     AND spend_cap_nanos <= (SELECT spent_nanos FROM key_spend WHERE key_spend.key_id = api_keys.id AND key_spend.window_start_ms = 0)
   RETURNING id`)
