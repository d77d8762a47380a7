import type { Clock } from '../lib/clock'
import type { Logger } from '../observability/logger'
import type { Identity, Ledger } from './ledger'
import { forgetInstance, forgetStaleInstances, heartbeat, leaseReturn, type LeaseRef } from './ledger-ops'
import { LeaseTrust } from './lease-trust'
import type { LedgerWriter } from './ledger-writer'

/** How often every instance writes its heartbeat row (and sweeps). */
export const HEARTBEAT_MS = 5000
/**
 * The least `ledger.instance_stale_after_s` may be: three heartbeats. A beat goes through the
 * ledger writer, so a busy batch, a lock wait or a retry can make one late; the sweeping
 * instance also reads another's beat by its own clock. At one or two beats, a live instance
 * would be declared stale between its own heartbeats and its holds' leases swept from under it.
 */
export const MIN_STALE_AFTER_MS = 3 * HEARTBEAT_MS
/** How long a lease goes unused before this boot returns it (at the next sweep). */
export const IDLE_RETURN_MS = 10_000

/**
 * Keeps leases honest (ARCHITECTURE.md §7.5): heartbeats this instance; at boot returns the
 * leases of this instance's earlier boots; periodically returns the leases of instances whose
 * heartbeat went stale and this boot's idle leases. Every return is a guarded op, so racing
 * sweepers book each lease back once. Instance rows are forgotten once their leases are back (a
 * clean stop its own, the sweep the stale ones): each restart under a fresh id (a second process
 * on a local file, pod names as SVC_INSTANCE_ID) would otherwise leave a row for good.
 */
export class Sweeper {
  private timer: ReturnType<typeof setInterval> | undefined
  /** This boot wrote its instance row (a CLI command never does, so its stop writes nothing). */
  private beaten = false
  /** Leases returned by this sweeper, for metrics. */
  returned = 0
  /** The heartbeat in flight, which callers needing one join. */
  private beating: Promise<void> | undefined

  constructor(
    private readonly writer: LedgerWriter,
    private readonly ledger: Ledger,
    private readonly identity: Identity,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly staleAfterMs: number,
  ) {}

  /** Boot: heartbeat, reclaim earlier boots' leases, then sweep on a timer. */
  async start(): Promise<void> {
    this.ledger.leaseTrust = new LeaseTrust(() => this.heartbeat())
    await this.heartbeat()
    await this.returnLeases('instance_id = ? AND boot_id <> ?', [this.identity.instanceId, this.identity.bootId])
    this.timer = setInterval(() => void this.tick().catch(error => this.logger.warn('ledger sweep failed', { error: String(error) })), HEARTBEAT_MS)
    this.timer.unref?.()
  }

  /** One periodic pass (exposed for tests, which drive it with a fake clock). */
  async tick(): Promise<void> {
    await this.heartbeat()
    const staleBefore = this.clock.now() - this.staleAfterMs
    await this.returnLeases(
      `instance_id IN (SELECT instance_id FROM instances WHERE heartbeat_at_ms < ?) AND NOT (instance_id = ? AND boot_id = ?)`,
      [staleBefore, this.identity.instanceId, this.identity.bootId],
    )
    await this.writer.submit({ kind: 'plain', statements: [forgetStaleInstances(staleBefore)], interpret: () => undefined })
    // An idle pool's lease goes back, even drawn to 0 (its row would outlive the boot); a pool
    // that never leased is just forgotten, so the map stays small.
    for (const pool of this.ledger.pools.idle(this.clock.now() - IDLE_RETURN_MS)) await this.ledger.returnLease(pool)
  }

  /** Shutdown: stop the timer, hand every lease of this boot back, then forget its instance row. */
  async stop(): Promise<void> {
    clearInterval(this.timer)
    // Settlements still queued commit first: a pool they draw on is not returned until they do.
    await this.writer.drain()
    for (const pool of this.ledger.pools.all()) if (pool.held === 0n) await this.ledger.returnLease(pool)
    // A lease still held (a call that did not end) keeps the row: the stale sweep returns it. A
    // failed write leaves the row to that sweep too; the shutdown goes on.
    if (this.beaten) {
      await this.writer
        .submit({ kind: 'plain', statements: [forgetInstance(this.identity.instanceId, this.identity.bootId)], interpret: () => undefined })
        .catch(error => this.logger.warn('could not forget this instance; the stale sweep will', { error: String(error) }))
    }
    await this.writer.drain()
  }

  /** One heartbeat write (also the ledger health probe), or the one already in flight. */
  heartbeat(): Promise<void> {
    return (this.beating ??= this.beat().finally(() => (this.beating = undefined)))
  }

  private async beat(): Promise<void> {
    const { instanceId, bootId } = this.identity
    const at = this.clock.now()
    const ours = await this.writer.submit({
      kind: 'plain',
      statements: [heartbeat(instanceId, bootId, at), { sql: 'SELECT id FROM leases WHERE boot_id = ?', args: [bootId] }],
      interpret: results => new Set(results[1]!.rows.map(row => String(row.id))),
    })
    this.beaten = true
    // Another instance sweeps this boot only once this beat is staleAfterMs old by its clock; a
    // heartbeat's interval is kept in hand for clock skew and a late timer.
    if (this.ledger.leaseTrust !== undefined) this.ledger.leaseTrust.trustedUntilMs = Math.max(this.ledger.leaseTrust.trustedUntilMs, at + this.staleAfterMs - HEARTBEAT_MS)
    // A lease row that vanished was swept by another instance (this one looked dead): stop
    // spending against it.
    for (const pool of this.ledger.pools.all()) if (pool.leased > 0n && !ours.has(pool.ref.id)) this.ledger.leaseLost(pool)
  }

  private async returnLeases(where: string, args: Array<string | number>): Promise<void> {
    const rows = await this.writer.submit({
      kind: 'plain',
      statements: [{ sql: `SELECT id, scope, org_id, key_id, period_start_ms FROM leases WHERE ${where}`, args }],
      interpret: results => results[0]!.rows,
    })
    for (const row of rows) {
      const lease: LeaseRef = {
        id: String(row.id), scope: row.scope as LeaseRef['scope'], orgId: String(row.org_id),
        keyId: row.key_id === null ? null : String(row.key_id), periodStartMs: Number(row.period_start_ms),
      }
      await this.writer.submit({ kind: 'plain', statements: leaseReturn(lease), interpret: () => undefined })
      this.returned += 1
    }
    if (rows.length > 0) this.logger.info('returned leases', { count: rows.length })
  }
}
