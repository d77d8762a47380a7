import type { Logger } from '../observability/logger'
import type { LeasePool } from './lease-pool'
import type { LedgerWriter, PlainOp, SettleResult } from './ledger-writer'

interface Unconfirmed {
  readonly op: PlainOp<SettleResult>
  /** The pools its draws came out of (taken out of memory when it was made). */
  readonly pools: readonly LeasePool[]
  readonly keyId: string
  readonly requestId: string | undefined
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
  private readonly pending: Unconfirmed[] = []
  private confirming: Promise<void> | undefined

  constructor(
    private readonly writer: LedgerWriter,
    private readonly logger: Logger,
    private readonly onKeyExpired: (keyId: string) => void,
  ) {}

  get size(): number {
    return this.pending.length
  }

  add(settlement: Unconfirmed): void {
    this.pending.push(settlement)
  }

  /** Whether a settlement not yet confirmed drew on `pool`: its lease stays out until then. */
  drewOn(pool: LeasePool): boolean {
    return this.pending.some(settlement => settlement.pools.includes(pool))
  }

  /**
   * Submits each again, oldest first, until one fails, which rejects: the database is still
   * failing, and each further try could wait as long (the next tick tries again). One pass at a
   * time: a second caller joins the pass in flight.
   */
  confirm(): Promise<void> {
    return (this.confirming ??= this.pass().finally(() => (this.confirming = undefined)))
  }

  private async pass(): Promise<void> {
    while (this.pending.length > 0) {
      const settlement = this.pending[0]!
      const result = await this.writer.submit(settlement.op)
      this.pending.shift()
      if (result.keyExpired) this.onKeyExpired(settlement.keyId)
      // Duplicate: another request had charged its billing key; this one charged nothing, and the
      // draw memory kept out stays in the row until the lease goes back (money held, not spent).
      this.logger.info('a settlement that could not be confirmed is recorded', { request_id: settlement.requestId, charged: !result.duplicate })
    }
  }
}
