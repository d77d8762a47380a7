import type { BatchExecutor, Statement, StatementResult } from './executor'
import {
  addAllowanceUsed, addKeySpend, addPrepaid, drawLease, expireExhaustedKey, insertEntries, recomputeLeased,
  type EntryRow, type LeaseRef,
} from './ledger-ops'

/** An op whose statements run as written, in order, inside the batch's transaction. */
export interface PlainOp<T> {
  readonly kind: 'plain'
  readonly statements: Statement[]
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

const MAX_BATCH = 256
const ROWS_PER_INSERT = 128

/**
 * The one ledger writer of a process. Ops submitted while it is idle are flushed on the next
 * turn of the event loop (so everything queued by one I/O phase shares a commit); ops that
 * arrive while a batch commits form the next batch. Settlements are aggregated: one multi-row
 * INSERT of entries and one UPDATE per organization, allowance period, key window and lease.
 * A batch that fails is retried one op per batch, so one bad op cannot sink the others.
 */
export class LedgerWriter {
  private queue: Pending[] = []
  private flushing = false
  private scheduled = false
  /** Batch sizes and commit times, for metrics and the benchmark. */
  readonly stats = { batches: 0, ops: 0, lastBatchMs: 0, maxBatchMs: 0 }

  constructor(private readonly executor: BatchExecutor) {}

  submit(op: SettleOp): Promise<SettleResult>
  submit<T>(op: PlainOp<T>): Promise<T>
  submit(op: Op): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.push({ op, resolve, reject })
      this.schedule()
    })
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
      plainRanges.push([statements.length, statements.length + op.statements.length])
      statements.push(...op.statements)
    }
    const settles = batch.map(({ op }) => op).filter((op): op is SettleOp => op.kind === 'settle')
    const expiryKeys = aggregateSettles(settles, statements)
    const expiryStart = statements.length - expiryKeys.length
    const started = performance.now()
    const results = await this.executor.write(statements)
    this.recordStats(batch.length, performance.now() - started)

    const expiredKeys = new Set<string>()
    expiryKeys.forEach((keyId, index) => {
      if ((results[expiryStart + index]?.changes ?? 0) > 0) expiredKeys.add(keyId)
    })
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
  }
}

/**
 * Appends the aggregated statements for `settles` to `statements`, ending with one key-expiry
 * check per overall-capped key (their results map back to keys by position); returns those keys.
 */
function aggregateSettles(settles: SettleOp[], statements: Statement[]): string[] {
  if (settles.length === 0) return []
  const prepaid = new Map<string, bigint>()
  const allowance = new Map<string, { orgId: string; periodStartMs: number; amount: bigint }>()
  const keySpend = new Map<string, { keyId: string; windowStartMs: number; amount: bigint }>()
  const draws = new Map<string, { lease: LeaseRef; amount: bigint }>()
  const overallKeys = new Set<string>()
  const rows: EntryRow[] = []
  for (const settle of settles) {
    rows.push(...settle.entries)
    for (const entry of settle.entries) {
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
  for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) statements.push(insertEntries(rows.slice(start, start + ROWS_PER_INSERT)))
  for (const [orgId, amount] of prepaid) if (amount !== 0n) statements.push(addPrepaid(orgId, -amount))
  for (const sum of allowance.values()) statements.push(addAllowanceUsed(sum.orgId, sum.periodStartMs, sum.amount))
  for (const sum of keySpend.values()) statements.push(addKeySpend(sum.keyId, sum.windowStartMs, sum.amount))
  const parents = new Map<string, LeaseRef>()
  for (const { lease, amount } of draws.values()) {
    if (amount > 0n) statements.push(drawLease(lease.id, amount, nowMs))
    parents.set(`${lease.scope}|${lease.orgId}|${lease.keyId}|${lease.periodStartMs}`, lease)
  }
  for (const lease of parents.values()) statements.push(recomputeLeased(lease))
  const expiryKeys = [...overallKeys]
  // Positioned last so the caller can find their results at a known offset.
  for (const keyId of expiryKeys) statements.push(expireExhaustedKey(keyId))
  return expiryKeys
}
