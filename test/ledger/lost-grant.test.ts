import { describe, expect, test } from 'bun:test'
import { ClientExecutor, type Statement } from '../../src/billing/executor'
import type { Ledger } from '../../src/billing/ledger'
import { IDLE_RETURN_MS, type Sweeper } from '../../src/billing/sweeper'
import type { Principal } from '../../src/keys/principal'
import { type TestApp } from '../support/harness'
import { USD, LostReplyExecutor, adminPrincipal, admitOk, buildPaygApp, ledgerOver, prepaidOf, scalar, verifyClean } from './fixtures'
import { Served } from './served'

// A lease grant that a libSQL server committed while its reply was lost (a reset connection,
// DATABASE_TIMEOUT_S), or that the server ran only after the client had given up on it. The
// admission that asked for it failed (503) and the pool never learnt of the row, so its money
// stayed leased to the live boot, spent by no one, until the boot stopped. QA: an organization
// with 0.05 USD was refused 429 "another gateway instance holds the rest leased" with no other
// instance, 40 s later still, and `svc ledger verify` saw nothing wrong. The sweeper's tick now
// returns every row of this boot that memory holds nothing of.

const served = new Served('svc-lost-grant-')

const leasedTotal = (orgId: string) => scalar(served.app!.deps.database.client, 'SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?', [orgId])
const prepaidGrant = (text: string) => text.includes('INSERT INTO leases') && text.includes('|prepaid|')

describe('over a libSQL server (Hrana over HTTP)', () => {
  /** The tick returns the stray row whole, and the organization (0.05 USD) is served again. */
  async function returnedAndServed(app: TestApp, principal: Principal, orgId: string): Promise<void> {
    await app.deps.sweeper.tick()
    expect(await served.leasedRows(orgId)).toBe(0n)
    expect(await leasedTotal(orgId)).toBe(0n)
    await app.deps.ledger.settle(await admitOk(app, principal, 261_000n), 261_000n)
    expect(await prepaidOf(app, orgId)).toBe(50_000_000n - 261_000n)
    await verifyClean(app)
  }


  test('a first grant committed with its reply lost: the next tick returns its row, and the organization is served again', async () => {
    const { app, database } = await served.appOnServer()
    const small = await app.createOrg('small', 50_000_000n) // below the least lease: one grant takes it all
    const principal = await adminPrincipal(app, small)
    database.loseReply(prepaidGrant)
    const lost = await app.deps.ledger.admit({ principal, purpose: 'chat', estimate: 261_000n })
    expect(lost.ok ? 'admitted' : lost.error.code).toBe('unavailable')
    expect(await served.leasedRows(small.orgId)).toBe(50_000_000n) // committed all the same

    await returnedAndServed(app, principal, small.orgId)
  }, 20_000)

  test('a grant the server runs only after the client gave up on it is returned at the tick after it ran', async () => {
    const { app, database } = await served.appOnServer()
    const small = await app.createOrg('small', 50_000_000n)
    const principal = await adminPrincipal(app, small)
    const late = database.runLate(prepaidGrant)
    const lost = await app.deps.ledger.admit({ principal, purpose: 'chat', estimate: 261_000n })
    expect(lost.ok ? 'admitted' : lost.error.code).toBe('unavailable')
    await app.deps.sweeper.tick()
    expect(await served.leasedRows(small.orgId)).toBe(0n) // not run yet

    await late.release()
    expect(await served.leasedRows(small.orgId)).toBe(50_000_000n)
    await returnedAndServed(app, principal, small.orgId)
  }, 20_000)

  test('a return of an unknown row that the server runs late leaves the row made again since, same amount, same millisecond', async () => {
    const { app, database } = await served.appOnServer()
    const small = await app.createOrg('small', 50_000_000n) // one grant takes it all: every grant has the same amount
    const principal = await adminPrincipal(app, small)
    database.loseReply(prepaidGrant)
    expect((await app.deps.ledger.admit({ principal, purpose: 'chat', estimate: 261_000n })).ok).toBe(false)
    // The tick's return of the unknown row is held by the server; the next tick's goes through.
    const late = database.runLate(body => body.includes('DELETE FROM leases WHERE id = ?'))
    await app.deps.sweeper.tick()
    expect(await served.leasedRows(small.orgId)).toBe(50_000_000n)
    await app.deps.sweeper.tick()
    expect(await served.leasedRows(small.orgId)).toBe(0n)

    // The organization's next call leases again: the same amount, at the same (fake) millisecond,
    // into a row of a new id (the pool moved to it when the tick sent its DELETE). Then the server
    // runs the first return: it takes only the row it was sent for. (Guarded by the row as read, by
    // amount and time, it once matched the new row, which went while memory held its lease, and
    // another instance could then lease and spend the same money.)
    const held = await admitOk(app, principal, 261_000n)
    const pool = app.deps.ledger.pools.all().find(candidate => candidate.ref.orgId === small.orgId && candidate.ref.scope === 'prepaid')!
    expect([pool.leased, pool.leaseRow, await served.leasedRows(small.orgId)]).toEqual([50_000_000n, true, 50_000_000n])
    await late.release()
    expect(await served.leasedRows(small.orgId)).toBe(50_000_000n)
    await app.deps.ledger.settle(held, 261_000n)
    expect([pool.leased, await served.leasedRows(small.orgId)]).toEqual([50_000_000n - 261_000n, 50_000_000n - 261_000n])
    await verifyClean(app)
  }, 20_000)
})

describe('on a ledger whose writer loses replies', () => {
  let executor: LostReplyExecutor
  let ledger: Ledger
  let sweeper: Sweeper

  async function lossyLedger(ambiguousCommits = true): Promise<TestApp> {
    const app = (served.app = await buildPaygApp())
    executor = new LostReplyExecutor(new ClientExecutor(app.deps.database.client), ambiguousCommits)
    const own = await ledgerOver(app, executor, 'lost-grant-test')
    served.others.push(own.sweeper)
    ;({ ledger, sweeper } = own)
    return app
  }
  // A grant's UPDATE (a grant onto a row the pool knows has no INSERT).
  const grantOf = (orgId: string) => (statements: readonly Statement[]) =>
    statements.some(statement => statement.sql.includes('UPDATE leases SET amount_nanos = amount_nanos +') && statement.args.some(arg => String(arg).includes(`|prepaid|${orgId}|0|`)))
  const poolOf = (orgId: string) => ledger.pools.all().find(pool => pool.ref.scope === 'prepaid' && pool.ref.orgId === orgId)
  async function admitted(principal: Principal, estimate: bigint) {
    const result = await ledger.admit({ principal, purpose: 'chat', estimate })
    if (!result.ok) throw new Error(result.error.message)
    return result.reservation
  }

  test('rows memory knows are left alone, held or not; only the unknown one goes back', async () => {
    const app = await lossyLedger()
    const held = await app.createOrg('held', 10n * USD)
    const idle = await app.createOrg('idle', 10n * USD)
    const lost = await app.createOrg('lost', 10n * USD)
    const holding = await admitted(await adminPrincipal(app, held), 10_000_000n)
    await ledger.settle(await admitted(await adminPrincipal(app, idle), 10_000_000n), 10_000_000n)
    executor.lose = grantOf(lost.orgId)
    expect((await ledger.admit({ principal: await adminPrincipal(app, lost), purpose: 'chat', estimate: 10_000_000n })).ok).toBe(false)
    expect([await served.leasedRows(held.orgId), await served.leasedRows(idle.orgId), await served.leasedRows(lost.orgId)]).toEqual([100_000_000n, 90_000_000n, 100_000_000n])

    await sweeper.tick()
    expect([await served.leasedRows(held.orgId), await served.leasedRows(idle.orgId), await served.leasedRows(lost.orgId)]).toEqual([100_000_000n, 90_000_000n, 0n])
    expect([poolOf(held.orgId)!.leased, poolOf(held.orgId)!.held, poolOf(idle.orgId)!.leased]).toEqual([100_000_000n, 10_000_000n, 90_000_000n])
    await ledger.settle(holding, 10_000_000n)
    expect(await served.leasedRows(held.orgId)).toBe(90_000_000n)
    await verifyClean(app)
  })

  // The tick reads the ids of this boot's rows with its heartbeat, then those memory has no record of whole.
  const heartbeatRead = (statement: Statement) => statement.sql.startsWith('SELECT id FROM leases WHERE instance_id = ? AND boot_id = ?')
  const unknownRowsRead = (statement: Statement) => statement.sql.startsWith('SELECT') && statement.sql.includes('json_each')

  test.each([
    ['its heartbeat reads the ids', heartbeatRead],
    ['it reads the unknown rows whole', unknownRowsRead],
  ])('a grant queued when the tick reads the rows (%s): its row is not deleted from under it', async (_when, read) => {
    const app = await lossyLedger()
    const org = await app.createOrg('acme', 10n * USD)
    const principal = await adminPrincipal(app, org)
    executor.lose = grantOf(org.orgId)
    expect((await ledger.admit({ principal, purpose: 'chat', estimate: 10_000_000n })).ok).toBe(false)
    expect(await served.leasedRows(org.orgId)).toBe(100_000_000n) // unknown to the pool

    // The next admission grows the same pool while the tick reads this boot's rows.
    let racing: ReturnType<Ledger['admit']> | undefined
    executor.after = statements => {
      if (racing === undefined && statements.some(read)) racing = ledger.admit({ principal, purpose: 'chat', estimate: 10_000_000n })
    }
    await sweeper.tick()
    const result = await racing!
    if (!result.ok) throw new Error(result.error.message)
    // The grant added to the row it found; the pool knows its own grant, the row holds both.
    expect(poolOf(org.orgId)!.leased).toBe(100_000_000n)
    expect(await served.leasedRows(org.orgId)).toBe(200_000_000n)
    await ledger.settle(result.reservation, 10_000_000n)
    expect(await served.leasedRows(org.orgId)).toBe(190_000_000n)

    // What memory does not know stays in the row until the pool's idle return deletes it whole.
    await sweeper.tick()
    expect(await served.leasedRows(org.orgId)).toBe(190_000_000n)
    app.clock.advance(IDLE_RETURN_MS + 1)
    await sweeper.tick()
    expect(await served.leasedRows(org.orgId)).toBe(0n)
    expect(await leasedTotal(org.orgId)).toBe(0n)
    expect(await prepaidOf(app, org.orgId)).toBe(10n * USD - 10_000_000n)
    await verifyClean(app)
  })

  test('on a local file, a return in flight when the tick reads the rows, which then fails: the row stays what the restored pool holds', async () => {
    const app = await lossyLedger(false) // a failed write never committed: the return puts the lease back
    const org = await app.createOrg('acme', 10n * USD)
    await ledger.settle(await admitted(await adminPrincipal(app, org), 10_000_000n), 10_000_000n)
    const pool = poolOf(org.orgId)!
    executor.refuse = statements => statements.some(statement => statement.sql.startsWith('DELETE FROM leases'))
    let returning: Promise<unknown> | undefined
    executor.after = statements => {
      if (returning === undefined && statements.some(heartbeatRead)) returning = ledger.returnLease(pool).catch(error => error)
    }
    await sweeper.tick()
    expect(String(await returning)).toContain('nothing committed')
    executor.refuse = undefined
    // The failed return put the lease back in memory; the tick left the row to it.
    expect([pool.leased, pool.leaseRow, await served.leasedRows(org.orgId)]).toEqual([90_000_000n, true, 90_000_000n])
    await verifyClean(app)
  })

  test('a heartbeat reads only the ids of this boot\'s rows, by index; rows are read whole only when memory has no record of some', async () => {
    const app = await lossyLedger()
    const other = await app.createOrg('other', 10n * USD) // a lease of another instance, in the same table
    await app.deps.ledger.settle(await admitOk(app, await adminPrincipal(app, other), 10_000_000n), 10_000_000n)
    const known = await app.createOrg('known', 10n * USD)
    await ledger.settle(await admitted(await adminPrincipal(app, known), 10_000_000n), 10_000_000n)
    const reads: Statement[] = []
    // This boot's rows, not the stale sweep's read of other instances' leases.
    const ownRead = (statement: Statement) => statement.sql.startsWith('SELECT') && statement.sql.includes('FROM leases') && !statement.sql.includes('FROM instances')
    executor.after = statements => void reads.push(...statements.filter(ownRead))
    const plans = () => Promise.all(reads.map(async read => (await app.deps.database.client.execute({ sql: `EXPLAIN QUERY PLAN ${read.sql}`, args: [...read.args] })).rows.map(row => String(row.detail)).join('; ')))

    await sweeper.tick()
    expect(reads.map(read => read.sql)).toEqual(['SELECT id FROM leases WHERE instance_id = ? AND boot_id = ?'])
    expect(await plans()).toEqual(['SEARCH leases USING INDEX leases_instance (instance_id=? AND boot_id=?)']) // was: SCAN leases, every column
    reads.length = 0
    const lost = await app.createOrg('lost', 10n * USD)
    executor.lose = grantOf(lost.orgId)
    expect((await ledger.admit({ principal: await adminPrincipal(app, lost), purpose: 'chat', estimate: 10_000_000n })).ok).toBe(false)
    await sweeper.tick()
    expect(reads).toHaveLength(2) // the ids, then the one row memory has no record of, whole
    for (const plan of await plans()) expect(plan).not.toMatch(/SCAN leases/)
    expect(await served.leasedRows(lost.orgId)).toBe(0n)
    await verifyClean(app)
  })

  test("a grant onto a row the pool knows, its reply lost: the surplus stays in the row until the pool's idle return", async () => {
    const app = await lossyLedger()
    const org = await app.createOrg('acme', 10n * USD)
    const principal = await adminPrincipal(app, org)
    await ledger.settle(await admitted(principal, 10_000_000n), 10_000_000n)
    executor.lose = grantOf(org.orgId)
    expect((await ledger.admit({ principal, purpose: 'chat', estimate: 500_000_000n })).ok).toBe(false)
    expect([poolOf(org.orgId)!.leased, await served.leasedRows(org.orgId)]).toEqual([90_000_000n, 4_090_000_000n])

    await sweeper.tick()
    expect(await served.leasedRows(org.orgId)).toBe(4_090_000_000n) // a row this boot knows: not returned under it
    app.clock.advance(IDLE_RETURN_MS + 1)
    await sweeper.tick()
    expect(await served.leasedRows(org.orgId)).toBe(0n)
    expect(await leasedTotal(org.orgId)).toBe(0n)
    expect(await prepaidOf(app, org.orgId)).toBe(10n * USD - 10_000_000n)
    await verifyClean(app)
  })

  test('a grant whose reply was lost, its pool forgotten as idle since: shutdown returns the row', async () => {
    const app = await lossyLedger()
    const org = await app.createOrg('acme', 10n * USD)
    executor.lose = grantOf(org.orgId)
    expect((await ledger.admit({ principal: await adminPrincipal(app, org), purpose: 'chat', estimate: 10_000_000n })).ok).toBe(false)
    for (const pool of ledger.pools.all()) await ledger.returnLease(pool) // no row known: only forgotten
    expect(poolOf(org.orgId)).toBeUndefined()
    await sweeper.stop()
    expect(await served.leasedRows(org.orgId)).toBe(0n)
    expect(await scalar(app.deps.database.client, "SELECT COUNT(*) FROM instances WHERE instance_id = 'lost-grant-test'")).toBe(0n)
    await verifyClean(app)
  })
})
