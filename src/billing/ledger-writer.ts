import type { BatchExecutor, Statement, StatementResult } from './executor'
import type { EntryRow, LeaseRef } from './ledger-ops'
import { aggregateSettles } from './settle-batch'

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

  constructor(
    private readonly executor: BatchExecutor,
    /** A crash-test seam (SVC_FAULT_POINT=in_settle): run inside a batch holding settlements, before its COMMIT. */
    private readonly inSettle?: () => void,
  ) {}

  /** Whether a failed batch may have committed (BatchExecutor.ambiguousCommits). */
  get ambiguousCommits(): boolean {
    return this.executor.ambiguousCommits === true
  }

  submit(op: SettleOp): Promise<SettleResult>
  submit<T>(op: PlainOp<T>): Promise<T>
  submit(op: Op): Promise<unknown>
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
      results = await this.executor.write(statements, settles.length > 0 ? this.inSettle : undefined)
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
