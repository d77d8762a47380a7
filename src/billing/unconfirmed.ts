import type { Logger } from '../observability/logger'
import { isDataError } from './ledger-health'
import type { LeasePool } from './lease-pool'
import type { LedgerWriter, PlainOp, SettleResult } from './ledger-writer'

interface Unconfirmed {
  readonly op: PlainOp<SettleResult>
  /** The pools its draws came out of (taken out of memory when it was made). */
  readonly pools: readonly LeasePool[]
  readonly keyId: string
  readonly requestId: string | undefined
  /** Gives its draws back to memory: for a settlement found never to have committed. */
  readonly undo: () => void
}

/**
 * Settlements whose every try failed on a libSQL server (the caller got 503 "could not confirm"):
 * each may have committed, its reply lost, or may still run on the server later, a try held past
 * DATABASE_TIMEOUT_S. Memory keeps their draws out; the pools they drew on keep their lease until
 * they are confirmed (Ledger.returnLease). Returned meanwhile, the row gave back, whole, the money
 * such a charge then took from prepaid with no lease under it, while the organization's next grant
 * leased that money again (QA: an organization at -0.01 USD, which `svc ledger verify` did not see).
 *
 * The sweeper's tick (and the shutdown) submits each again: the same guarded op, a fresh claim
 * attempt, which finds an earlier attempt's claim and charges nothing twice (settle-guarded.ts).
 * Once one attempt has committed, the claim is taken and any try of it run later changes nothing,
 * so the pools' leases can go back.
 */
export class UnconfirmedSettlements {
  /** In the order they were added (a Set keeps it): a pass goes oldest first. */
  private readonly pending = new Set<Unconfirmed>()
  /** How many pending settlements drew on each pool: an idle pool's check each tick is one lookup. */
  private readonly byPool = new Map<LeasePool, number>()
  private confirming: Promise<void> | undefined
  /**
   * From this many on, the ledger admits no billed call (LedgerHealth's 503) until they drain: each
   * is a charge its caller was told is unconfirmed and keeps leases out, and so many mean a database
   * failing after the writes. Memory then stays bounded, and so does a tick's pass.
   */
  limit = 4096

  constructor(
    private readonly writer: LedgerWriter,
    private readonly logger: Logger,
    private readonly onKeyExpired: (keyId: string) => void,
  ) {}

  get size(): number {
    return this.pending.size
  }

  /** Admissions wait until fewer settlements are pending (Ledger.admit). */
  get full(): boolean {
    return this.pending.size >= this.limit
  }

  add(settlement: Unconfirmed): void {
    this.pending.add(settlement)
    for (const pool of settlement.pools) this.byPool.set(pool, (this.byPool.get(pool) ?? 0) + 1)
  }

  /** Whether a settlement not yet confirmed drew on `pool`: its lease stays out until then. */
  drewOn(pool: LeasePool): boolean {
    return this.byPool.has(pool)
  }

  private remove(settlement: Unconfirmed): void {
    this.pending.delete(settlement)
    for (const pool of settlement.pools) {
      const count = this.byPool.get(pool)! - 1
      if (count === 0) this.byPool.delete(pool)
      else this.byPool.set(pool, count)
    }
  }

  /**
   * Submits each again, oldest first. A failure of the database stops the pass, which rejects:
   * each further try could wait as long (the next tick tries again). A data error is the
   * settlement's own (a value the database cannot take), and says no try of it committed: a
   * guarded replay of one that had (its claim taken) changes nothing and raises none. It is
   * dropped, its draws given back to memory, and the others still go, so one that cannot commit
   * never holds the rest back nor keeps its leases out; the pass then rejects with it. One pass at
   * a time: a second caller joins the pass in flight.
   */
  confirm(): Promise<void> {
    return (this.confirming ??= this.pass().finally(() => (this.confirming = undefined)))
  }

  private async pass(): Promise<void> {
    let failed: unknown
    for (const settlement of this.pending) {
      let result: SettleResult
      try {
        result = await this.writer.submit(settlement.op)
      } catch (error) {
        if (!isDataError(error)) throw error
        this.remove(settlement)
        settlement.undo()
        this.logger.warn('a settlement that could not be confirmed cannot be recorded; nothing was charged', { request_id: settlement.requestId, error: String(error) })
        failed ??= error
        continue
      }
      this.remove(settlement)
      if (result.keyExpired) this.onKeyExpired(settlement.keyId)
      // Duplicate: another request had charged its billing key; this one charged nothing, and the
      // draw memory kept out stays in the row until the lease goes back (money held, not spent).
      this.logger.info('a settlement that could not be confirmed is recorded', { request_id: settlement.requestId, charged: !result.duplicate })
    }
    if (failed !== undefined) throw failed
  }
}
