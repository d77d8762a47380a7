import { expect, test } from 'bun:test'
import { ClientExecutor } from '../../src/billing/executor'
import { IDLE_RETURN_MS } from '../../src/billing/sweeper'
import { type TestApp } from '../support/harness'
import { hranaServer } from '../support/hrana-server'
import { admit, adminPrincipal, admitOk, countEntries, expectInsufficientQuota, ledgerOver, prepaidOf, scalar, verifyClean } from './fixtures'
import { Served, anyCommit, prepaidPool, poolReturn } from './served'

// A settlement whose every try failed on a libSQL server ("could not confirm"; memory keeps its
// draw out), the first of which the server runs only later. Its lease row went back whole
// meanwhile (the pool's idle return, another instance's sweep) and the pool leased again. Under one
// id per pool, the late draw took from the row made since, which memory believed whole (QA: 0.10
// USD in memory, 0.09 in the row), and a return run late could take that row: each row a pool
// makes now has an id of its own. And the late charge took from prepaid money the new row leased
// (the organization ended at -0.01 USD): the pool now keeps its lease until a tick confirms the
// settlement, after which a try run late changes nothing.

const served = new Served('svc-late-draw-')

// A settlement's statements (its lease draw among them); a pool's own return.
const settlement = (body: string) => body.includes('MAX(0, amount_nanos - ?2)')

/**
 * Settles 0.01 USD of `reservation` with its first try held by the server (the handle) and every
 * further try refused until the caller calls `database.refuse(undefined)`: the ledger's retries,
 * and the tick's (the settlement stays unconfirmed).
 */
async function unconfirmedSettlement(app: TestApp, database: ReturnType<typeof hranaServer>, reservation: Awaited<ReturnType<typeof admitOk>>) {
  const late = database.runLate(settlement)
  let tries = 0
  database.refuse(body => settlement(body) && ++tries > 1)
  await expect(app.deps.ledger.settle(reservation, 10_000_000n)).rejects.toThrow('could not confirm')
  await anyCommit(app)
  return late
}

test("a settlement that could not be confirmed keeps its pool's lease until a tick confirms it; the try run late then charges nothing", async () => {
  const { app, database } = await served.appOnServer()
  const org = await app.createOrg('small', 100_000_000n) // 0.1 USD: one grant takes it all
  const principal = await adminPrincipal(app, org)
  const late = await unconfirmedSettlement(app, database, await admitOk(app, principal, 10_000_000n))
  expect(prepaidPool(app, org.orgId)!.leased).toBe(90_000_000n) // the draw stays out of memory

  // Idle, but the settlement is not confirmed: its lease stays. Returned whole (0.1 USD), the
  // settlement run late then took 0.01 USD from prepaid with no lease under it, while the next
  // grant leased all 0.1 again: the organization ended at -0.01 USD.
  app.clock.advance(IDLE_RETURN_MS + 1)
  await app.deps.sweeper.tick()
  expect([await served.leasedRows(org.orgId), await prepaidOf(app, org.orgId)]).toEqual([100_000_000n, 100_000_000n]) // was: 0, returned
  database.refuse(undefined)
  await app.deps.sweeper.tick() // confirms it (charged, drawn from its row), then returns the rest
  expect([await served.leasedRows(org.orgId), await prepaidOf(app, org.orgId)]).toEqual([0n, 90_000_000n])

  const held = await admitOk(app, principal, 10_000_000n)
  expect([prepaidPool(app, org.orgId)!.leased, await served.leasedRows(org.orgId)]).toEqual([90_000_000n, 90_000_000n])
  await late.release() // the first try runs now: its claim is taken, it changes nothing
  expect(await countEntries(app, "kind = 'settle'")).toBe(1n)
  expect([await prepaidOf(app, org.orgId), await served.leasedRows(org.orgId)]).toEqual([90_000_000n, 90_000_000n])

  // All that is left can be spent, and no more.
  await app.deps.ledger.settle(held, 10_000_000n)
  await app.deps.ledger.settle(await admitOk(app, principal, 80_000_000n), 80_000_000n)
  expectInsufficientQuota(await admit(app, principal, 1_000_000n))
  expect(await prepaidOf(app, org.orgId)).toBe(0n) // was: -0.01 USD
  await verifyClean(app)
}, 20_000)

test("a settlement's first try and the pool's return both run late, after the pool leased again: the new row stays whole", async () => {
  const { app, database } = await served.appOnServer()
  const org = await app.createOrg('acme', 10n * 1_000_000_000n)
  const principal = await adminPrincipal(app, org)
  const lateDraw = await unconfirmedSettlement(app, database, await admitOk(app, principal, 10_000_000n))
  database.refuse(undefined)

  // The tick confirms the settlement; the idle return's DELETE after it is held: memory keeps no
  // lease, the row stays.
  app.clock.advance(IDLE_RETURN_MS + 1)
  const lateReturn = database.runLate(poolReturn)
  await expect(app.deps.sweeper.tick()).rejects.toThrow('did not answer')
  await anyCommit(app)
  const held = await admitOk(app, principal, 10_000_000n)
  const pool = prepaidPool(app, org.orgId)!
  const leased = pool.leased
  expect([pool.leaseRow, leased > 0n]).toEqual([true, true])
  await lateDraw.release()
  await lateReturn.release()
  // The DELETE took the row it was sent for. Before, the late draw wrote an older stamp on the new
  // row, which that DELETE's guard (updated_at_ms <= its stamp) then matched.
  expect(await served.leasedRows(org.orgId)).toBe(leased) // was: 0
  expect(await countEntries(app, "kind = 'settle'")).toBe(1n)
  await app.deps.ledger.settle(held, 10_000_000n)
  expect(await served.leasedRows(org.orgId)).toBe(leased - 10_000_000n)
}, 20_000)

test('a settlement run late, after another instance swept the lease and the pool leased again, draws nothing from the new row', async () => {
  const { app, database } = await served.appOnServer()
  const org = await app.createOrg('small', 100_000_000n)
  const principal = await adminPrincipal(app, org)
  const late = await unconfirmedSettlement(app, database, await admitOk(app, principal, 10_000_000n))
  const open = await admitOk(app, principal, 1_000_000n) // a call in flight: the pool is not idle

  // This instance looks stale to another, which returns its lease; its next heartbeat finds it gone
  // (the settlement still cannot be confirmed).
  const other = await ledgerOver(app, new ClientExecutor(app.deps.database.client), 'other')
  served.others.push(other.sweeper)
  app.clock.advance(app.deps.config.ledger.instanceStaleAfterMs + 1)
  await other.sweeper.tick()
  expect(await served.leasedRows(org.orgId)).toBe(0n)
  await app.deps.sweeper.tick()
  expect(prepaidPool(app, org.orgId)!.leased).toBe(0n)
  await anyCommit(app) // the tick's refused try marked the database down

  // The same pool leases again (a call holds on it), into a row of a new id.
  await admitOk(app, principal, 10_000_000n)
  expect([prepaidPool(app, org.orgId)!.leased, await served.leasedRows(org.orgId)]).toEqual([100_000_000n, 100_000_000n])
  await late.release()
  expect(await prepaidOf(app, org.orgId)).toBe(90_000_000n) // charged: a lost lease's call is (README)
  expect(await served.leasedRows(org.orgId)).toBe(100_000_000n) // was: 0.09 USD, below what memory holds
  // The next tick confirms it: that try finds the late one's claim and charges nothing again.
  database.refuse(undefined)
  await app.deps.sweeper.tick()
  expect([await countEntries(app, "kind = 'settle'"), await prepaidOf(app, org.orgId), await served.leasedRows(org.orgId)]).toEqual([1n, 90_000_000n, 100_000_000n])
  app.deps.ledger.release(open)
}, 20_000)

// A lease row's updated_at_ms is its last activity. A try run late carries the time it was built
// at, older than writes of the row made since: the row's stamp never goes back for it.

const stampOf = (leaseId: string) => scalar(served.app!.deps.database.client, 'SELECT updated_at_ms FROM leases WHERE id = ?', [leaseId])

test("a settlement's first try run late, after later writes of its row, leaves the row's stamp moving on", async () => {
  const { app, database } = await served.appOnServer()
  const org = await app.createOrg('acme', 10n * 1_000_000_000n)
  const principal = await adminPrincipal(app, org)
  const late = await unconfirmedSettlement(app, database, await admitOk(app, principal, 10_000_000n))
  database.refuse(undefined)
  const pool = prepaidPool(app, org.orgId)!

  app.clock.advance(1_000)
  await app.deps.ledger.settle(await admitOk(app, principal, 10_000_000n), 10_000_000n)
  const stamp = await stampOf(pool.ref.id)
  await late.release() // built a second earlier
  expect(await stampOf(pool.ref.id)).toBe(stamp + 1n) // was: the older time, a second back
  expect(await served.leasedRows(org.orgId)).toBe(pool.leased) // the draw memory kept out, now taken
  await app.deps.sweeper.tick() // confirms it: charged once
  expect(await countEntries(app, "kind = 'settle'")).toBe(2n)
  await verifyClean(app)
}, 20_000)
