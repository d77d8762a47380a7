import type { Principal } from '../keys/principal'
import type { Nanos } from '../lib/money'
import type { Limits } from '../limits/admission'
import type { GatewayMetrics } from '../observability/gateway-metrics'
import { Lifecycle } from '../observability/lifecycle'
import type { Ledger, Purpose, Reservation } from './ledger'

/**
 * One admitted billed call: a ledger hold, plus an inference concurrency slot for inference
 * calls. It ends exactly once: `settle` charges, `release` charges nothing; either frees the
 * slot, and calling either again does nothing. Billed routes end it in a `finally` (or a
 * stream's cancel), so success, error and client disconnect all free the slot.
 *
 * Every charge of the gateway settles here, so `svc_billed_nanos_total` is counted here, once
 * per settlement, with what the ledger charged (nothing for a billing key charged before): the
 * metric adds up to the ledger's settlements.
 */
export class MeteredCall {
  private ended = false

  constructor(
    private readonly ledger: Ledger,
    readonly reservation: Reservation,
    private readonly freeSlot: () => void,
    private readonly metrics?: GatewayMetrics,
    /** The model label: the model a chat call ran, '' for work that is not a model's (documents, web). */
    private readonly model = '',
  ) {}

  /**
   * Charges `actual` (committed before this resolves), then frees the slot. Resolves to what was
   * booked: 0 when the call's billing key had been charged before (a repeated Idempotency-Key).
   */
  async settle(actual: Nanos): Promise<Nanos> {
    if (this.ended) return 0n
    this.ended = true
    try {
      const charged = await this.ledger.settle(this.reservation, actual)
      this.metrics?.billedNanos.inc(Number(charged), this.model, this.reservation.purpose)
      return charged
    } finally {
      this.freeSlot()
    }
  }

  /** Ends the call with nothing charged. */
  release(): void {
    if (this.ended) return
    this.ended = true
    this.ledger.release(this.reservation)
    this.freeSlot()
  }

  get done(): boolean {
    return this.ended
  }

  /** Frees the concurrency slot now, keeping the hold: the work is done, only its charge waits. */
  freeSlotEarly(): void {
    this.freeSlot()
  }
}

/**
 * The charges of a chat call's request-local work (attached files read, pages fetched, a search)
 * held until the chat itself is admitted: a chat refused for funds, spend cap or rate then
 * charges nothing at all, as no refusal is billed. Each piece keeps its own hold meanwhile, so
 * the chat is admitted against what is left after them, as when they were settled first.
 */
export class PendingCharges {
  private readonly pending: Array<{ call: MeteredCall; amount: Nanos }> = []
  private released = false

  /** What the pieces kept here hold (their reservations, at least what each will be charged). */
  get total(): Nanos {
    return this.pending.reduce((sum, piece) => sum + piece.call.reservation.amount, 0n)
  }

  /** Keeps `call` to be charged `amount` later; frees its slot (the work is done) for the chat's. */
  add(call: MeteredCall, amount: Nanos): void {
    // Work that finishes after the chat failed (a fetch racing a failed search) is never charged.
    if (this.released) return call.release()
    call.freeSlotEarly()
    this.pending.push({ call, amount })
  }

  /** The chat was admitted: charges each piece (committed before this resolves); resolves to what was booked. */
  async settleAll(): Promise<Nanos> {
    let booked = 0n
    try {
      while (this.pending.length > 0) {
        const { call, amount } = this.pending.shift()!
        booked += await call.settle(amount)
      }
      return booked
    } finally {
      // A settlement the ledger could not commit (503) leaves the rest uncharged.
      this.releaseAll()
    }
  }

  /** The chat was refused or failed before admission: charges nothing. */
  releaseAll(): void {
    this.released = true
    for (const { call } of this.pending.splice(0)) call.release()
  }
}

/** The metering API billed routes call: admit → MeteredCall (settle | release), or a typed refusal thrown as ApiError. */
export class Metering {
  constructor(
    private readonly ledger: Ledger,
    private readonly limits: Limits,
    /** The process's serving state: no billed call is admitted once a shutdown has begun. */
    private readonly lifecycle: { readonly draining: boolean; readonly cut?: boolean } = { draining: false },
    /** Counts what each settlement charged (`svc_billed_nanos_total`). */
    private readonly metrics?: GatewayMetrics,
  ) {}

  /**
   * Admits a billed call. While the instance drains it is refused with 503 `unavailable` (every
   * billed route: chat, Encrypted, documents, web). Inference calls take an org concurrency slot
   * first (429 rate_limited when full); then the ledger holds `estimate` (429
   * insufficient_quota, 401, 503). A refusal frees the slot and leaves the ledger unchanged.
   * `continuesRequest`: the call belongs to a request already in flight (Fusion's judge, a chat or
   * Fusion run whose documents or pages were already charged), which a drain lets finish until
   * its deadline: once that has cut the calls in flight, nothing starts (a judge would run on,
   * uncut, until the process stopped under it). `model`: the model a chat call runs (the
   * charge's metric label).
   */
  async begin(input: { principal: Principal; purpose: Purpose; estimate: Nanos; inference: boolean; billingKey?: string; requestId?: string; continuesRequest?: boolean; model?: string; ownHeld?: Nanos }): Promise<MeteredCall> {
    if (this.lifecycle.draining && (input.continuesRequest !== true || this.lifecycle.cut === true)) throw Lifecycle.refusal()
    const freeSlot = input.inference ? this.limits.acquireInferenceSlot(input.principal.orgId) : () => {}
    let admitted
    try {
      admitted = await this.ledger.admit(input)
    } catch (error) {
      freeSlot()
      throw error
    }
    if (!admitted.ok) {
      freeSlot()
      throw admitted.error
    }
    return new MeteredCall(this.ledger, admitted.reservation, freeSlot, this.metrics, input.model)
  }

  /**
   * An org inference slot held across several calls of one request, which then begin with
   * `inference: false`: a chat turn's hosted fetch and search, run side by side, share one
   * (WebService.underOneSlot), and a Fusion run's participants and judge do (executeFusion).
   * 429 `rate_limited` when the org's slots are full; the function returned frees it (once).
   */
  holdInferenceSlot(principal: Principal): () => void {
    return this.limits.acquireInferenceSlot(principal.orgId)
  }
}
