import { expect, test } from 'bun:test'
import { IDLE_RETURN_MS } from '../../src/billing/sweeper'
import { MAX_NANOS } from '../../src/lib/money'
import { type TestApp } from '../support/harness'
import { USD, adminPrincipal, admitOk, countEntries, prepaidOf, scalar, verifyClean } from './fixtures'
import { Served, anyCommit, prepaidPool } from './served'

// Settlements that could not be confirmed on a libSQL server (Ledger.unconfirmed) are submitted
// again at each tick, oldest first. One that can never commit (a value the database cannot take)
// once stood at the head for good: every settlement after it stayed pending, its organization
// never charged, its pool's lease never returned, and the shutdown failed.

const served = new Served('svc-unconfirmed-')

const settlement = (body: string) => body.includes('MAX(0, amount_nanos - ?2)')
const leasedOf = (app: TestApp, orgId: string) => scalar(app.deps.database.client, 'SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE org_id = ?', [orgId])

/** An organization's settlement of 0.01 USD whose every try the server refuses: unconfirmed. */
async function unconfirmedCharge(app: TestApp, database: NonNullable<Served['server']>) {
  const org = await app.createOrg('refused', 10n * USD)
  const reservation = await admitOk(app, await adminPrincipal(app, org), 10_000_000n)
  database.refuse(settlement)
  await expect(app.deps.ledger.settle(reservation, 10_000_000n)).rejects.toThrow('could not confirm')
  database.refuse(undefined)
  await anyCommit(app) // the refused tries marked the database down
  return org
}

/** Idle ticks: the unconfirmed settlement is confirmed (charged once), then every lease goes back and the stop is clean. */
async function confirmedAndReturned(app: TestApp, orgId: string) {
  app.clock.advance(IDLE_RETURN_MS + 1)
  await app.deps.sweeper.tick()
  expect([app.deps.ledger.unconfirmed.size, await countEntries(app, `kind = 'settle' AND org_id = '${orgId}'`), await leasedOf(app, orgId)]).toEqual([0, 1n, 0n])
  await verifyClean(app)
}

test('a settlement the database can never take is not recorded (nothing charged, its draw back), not left unconfirmed', async () => {
  const { app, database } = await served.appOnServer()
  const bad = await app.createOrg('bad', 10n * USD)
  const reservation = await admitOk(app, await adminPrincipal(app, bad), 10_000_000n)
  const leased = prepaidPool(app, bad.orgId)!.leased
  await expect(app.deps.ledger.settle(reservation, MAX_NANOS + 1n)).rejects.toThrow('could not record this charge; nothing was charged') // was: could not confirm
  expect([app.deps.ledger.unconfirmed.size, prepaidPool(app, bad.orgId)!.leased]).toEqual([0, leased])
  await anyCommit(app)

  const refused = await unconfirmedCharge(app, database)
  await confirmedAndReturned(app, refused.orgId) // was: both pending for good, the refused org's lease out
  expect([await prepaidOf(app, bad.orgId), await leasedOf(app, bad.orgId)]).toEqual([10n * USD, 0n])
  await app.deps.sweeper.stop() // was: "2 settlement(s) could not be confirmed"
}, 20_000)

test('a settlement that fails as data when confirmed is dropped, undone, and holds back none after it', async () => {
  const { app, database } = await served.appOnServer()
  // First in line: a settlement whose tries are data errors (a value past int64). A data error says
  // no try of it committed: it is dropped, its draws given back (`undone`).
  let undone = 0
  app.deps.ledger.unconfirmed.add({
    op: { kind: 'plain', statements: () => [{ sql: 'SELECT ?', args: [MAX_NANOS + 1n] }], interpret: () => ({ duplicate: false, keyExpired: false }) },
    pools: [], keyId: 'poison', requestId: undefined, undo: () => undone++,
  })
  const refused = await unconfirmedCharge(app, database)
  expect(app.deps.ledger.unconfirmed.size).toBe(2)
  app.clock.advance(IDLE_RETURN_MS + 1)
  await app.deps.sweeper.tick()
  // The one after it is recorded and its lease returned (was: pending behind the first); the first
  // is gone, undone once (was: pending for good, its leases out, every pass rejecting).
  expect([app.deps.ledger.unconfirmed.size, undone, await countEntries(app, `kind = 'settle' AND org_id = '${refused.orgId}'`), await leasedOf(app, refused.orgId)]).toEqual([0, 1, 1n, 0n])
  expect(await prepaidOf(app, refused.orgId)).toBe(10n * USD - 10_000_000n)
  await app.deps.sweeper.tick()
  expect(undone).toBe(1)
}, 20_000)

test('while too many settlements wait to be confirmed, billed calls are refused 503 until they drain', async () => {
  const { app, database } = await served.appOnServer()
  app.deps.ledger.unconfirmed.limit = 1
  const refused = await unconfirmedCharge(app, database)
  const principal = await adminPrincipal(app, refused)
  const result = await app.deps.ledger.admit({ principal, purpose: 'chat', estimate: 10_000_000n })
  expect(result.ok ? 'admitted' : [result.error.status, result.error.message]).toEqual([503, 'the ledger database is unavailable; nothing was charged, retry shortly']) // was: admitted
  await app.deps.sweeper.tick() // confirms it
  expect(app.deps.ledger.unconfirmed.size).toBe(0)
  app.deps.ledger.release(await admitOk(app, principal, 10_000_000n))
  await confirmedAndReturned(app, refused.orgId)
}, 20_000)
