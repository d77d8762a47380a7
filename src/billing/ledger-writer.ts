import type { InValue } from '@libsql/client'
import type { BatchExecutor, Statement, StatementResult } from './executor'
import { insertSettleEntries, type EntryRow, type LeaseRef } from './ledger-ops'

/**
 * An op whose statements run as written, in order, inside the batch's transaction. A function
 * is called for every attempt (a failed batch is retried op by op), for ops that must differ
 * per attempt (settle-guarded.ts, idempotentOp).
 */
export interface PlainOp<T> {
  readonly kind: 'plain'
  readonly statements: readonly Statement[] | (() => Statement[])
  interpret(results: StatementResult[]): T
}

/** A settlement without an idempotency key: folded into the batch's aggregated statements. */
export interface SettleOp {
  readonly kind: 'settle'
  readonly entries: EntryRow[]
  readonly allowance: { periodStartMs: number; amount: bigint } | null
  readonly keySpend: { keyId: string; windowStartMs: number; amount: bigint; overallCap: boolean } | null
  readonly leaseDraws: Array<{ lease: LeaseRef; amount: bigint }>
  readonly nowMs: number
}

/** What a committed settlement reports back. */
export interface SettleResult {
  /** It used up its key's overall cap: the key is now expired. */
  keyExpired: boolean
  /** Its billing key had been charged before, so nothing was charged now. */
  duplicate: boolean
}

type Op = PlainOp<unknown> | SettleOp
interface Pending {
  op: Op
  resolve(value: unknown): void
  reject(error: unknown): void
}

// A batch commits synchronously on the event loop (BEGIN … COMMIT), so its size bounds how long
// one commit blocks it. On the 2-core target a 64-op batch took ~0.4–0.7 ms (one organization)
// to ~1.5 ms (64 organizations); 256-op batches took 2–6 ms, for 10–40% more throughput only
// when a batch spans many organizations (bench/README.md).
const MAX_BATCH = 64
const ROWS_PER_INSERT = 128

/**
 * The one ledger writer of a process. Ops submitted while it is idle are flushed on the next
 * turn of the event loop (so everything queued by one I/O phase shares a commit); ops that
 * arrive while a batch commits form the next batch (at most MAX_BATCH ops, one batch per turn).
 * Settlements are aggregated: one multi-row INSERT of entries, and one statement per kind of
 * running total over all the organizations, allowance periods, key windows and leases involved.
 * A batch that fails is retried one op per batch, so one bad op cannot sink the others.
 */
export class LedgerWriter {
  private queue: Pending[] = []
  private flushing = false
  private scheduled = false
  /** Batch sizes and commit times, for metrics and the benchmark. */
  readonly stats = { batches: 0, ops: 0, lastBatchMs: 0, maxBatchMs: 0, failedBatches: 0 }
  /** Called once per committed batch with its commit time (metrics). */
  onCommit: ((elapsedMs: number, ops: number) => void) | undefined
  /** Called when a batch fails to commit (the database's health follows these two). */
  onFailure: ((error: unknown) => void) | undefined

  constructor(private readonly executor: BatchExecutor) {}

  submit(op: SettleOp): Promise<SettleResult>
  submit<T>(op: PlainOp<T>): Promise<T>
  submit(op: Op): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.push({ op, resolve, reject })
      this.schedule()
    })
  }

  /** Ops waiting for a batch (metrics: the queue depth). */
  get queueDepth(): number {
    return this.queue.length
  }

  /** Resolves once every op submitted so far has committed or failed. */
  async drain(): Promise<void> {
    while (this.queue.length > 0 || this.flushing || this.scheduled) await new Promise(resolve => setImmediate(resolve))
  }

  private schedule(): void {
    if (this.flushing || this.scheduled) return
    this.scheduled = true
    setImmediate(() => {
      this.scheduled = false
      void this.flush()
    })
  }

  private async flush(): Promise<void> {
    this.flushing = true
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH)
        await this.commit(batch)
        // A local commit resolves at once, so without this the next batch would follow in the
        // same microtask chain, and a queue that the settled callers keep refilling would hold
        // the event loop (sockets, timers) for as long as it lasted: one batch per turn instead.
        if (this.queue.length > 0) await new Promise(resolve => setImmediate(resolve))
      }
    } finally {
      this.flushing = false
    }
  }

  private async commit(batch: Pending[]): Promise<void> {
    try {
      this.settleAll(batch, await this.run(batch))
    } catch (error) {
      if (batch.length === 1) {
        batch[0]!.reject(error)
        return
      }
      // Isolation: find the op that failed by running each on its own.
      for (const pending of batch) {
        try {
          this.settleAll([pending], await this.run([pending]))
        } catch (singleError) {
          pending.reject(singleError)
        }
      }
    }
  }

  private settleAll(batch: Pending[], results: unknown[]): void {
    batch.forEach((pending, index) => pending.resolve(results[index]))
  }

  /** Builds one transaction for the batch, runs it, and maps statement results back to ops. */
  private async run(batch: Pending[]): Promise<unknown[]> {
    const statements: Statement[] = []
    const plainRanges: Array<[number, number] | null> = []
    for (const { op } of batch) {
      if (op.kind !== 'plain') {
        plainRanges.push(null)
        continue
      }
      const own = typeof op.statements === 'function' ? op.statements() : op.statements
      plainRanges.push([statements.length, statements.length + own.length])
      statements.push(...own)
    }
    const settles = batch.map(({ op }) => op).filter((op): op is SettleOp => op.kind === 'settle')
    const expiryIndex = aggregateSettles(settles, statements)
    const started = performance.now()
    let results: StatementResult[]
    try {
      results = await this.executor.write(statements)
    } catch (error) {
      this.stats.failedBatches += 1
      this.onFailure?.(error)
      throw error
    }
    this.recordStats(batch.length, performance.now() - started)

    const expiredKeys = new Set<string>()
    if (expiryIndex >= 0) for (const row of results[expiryIndex]?.rows ?? []) expiredKeys.add(String(row.id))
    return batch.map(({ op }, index) => {
      const range = plainRanges[index]
      if (op.kind === 'plain') return op.interpret(results.slice(range![0], range![1]))
      return { keyExpired: op.keySpend !== null && expiredKeys.has(op.keySpend.keyId), duplicate: false } satisfies SettleResult
    })
  }

  private recordStats(ops: number, elapsedMs: number): void {
    this.stats.batches += 1
    this.stats.ops += ops
    this.stats.lastBatchMs = elapsedMs
    if (elapsedMs > this.stats.maxBatchMs) this.stats.maxBatchMs = elapsedMs
    this.onCommit?.(elapsedMs, ops)
  }
}

/**
 * Appends the aggregated statements for `settles` to `statements`: the entries as multi-row
 * INSERTs, then one statement per kind of running total for the whole batch, ending with the
 * key-expiry check (its RETURNING rows name the keys it expired). Returns that statement's
 * index, or -1.
 */
function aggregateSettles(settles: SettleOp[], statements: Statement[]): number {
  if (settles.length === 0) return -1
  const prepaid = new Map<string, bigint>()
  const allowance = new Map<string, { orgId: string; periodStartMs: number; amount: bigint }>()
  const keySpend = new Map<string, { keyId: string; windowStartMs: number; amount: bigint }>()
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
      const id = `${orgId}|${settle.allowance.periodStartMs}`
      const sum = allowance.get(id) ?? { orgId, periodStartMs: settle.allowance.periodStartMs, amount: 0n }
      sum.amount += settle.allowance.amount
      allowance.set(id, sum)
    }
    if (settle.keySpend) {
      const id = `${settle.keySpend.keyId}|${settle.keySpend.windowStartMs}`
      const sum = keySpend.get(id) ?? { keyId: settle.keySpend.keyId, windowStartMs: settle.keySpend.windowStartMs, amount: 0n }
      sum.amount += settle.keySpend.amount
      keySpend.set(id, sum)
      if (settle.keySpend.overallCap) overallKeys.add(settle.keySpend.keyId)
    }
    for (const draw of settle.leaseDraws) {
      const sum = draws.get(draw.lease.id) ?? { lease: draw.lease, amount: 0n }
      sum.amount += draw.amount
      draws.set(draw.lease.id, sum)
    }
  }
  const nowMs = settles[settles.length - 1]!.nowMs
  for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) statements.push(insertSettleEntries(rows.slice(start, start + ROWS_PER_INSERT)))
  // The lease draws go first: each running total below is updated together with its parent's
  // leased total, recomputed from the leases in the same statement (one statement per table,
  // not two).
  const drawRows: InValue[][] = []
  // Per parent row: [its identity…, the batch's delta of its running total]. A row that is only
  // a drawn lease's parent has no delta (NULL): it is updated if it exists, never inserted.
  const prepaidRows = new Map<string, InValue[]>()
  const allowanceRows = new Map<string, InValue[]>()
  const keyRows = new Map<string, InValue[]>()
  for (const [orgId, amount] of prepaid) if (amount !== 0n) prepaidRows.set(orgId, [orgId, -amount])
  for (const [id, sum] of allowance) allowanceRows.set(id, [sum.orgId, sum.periodStartMs, sum.amount])
  for (const [id, sum] of keySpend) keyRows.set(id, [sum.keyId, sum.windowStartMs, sum.amount])
  for (const { lease, amount } of draws.values()) {
    if (amount > 0n) drawRows.push([lease.id, amount])
    // Every lease drawn on (even by nothing) has its parent's leased total recomputed.
    if (lease.scope === 'prepaid') {
      if (!prepaidRows.has(lease.orgId)) prepaidRows.set(lease.orgId, [lease.orgId, null])
    } else if (lease.scope === 'allowance') {
      const id = `${lease.orgId}|${lease.periodStartMs}`
      if (!allowanceRows.has(id)) allowanceRows.set(id, [lease.orgId, lease.periodStartMs, 0n])
    } else {
      const id = `${lease.keyId}|${lease.periodStartMs}`
      if (!keyRows.has(id)) keyRows.set(id, [lease.keyId, lease.periodStartMs, null])
    }
  }
  push(statements, DRAW_LEASES, drawRows, [nowMs])
  push(statements, ADD_PREPAID, [...prepaidRows.values()])
  push(statements, ADD_ALLOWANCE_USED, [...allowanceRows.values()])
  push(statements, ADD_KEY_SPEND, [...keyRows.values()])
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
const ADD_PREPAID = new ValuesStatement(2, values =>
  `INSERT INTO balances (org_id, prepaid_nanos, prepaid_leased_nanos)
   SELECT v.column1, COALESCE(v.column2, 0), (SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE leases.org_id = v.column1 AND leases.scope = 'prepaid')
   FROM (VALUES ${values}) AS v
   WHERE v.column1 IS NOT NULL AND (v.column2 IS NOT NULL OR EXISTS (SELECT 1 FROM balances WHERE balances.org_id = v.column1))
   ON CONFLICT(org_id) DO UPDATE SET prepaid_nanos = prepaid_nanos + excluded.prepaid_nanos, prepaid_leased_nanos = excluded.prepaid_leased_nanos`)
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
// The leading argument is the time (`updated_at_ms = ?` comes first in the text).
const DRAW_LEASES = new ValuesStatement(2, values =>
  `UPDATE leases SET amount_nanos = MAX(0, amount_nanos - v.column2), updated_at_ms = ? FROM (VALUES ${values}) AS v WHERE leases.id = v.column1`)
const EXPIRE_EXHAUSTED_KEYS = new ValuesStatement(1, values =>
  `UPDATE api_keys SET status = 'expired'
   WHERE id IN (VALUES ${values}) AND status = 'active' AND spend_cap_period = 'overall'
     AND spend_cap_nanos <= (SELECT spent_nanos FROM key_spend WHERE key_spend.key_id = api_keys.id AND key_spend.window_start_ms = 0)
   RETURNING id`)
