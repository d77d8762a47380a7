import { ApiError } from '../http/errors'
import { utcMonth, type Clock } from '../lib/clock'
import { newId } from '../lib/ids'
import { MAX_NANOS, type Nanos } from '../lib/money'
import type { Logger } from '../observability/logger'
import type { Principal } from '../keys/principal'
import { billingClaim } from './billed-keys'
import { demand, holdOn, holdOvershoot, LeasePools, releaseHolds, returnPoolLease, type Holds, type LeasePool } from './lease-pool'
import { leaseGrant, leaseGranted, type EntryRow } from './ledger-ops'
import { settleStatementsGuarded } from './settle-guarded'
import type { LedgerWriter, SettleOp, SettleResult } from './ledger-writer'
import { claimForRetries, submitWithRetries } from './ledger-retries'
import { bookTopUp, type TopUpInput } from './top-up'
import type { Plans } from './plans'
import { isDataError, LedgerHealth } from './ledger-health'
import type { LeaseTrust } from './lease-trust'
import { capWindow, fundsRefusal, keyRefusal, leaseTarget, min, positive, shortfall } from './ledger-rules'
import { readRoom } from './scope-room'
import { UnconfirmedSettlements } from './unconfirmed'

/** What a billed call is for (one entry `purpose`). */
export type Purpose = 'chat' | 'fusion' | 'web_fetch' | 'web_search' | 'doc_parse'

/** An in-memory hold (a pending transfer): ends exactly once, by settle or release. */
export interface Reservation {
  readonly orgId: string
  readonly keyId: string
  readonly amount: Nanos
  readonly purpose: Purpose
  readonly billingKey: string | undefined
  readonly requestId: string | undefined
  /** @internal holds per funding source */
  readonly holds: Holds
  /** @internal */ state: 'held' | 'settling' | 'settled' | 'released'
  /** @internal the settlement in flight, so a second settle call waits for the first */
  settling?: Promise<Nanos>
}

export type AdmitResult = { ok: true; reservation: Reservation } | { ok: false; error: ApiError }

/** Where this process sits: leases are recorded against it. */
export interface Identity {
  readonly instanceId: string
  readonly bootId: string
}

// After a scope reported nothing free, re-ask the database no more often than this.
const EMPTY_RECHECK_MS = 1000
const MAX_ADMIT_ROUNDS = 64

/**
 * The prepaid ledger (ARCHITECTURE.md §7). Reserves are in-memory holds against leases moved
 * out of the database by guarded ops; settlements are durable, group-committed by the one
 * writer, and committed before the caller finishes its response.
 */
export class Ledger {
  readonly pools: LeasePools
  /**
   * Pools that settlements still in flight drew on. Their lease is not returned meanwhile: a
   * settlement that then charges nothing (a replayed billing key) or fails gives its draw back
   * to the pool, which would leave this process a lease the database no longer records.
   */
  private readonly settlingOn = new Map<LeasePool, number>()
  /** Settlements that may have committed or may still run late (a libSQL server): their pools keep their lease until confirmed. */
  readonly unconfirmed: UnconfirmedSettlements
  /** When set (deps), billed calls are admitted only while the database takes writes. */
  health: LedgerHealth | undefined
  /**
   * Another instance returned a lease this one still had holds on: this one was taken for dead
   * (paused, starved or cut off past `instance_stale_after_s`) and its money may be spent
   * elsewhere. Set by deps: the calls in flight are cut, so that what they charge against the
   * vanished lease is what they had produced by then, not the rest of their output.
   */
  onLeaseLost: (() => void) | undefined
  /** Set by the sweeper: a settlement past its trust confirms this boot's leases first. */
  leaseTrust: LeaseTrust | undefined

  constructor(
    private readonly writer: LedgerWriter,
    private readonly plans: Plans,
    private readonly clock: Clock,
    private readonly identity: Identity,
    private readonly logger: Logger,
    /** Called when a settlement used up a key's overall cap (the key is now expired). */
    private readonly onKeyExpired: (keyId: string) => void,
  ) {
    this.pools = new LeasePools(identity.bootId)
    this.unconfirmed = new UnconfirmedSettlements(writer, logger, onKeyExpired)
  }

  /**
   * Admits a billed call: holds `estimate` against the key's cap window and the organization's
   * allowance, then prepaid balance. A typed refusal (429 insufficient_quota, 401 for a key no longer
   * active, 503 on a ledger outage) leaves the ledger unchanged; `ownHeld` (what the request holds
   * already, its files' units) counts as spent in it: that alone is no reason to retry shortly.
   */
  async admit(input: { principal: Principal; purpose: Purpose; estimate: Nanos; billingKey?: string; requestId?: string; ownHeld?: Nanos }): Promise<AdmitResult> {
    const { principal, estimate } = input
    if (estimate < 0n) throw new RangeError('estimate must be non-negative')
    if (estimate > MAX_NANOS) return { ok: false, error: fundsRefusal(estimate, 'spent') } // unfundable (in SQL it overflowed: a 503)
    // Never start work that could not be billed: refuse while the database takes no writes, or
    // while too many charges wait to be confirmed (UnconfirmedSettlements.full). Under traffic
    // this is one timestamp comparison; see LedgerHealth.
    const health = this.health
    if (this.unconfirmed.full || (health !== undefined && !health.fresh && (health.unavailable || !(await health.check())))) {
      return { ok: false, error: LedgerHealth.refusal() }
    }
    const now = this.clock.now()
    const month = utcMonth(now)
    const cap = principal.spendCap
    const window = cap ? capWindow(cap.period, now) : null
    const ownHeld = input.ownHeld ?? 0n
    let allowanceEmpty = false
    let keyShort = false
    // The pools this admission waits to grow (made on the first: most admissions grow none).
    let waiting: LeasePool[] | undefined
    try {
      // Each round either holds, or grows a short lease (or waits for a growth in flight) and looks
      // again; a scope the database reports empty ends it with a refusal. Every await ends a round,
      // and pools are looked up afresh: leasing into one forgotten meanwhile would strand money.
      for (let round = 0; round < MAX_ADMIT_ROUNDS; round += 1) {
        const allowance = this.pools.get('allowance', principal.orgId, null, month.startMs, now)
        const prepaid = this.pools.get('prepaid', principal.orgId, null, 0, now)
        const keyPool = cap ? this.pools.get('key_cap', principal.orgId, principal.keyId, window!.startMs, now) : null
        keyShort = keyPool !== null && keyPool.free < estimate
        if (keyShort) {
          waiting = demand(waiting, keyPool!, estimate)
          const outcome = await this.grow(keyPool!, estimate - keyPool!.free, estimate, cap!.nanos)
          if (outcome === 'inactive') return { ok: false, error: new ApiError('unauthorized', 'this API key is no longer active') }
          if (outcome === 'empty') return { ok: false, error: keyRefusal(cap!, input.purpose, estimate + ownHeld, now, shortfall(keyPool!.room, estimate + ownHeld)) }
          continue
        }
        // Allowance first (§7.3): top the period's allowance lease up before holding against
        // prepaid lease already in memory (leased in an earlier month, say), or prepaid would pay
        // while allowance is left. A period recently found empty is skipped without a wait.
        if (!allowanceEmpty && allowance.free < estimate && allowance.emptyUntilMs <= this.clock.now()) {
          waiting = demand(waiting, allowance, estimate)
          allowanceEmpty = (await this.grow(allowance, 1n, estimate)) === 'empty'
          continue
        }
        const holds = holdOn(estimate, allowance, prepaid, keyPool, this.clock.now())
        if (holds) {
          if (keyPool) holds.key = { pool: keyPool, amount: estimate, window: window!, period: cap!.period, cap: cap!.nanos }
          return { ok: true, reservation: this.reservation(input, holds) }
        }
        // What prepaid lacks, its negative free part too (holds on a lease another instance
        // returned): a growth of less would leave holdOn short, round after round.
        const short = estimate - positive(allowance.free) - prepaid.free
        if (short > 0n) waiting = demand(waiting, prepaid, estimate)
        if (short > 0n && (await this.grow(prepaid, short, estimate)) === 'empty') return { ok: false, error: fundsRefusal(estimate, shortfall(prepaid.room, estimate + ownHeld)) }
      }
      // Every round was granted or waited on a growth, yet calls admitted meanwhile took what it
      // left: held money, not spent (nor a ledger outage, a 503's meaning), so retry shortly.
      return { ok: false, error: keyShort ? keyRefusal(cap!, input.purpose, estimate + ownHeld, now, 'held') : fundsRefusal(estimate, 'held') }
    } catch (error) {
      if (error instanceof ApiError) return { ok: false, error }
      this.logger.error('ledger admit failed', { org_id: principal.orgId, error: String(error) })
      return { ok: false, error: new ApiError('unavailable', 'the ledger is unavailable; nothing was charged') }
    } finally {
      if (waiting) for (const pool of waiting) pool.wanted -= estimate
    }
  }

  /**
   * Charges `actual` for an admitted call: allowance first (up to its hold), then prepaid; the
   * key's cap window is charged in full. Durable before it resolves. Idempotent per reservation;
   * a reservation with a billing key charges once across processes. If the ledger cannot commit
   * after retries, nothing is charged and ApiError('unavailable') is thrown. Resolves to what
   * this settlement charged: `actual`, or 0 when its billing key had been charged before (a
   * second call waits for the first and reports the same; a reservation already ended: 0).
   */
  async settle(reservation: Reservation, actual: Nanos): Promise<Nanos> {
    if (reservation.state === 'settling') return reservation.settling!
    if (reservation.state !== 'held') return 0n
    if (actual < 0n) throw new RangeError('actual must be non-negative')
    reservation.state = 'settling'
    reservation.settling = this.commitSettlement(reservation, actual)
    return reservation.settling
  }

  /** Ends a reservation with nothing charged (upstream failed, client gone before any output). */
  release(reservation: Reservation): void {
    if (reservation.state !== 'held') return
    reservation.state = 'released'
    releaseHolds(reservation.holds)
  }

  /** Books a prepaid top-up. With `reference`, a repeated top-up is applied once. */
  async topUp(input: TopUpInput): Promise<{ applied: boolean }> {
    const now = this.clock.now()
    const applied = await bookTopUp(this.writer, this.logger, input, now)
    // Money arrived: a refusal remembered for this org's prepaid scope no longer holds.
    if (applied) this.pools.get('prepaid', input.orgId, null, 0, now).emptyUntilMs = 0
    return { applied }
  }

  /** Returns a pool's whole lease to the database (idle, shutdown) unless settlements, in flight or unconfirmed, draw on it: returnPoolLease. */
  async returnLease(pool: LeasePool): Promise<void> {
    if (!this.settlingOn.has(pool) && !this.unconfirmed.drewOn(pool)) await returnPoolLease(this.writer, this.pools, pool)
  }

  private reservation({ principal, estimate: amount, purpose, billingKey, requestId }: Parameters<Ledger['admit']>[0], holds: Holds): Reservation {
    return { orgId: principal.orgId, keyId: principal.keyId, amount, purpose, billingKey, requestId, holds, state: 'held' }
  }

  /**
   * Asks the database for more lease: at least `need`, up to a few of `estimate`'s requests or the
   * demand waiting on this pool (leaseTarget). Concurrent callers wait for the growth already in flight
   * ('waited') and look again. 'empty': nothing was free (the pool's `room` says why);
   * 'inactive': a key-cap growth found the key no longer active.
   */
  private async grow(pool: LeasePool, need: Nanos, estimate: Nanos, capNanos?: Nanos): Promise<'granted' | 'waited' | 'empty' | 'inactive'> {
    if (pool.growing) {
      await pool.growing
      return 'waited'
    }
    const now = this.clock.now()
    if (pool.emptyUntilMs > now && need >= pool.emptyNeed) return 'empty'
    const target = leaseTarget(need, estimate, pool.wanted - positive(pool.free))
    let grant: Nanos | null = null
    let inactive = false
    let swept = false
    const leasedBefore = pool.leased
    const rowKnown = pool.leaseRow
    pool.growing = this.writer
      .submit({
        kind: 'plain',
        statements: leaseGrant({
          lease: pool.ref, instanceId: this.identity.instanceId, bootId: this.identity.bootId, needNanos: need, targetNanos: target,
          nowMs: now, capNanos, planGrantSql: pool.ref.scope === 'allowance' ? this.plans.allowanceSql(pool.ref.orgId) : undefined, rowKnown,
        }),
        interpret: results => leaseGranted(results, rowKnown),
      })
      .then(async ({ granted, created, gone }) => {
        // The row memory knew was swept by another instance: nothing is leased from it, and the
        // pool moves to a new id, out of reach of draws still aimed at the old one (unconfirmed
        // settlements, tries run late); the caller looks again, and that grant makes the new row.
        if ((swept = gone)) {
          if (pool.leased > 0n) this.leaseLost(pool)
          pool.leaseRow = false
          return this.pools.renew(pool)
        }
        grant = granted
        // A row created while memory held a lease without one (a duplicate's undo after the
        // heartbeat found the row swept): only this grant is leased now.
        if (created && leasedBefore > 0n) this.leaseLost(pool)
        if (granted !== null) pool.leaseRow = true
        if (granted !== null && granted > 0n) pool.leased += granted
        else {
          pool.emptyUntilMs = now + EMPTY_RECHECK_MS
          pool.emptyNeed = need
          // Why, read while the admissions waiting on this growth still wait: they find the same
          // answer. A prepaid refusal reads the month's allowance with it (admission draws on both).
          const month = pool.ref.scope === 'prepaid' ? this.pools.get('allowance', pool.ref.orgId, null, utcMonth(now).startMs, now) : undefined
          inactive = !(await readRoom(this.writer, pool, capNanos, month))
          if (inactive) {
            pool.emptyUntilMs = 0 // asked again next time, to answer 401 again
            this.onKeyExpired(pool.ref.keyId!)
          }
        }
      })
      // A failure leaves leaseRow as it was. On a libSQL server the grant may have committed all
      // the same: a first grant's row is then one this process does not know of, which the
      // sweeper's next tick returns whole (Sweeper.returnUnknownLeases); a grant onto a row the
      // pool has leaves that row holding more than memory (spent by no one, and safe: draws are
      // clamped), until the pool's idle return or the shutdown deletes the whole row.
      .finally(() => {
        pool.growing = null
      })
    await pool.growing
    if (swept) return 'waited'
    if (grant !== null && grant > 0n) return 'granted'
    return inactive ? 'inactive' : 'empty'
  }

  /**
   * `pool`'s lease row was returned by another instance (the heartbeat or a grant found it gone):
   * nothing is leased from it any more; its holds' calls are cut.
   */
  leaseLost(pool: LeasePool): void {
    this.logger.warn('lease was returned by another instance; dropping it', { lease: pool.ref.id, held_nanos: String(pool.held) })
    pool.leased = 0n
    if (pool.held > 0n) this.onLeaseLost?.()
  }

  private async commitSettlement(reservation: Reservation, actual: Nanos): Promise<Nanos> {
    const { allowance, prepaid, key } = reservation.holds
    if (this.leaseTrust !== undefined && this.clock.now() >= this.leaseTrust.trustedUntilMs && !(await this.leaseTrust.confirm(this.clock.now()))) throw this.unrecorded(reservation, () => releaseHolds(reservation.holds))
    // A charge its allowance hold and lease do not cover asks for more (an overshoot, or allowance
    // come since: a plan upgrade), at most once per recheck interval while it finds none; awaited
    // only then: else a settlement is queued in its own turn, which a shutdown relies on.
    if (allowance && actual > allowance.amount + positive(allowance.pool.free)) {
      // A hold of nothing may be on a pool dropped as idle since: the list's own grows (QA: stranded lease).
      if (allowance.amount === 0n) allowance.pool = this.pools.get('allowance', reservation.orgId, null, allowance.pool.ref.periodStartMs, this.clock.now())
      if (actual > allowance.amount + positive(allowance.pool.free) && allowance.pool.emptyUntilMs <= this.clock.now()) {
        await holdOvershoot(allowance, actual, this.clock, excess =>
          this.grow(allowance.pool, 1n, excess).catch(error => {
            this.logger.warn('could not lease allowance for an overshoot; it goes to prepaid', { org_id: reservation.orgId, error: String(error) })
            return 'empty' as const
          }),
        ) // 1n: what is left, if less than the excess
      }
    }
    const now = this.clock.now()
    // Allowance first (§7.3), overshoot included, then prepaid (without a lease past its free part:
    // it may dip below zero). Draws (out of each lease) never exceed what this boot still holds
    // leased (QA: a returned lease spent elsewhere drove leased totals negative).
    const fromAllowance = allowance ? min(actual, min(allowance.amount + positive(allowance.pool.free), positive(allowance.pool.leased))) : 0n
    const fromPrepaid = actual - fromAllowance
    const prepaidPool = prepaid?.pool ?? this.pools.get('prepaid', reservation.orgId, null, 0, now)
    const prepaidDraw = min(fromPrepaid, min((prepaid?.amount ?? 0n) + positive(prepaidPool.free), positive(prepaidPool.leased)))
    const keyDraw = key ? min(actual, min(key.amount + positive(key.pool.free), positive(key.pool.leased))) : 0n
    releaseHolds(reservation.holds)
    if (allowance) allowance.pool.leased -= fromAllowance
    prepaidPool.leased -= prepaidDraw
    if (key) key.pool.leased -= keyDraw
    const undo = () => {
      if (allowance) allowance.pool.leased += fromAllowance
      prepaidPool.leased += prepaidDraw
      if (key) key.pool.leased += keyDraw
    }

    const opId = newId()
    const claimKey = reservation.billingKey ? billingClaim(reservation.billingKey) : claimForRetries(this.writer)
    const entry = (source: 'allowance' | 'top_up', amount: Nanos, first: boolean): EntryRow => ({
      opId, idempotencyKey: first ? claimKey : null, orgId: reservation.orgId,
      keyId: reservation.keyId, kind: 'settle', source, amountNanos: amount,
      periodStartMs: source === 'allowance' ? allowance!.pool.ref.periodStartMs : null, capWindowStartMs: key ? key.window.startMs : null,
      purpose: reservation.purpose, requestId: reservation.requestId ?? null, note: null, createdAtMs: now,
    })
    const entries: EntryRow[] = []
    if (fromAllowance > 0n) entries.push(entry('allowance', fromAllowance, true))
    if (fromPrepaid > 0n || (entries.length === 0 && reservation.billingKey)) entries.push(entry('top_up', fromPrepaid, entries.length === 0))
    const op: SettleOp = {
      kind: 'settle', entries, nowMs: now,
      allowance: fromAllowance > 0n ? { periodStartMs: allowance!.pool.ref.periodStartMs, amount: fromAllowance } : null,
      keySpend: key ? { keyId: reservation.keyId, windowStartMs: key.window.startMs, amount: actual, overallCap: key.period === 'overall' } : null,
      leaseDraws: [],
    }
    if (entries.length === 0) {
      reservation.state = 'settled' // nothing to charge and no billing key to claim
      return 0n
    }
    // The pools drawn on, and the op's draws on their leases (pushed: this runs per request).
    const drawn: LeasePool[] = []
    if (allowance && fromAllowance > 0n) {
      drawn.push(allowance.pool)
      op.leaseDraws.push({ lease: allowance.pool.ref, amount: fromAllowance })
    }
    if (prepaidDraw > 0n) {
      drawn.push(prepaidPool)
      op.leaseDraws.push({ lease: prepaidPool.ref, amount: prepaidDraw })
    }
    if (key && keyDraw > 0n) {
      drawn.push(key.pool)
      op.leaseDraws.push({ lease: key.pool.ref, amount: keyDraw })
    }
    for (const pool of drawn) this.settlingOn.set(pool, (this.settlingOn.get(pool) ?? 0) + 1)
    try {
      return (await this.commitWithRetries(reservation, op, undo, drawn)) ? 0n : actual
    } finally {
      for (const pool of drawn) {
        const count = this.settlingOn.get(pool)! - 1
        if (count === 0) this.settlingOn.delete(pool)
        else this.settlingOn.set(pool, count)
      }
    }
  }

  /** Commits the settlement; true when its billing key had been charged before (nothing charged now). */
  private async commitWithRetries(reservation: Reservation, op: SettleOp, undo: () => void, drawn: LeasePool[]): Promise<boolean> {
    // One guarded op for every try: it claims under a fresh op id per attempt and knows its own
    // earlier attempts' claims (a COMMIT whose reply was lost), so a retry charges nothing twice.
    const guarded = op.entries[0]!.idempotencyKey !== null ? settleStatementsGuarded(op) : null
    let result: SettleResult
    try {
      result = await submitWithRetries(this.writer, this.logger, guarded ?? op, { op: 'settle', request_id: reservation.requestId })
    } catch (error) {
      // On a server every settlement has a claim (claimForRetries), so `guarded` is set there. A
      // data error (a value the database cannot take) is the op's own, the same on every try: none committed.
      const maybe = this.writer.ambiguousCommits && !isDataError(error)
      if (maybe && guarded) this.unconfirmed.add({ op: guarded, pools: drawn, keyId: reservation.keyId, requestId: reservation.requestId, undo })
      throw this.unrecorded(reservation, undo, maybe)
    }
    if (result.duplicate) undo() // the billing key was charged before: nothing charged now
    reservation.state = 'settled'
    if (result.keyExpired) this.onKeyExpired(reservation.keyId)
    return result.duplicate
  }

  /** A settlement not recorded, 503: nothing charged, draws given back (`undo`); `maybe` (a libSQL server: a try may have committed, its reply lost), the draws stay out of memory, the 503 says unconfirmed, and the tick confirms it (`unconfirmed`). */
  private unrecorded(reservation: Reservation, undo: () => void, maybe = false): ApiError {
    reservation.state = 'released'
    if (maybe) return new ApiError('unavailable', 'the ledger could not confirm this charge: its database stopped answering after the write')
    undo()
    return new ApiError('unavailable', 'the ledger could not record this charge; nothing was charged')
  }
}
