import { DatabaseUnanswered } from '../db/client'
import type { Clock } from '../lib/clock'
import type { Logger } from '../observability/logger'
import type { Identity, Ledger } from './ledger'
import { forgetInstance, forgetStaleInstances, heartbeat, leaseReturn, type LeaseRef } from './ledger-ops'
import { LeaseTrust } from './lease-trust'
import type { LeasePool } from './lease-pool'
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

const LEASE_COLUMNS = 'id, scope, org_id, key_id, period_start_ms'

function leaseOf(row: Record<string, unknown>): LeaseRef {
  return {
    id: String(row.id), scope: row.scope as LeaseRef['scope'], orgId: String(row.org_id),
    keyId: row.key_id === null ? null : String(row.key_id), periodStartMs: Number(row.period_start_ms),
  }
}

/**
 * The ids of this boot's lease rows (the statement, and its rows read back): every heartbeat reads
 * them, so only the ids, by the index on (instance_id, boot_id) (boot_id alone scanned the table).
 */
const ownLeaseIds = ({ instanceId, bootId }: Identity) => ({ sql: 'SELECT id FROM leases WHERE instance_id = ? AND boot_id = ?', args: [instanceId, bootId] })
const idsOf = (rows: ReadonlyArray<Record<string, unknown>>): Set<string> => new Set(rows.map(row => String(row.id)))
/** Lease rows by id (a JSON array), with what a return needs (LeaseRef). */
const leasesById = (ids: readonly string[]) => ({
  sql: `SELECT ${LEASE_COLUMNS} FROM leases WHERE id IN (SELECT value FROM json_each(?))`,
  args: [JSON.stringify(ids)],
})

/**
 * Keeps leases honest (ARCHITECTURE.md §7.5): heartbeats this instance; at boot returns the
 * leases of this instance's earlier boots; periodically returns the leases of instances whose
 * heartbeat went stale, this boot's idle leases, and this boot's lease rows that it does not know
 * of (returnUnknownLeases). Every return is a guarded op, so racing
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
  /** The shutdown (stop), once started. */
  private stopping: Promise<void> | undefined
  /** The heartbeat in flight, which callers needing one join. */
  private beating: Promise<Set<string>> | undefined

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
    await this.returnLeases('instance_id = ? AND boot_id <> ?', [this.identity.instanceId, this.identity.bootId], this.clock.now() - this.staleAfterMs)
    this.timer = setInterval(() => void this.tick().catch(error => this.logger.warn('ledger sweep failed', { error: String(error) })), HEARTBEAT_MS)
    this.timer.unref?.()
  }

  /** One periodic pass (exposed for tests, which drive it with a fake clock). */
  async tick(): Promise<void> {
    await this.returnUnknownLeases(await this.heartbeat())
    const staleBefore = this.clock.now() - this.staleAfterMs
    await this.returnLeases(
      `instance_id IN (SELECT instance_id FROM instances WHERE heartbeat_at_ms < ?) AND NOT (instance_id = ? AND boot_id = ?)`,
      [staleBefore, this.identity.instanceId, this.identity.bootId],
      staleBefore,
    )
    await this.writer.submit({ kind: 'plain', statements: [forgetStaleInstances(staleBefore)], interpret: () => undefined })
    // Settlements that could not be confirmed are tried again: the pools they drew on keep their
    // lease until then. A failure leaves them to the next tick; the idle returns still go.
    await this.ledger.unconfirmed.confirm().catch(error => this.logger.warn('could not confirm a settlement yet; the leases it drew on stay', { error: String(error) }))
    // An idle pool's lease goes back, even drawn to 0 (its row would outlive the boot); a pool
    // that never leased is just forgotten, so the map stays small.
    for (const pool of this.ledger.pools.idle(this.clock.now() - IDLE_RETURN_MS)) await this.ledger.returnLease(pool)
  }

  /**
   * Shutdown: stop the timer, hand every lease of this boot back, then forget its instance row.
   * Every lease is tried: a return that fails is logged and the others still go back; then stop()
   * fails (the process exits 1: main.ts), and what was not returned comes back when the instance
   * restarts or another instance's sweep finds it stale. So does a failed read of this boot's
   * rows (those that lost replies left): whether any is still out is then not known, and a
   * settlement still unconfirmed (Ledger.unconfirmed), whose pools keep their lease. Forgetting
   * the instance row is only bookkeeping (the stale sweep forgets it too): its failure is logged.
   * A database that did not answer at all (DATABASE_TIMEOUT_S) ends the shutdown's writes there:
   * each further one would wait as long, once per lease the process holds. A second call (deps
   * closed twice) gets the first one's outcome: its database is closed by then.
   */
  stop(): Promise<void> {
    return (this.stopping ??= this.shutdown())
  }

  private async shutdown(): Promise<void> {
    clearInterval(this.timer)
    // Settlements still queued commit first: a pool they draw on is not returned until they do.
    // So do those that could not be confirmed (Ledger.unconfirmed): a lease they drew on that
    // stays out (one still unconfirmed) comes back as below. One unanswered ends the writes here.
    await this.writer.drain()
    const unreturned: LeasePool[] = []
    const confirmUnanswered = await this.ledger.unconfirmed.confirm().then(
      () => false,
      error => {
        this.logger.warn('shutdown: could not confirm a settlement; the leases it drew on stay out', { error: String(error) })
        return error instanceof DatabaseUnanswered
      },
    )
    let unanswered = confirmUnanswered
    for (const pool of unanswered ? [] : this.ledger.pools.all()) {
      if (pool.held !== 0n) continue
      const lease = pool.ref.id // the row's (on a server the return moves the pool to a new id)
      try {
        await this.ledger.returnLease(pool)
      } catch (error) {
        unreturned.push(pool)
        this.logger.warn('shutdown: could not return a lease', { lease, error: String(error) })
        if ((unanswered = error instanceof DatabaseUnanswered)) break
      }
    }
    // A lease still held (a call that did not end) keeps the row: the stale sweep returns it. A
    // failed write leaves the row to that sweep too (or to the restart).
    let failed = unreturned.length
    let unread = false
    if (this.beaten && !unanswered) {
      // Rows of grants whose reply was lost: pools forgotten by now, or never told of the row. A
      // return that failed on a libSQL server left its pool rowUnknown (returnPoolLease): its row
      // is returned here too, or is gone (the DELETE committed). What stays out is counted.
      try {
        const ours = await this.writer.submit({ kind: 'plain', statements: [ownLeaseIds(this.identity)], interpret: results => idsOf(results[0]!.rows) })
        failed = unreturned.filter(pool => ours.has(pool.ref.id) && !pool.rowUnknown).length + (await this.returnUnknownLeases(ours))
      } catch (error) {
        this.logger.warn('could not read the leases of this boot; the stale sweep returns any left', { error: String(error) })
        unread = true
        unanswered = error instanceof DatabaseUnanswered
      }
      if (!unanswered) {
        await this.writer
          .submit({ kind: 'plain', statements: [forgetInstance(this.identity.instanceId, this.identity.bootId)], interpret: () => undefined })
          .catch(error => this.logger.warn('could not forget this instance; the stale sweep will', { error: String(error) }))
      }
    }
    await this.writer.drain()
    const problems: string[] = []
    const unconfirmed = this.ledger.unconfirmed.size
    if (unconfirmed > 0) problems.push(`${unconfirmed} settlement(s) could not be confirmed${confirmUnanswered ? ' (the database did not answer; no lease was returned)' : ''}`)
    if (failed > 0) problems.push(`${failed} lease return(s) failed${unanswered && !unread ? ' (the database did not answer; the rest were not tried)' : ''}`)
    if (unread) problems.push(`the leases of this boot could not be read${unanswered ? ' (the database did not answer)' : ''}`)
    if (problems.length > 0) throw new Error(`${problems.join(', and ')}: what is still out comes back when this instance restarts or another instance's sweep finds it stale`)
  }

  /** One heartbeat write (also the ledger health probe), or the one already in flight; resolves to the ids of this boot's lease rows. */
  heartbeat(): Promise<Set<string>> {
    return (this.beating ??= this.beat().finally(() => (this.beating = undefined)))
  }

  private async beat(): Promise<Set<string>> {
    const at = this.clock.now()
    const ours = await this.writer.submit({
      kind: 'plain',
      statements: [heartbeat(this.identity.instanceId, this.identity.bootId, at), ownLeaseIds(this.identity)],
      interpret: results => idsOf(results[1]!.rows),
    })
    this.beaten = true
    // Another instance sweeps this boot only once this beat is staleAfterMs old by its clock; a
    // heartbeat's interval is kept in hand for clock skew and a late timer.
    if (this.ledger.leaseTrust !== undefined) this.ledger.leaseTrust.trustedUntilMs = Math.max(this.ledger.leaseTrust.trustedUntilMs, at + this.staleAfterMs - HEARTBEAT_MS)
    // A lease row that vanished was swept by another instance (this one looked dead): stop
    // spending against it. The converse, a row that memory holds nothing of, is returned by
    // returnUnknownLeases; a pool with something leased is never rowUnknown, so a row is never
    // both lost here and returned there.
    for (const pool of this.ledger.pools.all()) {
      if (pool.leased === 0n || ours.has(pool.ref.id)) continue
      this.ledger.leaseLost(pool)
      // On a server a settlement's draw on the swept row may still run late: the pool's next grant
      // makes a row of its own (LeasePools.renew), which that draw cannot reach.
      if (this.writer.ambiguousCommits && pool.growing === null) {
        pool.leaseRow = false
        this.ledger.pools.renew(pool)
      }
    }
    return ours
  }

  /**
   * Returns, whole, the rows of this boot's leases (`ours`, their ids as read) that memory holds
   * nothing of: no pool, or one that is LeasePool.rowUnknown. Such a row is left by a lease grant
   * that committed on a libSQL server while its reply was lost (a reset connection,
   * DATABASE_TIMEOUT_S); the admission that asked for it failed and the pool never learnt of it,
   * so the money stayed leased to this boot, spent by no one, until it stopped (QA: an
   * organization with 0.05 USD was refused 429 "another gateway instance holds the rest leased"
   * with no other instance). A grant that the server runs only after the client gave up is found
   * at a later tick. A pool's return whose DELETE failed on a server leaves one too, unless it
   * committed (returnPoolLease).
   *
   * Such rows are rare: only they are read whole. Each return is decided as it is queued, all in
   * one turn once they are read: the writer runs ops in the order they were queued, so a grant
   * queued later runs after the DELETE (and makes the row afresh), and one queued earlier is still
   * `growing` then (its row is left alone). A server may also run the DELETE late, after a later
   * grant: on a server the pool moves to a new row id as the DELETE is queued (LeasePools.renew),
   * so that grant is in a row of its own. Resolves to the number of returns that failed (logged; the next tick retries); rejects if the
   * rows could not be read.
   */
  private async returnUnknownLeases(ours: ReadonlySet<string>): Promise<number> {
    // Most ticks: every row is one memory knows, counted without building anything.
    let known = 0
    for (const pool of this.ledger.pools.all()) if (ours.has(pool.ref.id) && !pool.rowUnknown) known += 1
    if (known === ours.size) return 0
    const before = this.poolsById()
    const unknown = [...ours].filter(id => before.get(id)?.rowUnknown ?? true)
    const rows = await this.writer.submit({ kind: 'plain', statements: [leasesById(unknown)], interpret: results => results[0]!.rows.map(leaseOf) })
    const pools = this.poolsById() // afresh: the read was awaited
    let returned = 0
    let failed = 0
    const returns = rows
      .filter(lease => pools.get(lease.id)?.rowUnknown ?? true)
      .map(lease => {
        // The pool's next grant makes a row of its own, out of reach of this DELETE run late.
        const pool = pools.get(lease.id)
        if (pool !== undefined && this.writer.ambiguousCommits) this.ledger.pools.renew(pool)
        return this.writer.submit({ kind: 'plain', statements: leaseReturn(lease), interpret: results => results[0]!.changes > 0 }).then(
          deleted => void (returned += deleted ? 1 : 0),
          error => {
            failed += 1
            this.logger.warn('could not return a lease this boot had no record of', { lease: lease.id, error: String(error) })
          },
        )
      })
    await Promise.all(returns)
    this.returned += returned
    if (returned > 0) this.logger.warn('returned leases this boot had no record of (a grant\'s or a return\'s reply was lost)', { count: returned })
    return failed
  }

  private poolsById(): Map<string, LeasePool> {
    return new Map(this.ledger.pools.all().map(pool => [pool.ref.id, pool]))
  }

  /**
   * Returns the leases of other boots that `where` selects (a stale instance's, this instance's
   * earlier boots'), each only while its boot has not beaten since `staleBefore` when the DELETE
   * runs (leaseReturn): one that beat again keeps its lease, and the next sweep looks again.
   */
  private async returnLeases(where: string, args: Array<string | number>, staleBefore: number): Promise<void> {
    const rows = await this.writer.submit({
      kind: 'plain',
      statements: [{ sql: `SELECT ${LEASE_COLUMNS} FROM leases WHERE ${where}`, args }],
      interpret: results => results[0]!.rows,
    })
    let returned = 0
    for (const row of rows) {
      if (await this.writer.submit({ kind: 'plain', statements: leaseReturn(leaseOf(row), staleBefore), interpret: results => results[0]!.changes > 0 })) returned += 1
    }
    this.returned += returned
    if (returned > 0) this.logger.info('returned leases', { count: returned })
  }
}
