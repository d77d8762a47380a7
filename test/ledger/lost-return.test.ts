import { describe, expect, test } from 'bun:test'
import { ClientExecutor } from '../../src/billing/executor'
import { IDLE_RETURN_MS } from '../../src/billing/sweeper'
import { USD, LostReplyExecutor, admit, adminPrincipal, admitOk, buildPaygApp, expectInsufficientQuota, ledgerOver, prepaidOf, verifyClean } from './fixtures'
import { Served, anyCommit, prepaidPool, poolReturn } from './served'

// A pool's lease return (idle, shutdown) whose DELETE fails on a libSQL server: the DELETE may have
// committed, its reply lost, or the server may run it after the client gave up. Memory used to
// take the lease back at once, so for up to a heartbeat it held money whose row was gone, which
// another instance could lease and spend too. Now memory keeps neither lease nor row (the pool is
// rowUnknown), and the next tick returns whatever row is left. On a local file a failed DELETE
// never committed, and the lease is memory's again (lost-grant.test.ts).

const served = new Served('svc-lost-return-')



describe('over a libSQL server (Hrana over HTTP)', () => {

  test('an idle return that the server runs after the client gave up: memory keeps no lease, and nobody spends the money twice', async () => {
    const { app, database } = await served.appOnServer()
    const org = await app.createOrg('small', 100_000_000n) // 0.1 USD: one grant takes it all
    const principal = await adminPrincipal(app, org)
    await app.deps.ledger.settle(await admitOk(app, principal, 10_000_000n), 10_000_000n)
    const pool = prepaidPool(app, org.orgId)!
    expect([pool.leased, await served.leasedRows(org.orgId)]).toEqual([90_000_000n, 90_000_000n])

    app.clock.advance(IDLE_RETURN_MS + 1)
    const late = database.runLate(poolReturn)
    await expect(app.deps.sweeper.tick()).rejects.toThrow('did not answer')
    expect([pool.leased, pool.leaseRow]).toEqual([0n, false]) // was: 90_000_000n and a row memory believed in
    await late.release()
    expect(await served.leasedRows(org.orgId)).toBe(0n)

    // Another instance leases and spends the 0.09 USD; this one has none of it to spend.
    const other = await ledgerOver(app, new ClientExecutor(app.deps.database.client), 'other')
    served.others.push(other.sweeper)
    const theirs = await other.ledger.admit({ principal, purpose: 'chat', estimate: 90_000_000n })
    if (!theirs.ok) throw new Error(theirs.error.message)
    await other.ledger.settle(theirs.reservation, 90_000_000n)
    await anyCommit(app)
    expectInsufficientQuota(await admit(app, principal, 90_000_000n))
    expect(await prepaidOf(app, org.orgId)).toBe(0n) // was: -0.09 USD, spent twice
  }, 20_000)

  test("an idle return that the server runs after the pool's next grant leaves that grant's row", async () => {
    const { app, database } = await served.appOnServer()
    const org = await app.createOrg('acme', 10n * USD)
    const principal = await adminPrincipal(app, org)
    await app.deps.ledger.settle(await admitOk(app, principal, 10_000_000n), 10_000_000n)
    const pool = prepaidPool(app, org.orgId)!
    const before = pool.leased

    app.clock.advance(IDLE_RETURN_MS + 1)
    const late = database.runLate(poolReturn)
    await expect(app.deps.sweeper.tick()).rejects.toThrow('did not answer')
    await anyCommit(app)
    // The organization's next call leases afresh, into a row of its own (a new id): the row the
    // held DELETE is to take is still there beside it.
    const held = await admitOk(app, principal, 10_000_000n)
    const granted = pool.leased
    expect([pool.leaseRow, await served.leasedRows(org.orgId)]).toEqual([true, before + granted])
    // The DELETE runs now and takes the row it was sent for, not the one written since.
    await late.release()
    expect(await served.leasedRows(org.orgId)).toBe(granted)
    await app.deps.ledger.settle(held, 10_000_000n)
    app.clock.advance(IDLE_RETURN_MS + 1)
    await app.deps.sweeper.tick()
    expect(await served.leasedRows(org.orgId)).toBe(0n)
    expect(await prepaidOf(app, org.orgId)).toBe(10n * USD - 20_000_000n)
    await verifyClean(app)
  }, 20_000)
})

test('a return that fails on a libSQL server keeps nothing in memory; the next tick returns the row', async () => {
  const app = (served.app = await buildPaygApp())
  const executor = new LostReplyExecutor(new ClientExecutor(app.deps.database.client))
  const { ledger, sweeper } = await ledgerOver(app, executor, 'lost-return-test')
  served.others.push(sweeper)
  const org = await app.createOrg('acme', 10n * USD)
  const result = await ledger.admit({ principal: await adminPrincipal(app, org), purpose: 'chat', estimate: 10_000_000n })
  if (!result.ok) throw new Error(result.error.message)
  await ledger.settle(result.reservation, 10_000_000n)
  const pool = ledger.pools.all().find(candidate => candidate.ref.orgId === org.orgId)!
  const amount = pool.leased

  executor.refuse = statements => statements.some(statement => statement.sql.startsWith('DELETE FROM leases'))
  await expect(ledger.returnLease(pool)).rejects.toThrow('nothing committed')
  expect([pool.leased, pool.leaseRow, pool.rowUnknown, await served.leasedRows(org.orgId)]).toEqual([0n, false, true, amount])
  executor.refuse = undefined
  await sweeper.tick()
  expect(await served.leasedRows(org.orgId)).toBe(0n)
  await verifyClean(app)
})
