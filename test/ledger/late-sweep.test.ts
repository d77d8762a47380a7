import { expect, test } from 'bun:test'
import { ClientExecutor } from '../../src/billing/executor'
import { buildTestApp } from '../support/harness'
import { PAYG_ONLY, adminPrincipal, admitOk, configWith, expectInsufficientQuota, ledgerOver, prepaidOf, verifyClean } from './fixtures'
import { Served } from './served'

// Another instance's stale sweep deleted this boot's lease rows by id alone. A libSQL server that
// runs that DELETE late, after this instance beat again (its rows still there, its lease trusted
// anew), took a lease memory spends from, and both instances spent the same money. The sweep's
// DELETE now takes a lease only while its boot is still stale when the DELETE runs.

const served = new Served('svc-late-sweep-')

// The only lease DELETE of the other instance's tick: its sweep of this instance's lease.
const leaseDelete = (body: string) => body.includes('DELETE FROM leases WHERE id = ?')

test("a stale sweep's DELETE that the server runs after the instance beat again leaves its lease", async () => {
  const { app, database: server } = await served.appOnServer()
  const org = await app.createOrg('small', 100_000_000n) // 0.1 USD: one grant takes it all
  const principal = await adminPrincipal(app, org)
  await app.deps.ledger.settle(await admitOk(app, principal, 10_000_000n), 10_000_000n)
  const open = await admitOk(app, principal, 1_000_000n) // a call in flight: the lease is not idle

  const other = await ledgerOver(app, new ClientExecutor(app.deps.database.client), 'other')
  served.others.push(other.sweeper)
  // This instance looks stale to the other (a pause longer than instance_stale_after); the
  // other's sweep of its lease is held by the server.
  app.clock.advance(app.deps.config.ledger.instanceStaleAfterMs + 1)
  const late = server.runLate(leaseDelete)
  await expect(other.sweeper.tick()).rejects.toThrow('did not answer')
  // This instance beats again: its row is there, its lease trusted anew.
  await app.deps.sweeper.tick()
  expect(await served.leasedRows(org.orgId)).toBe(90_000_000n)
  await late.release() // the sweep's DELETE runs now
  expect(await served.leasedRows(org.orgId)).toBe(90_000_000n) // was: 0, the lease of a live instance
  expect(other.sweeper.returned).toBe(0)

  // The money is this instance's alone: the other is refused, this one spends it all.
  const theirs = await other.ledger.admit({ principal, purpose: 'chat', estimate: 90_000_000n })
  expectInsufficientQuota(theirs) // was: admitted, and 0.09 USD spent by both
  await app.deps.ledger.settle(await admitOk(app, principal, 89_000_000n), 89_000_000n)
  await app.deps.ledger.settle(open, 1_000_000n)
  expect(await prepaidOf(app, org.orgId)).toBe(0n) // was: -0.09 USD
  await verifyClean(app)
}, 20_000)

test('a stale instance is still swept, and a restarted one still reclaims its earlier boot\'s lease', async () => {
  const app = (served.app = await buildTestApp({}, configWith({ plans: PAYG_ONLY })))
  const org = await app.createOrg('acme', 10n * 1_000_000_000n)
  const principal = await adminPrincipal(app, org)
  /** A ledger of its own instance that spent 0.01 USD of a 0.1 USD lease. */
  async function spending(instanceId: string) {
    const own = await ledgerOver(app, new ClientExecutor(app.deps.database.client), instanceId)
    served.others.push(own.sweeper)
    const result = await own.ledger.admit({ principal, purpose: 'chat', estimate: 10_000_000n })
    if (!result.ok) throw new Error(result.error.message)
    await own.ledger.settle(result.reservation, 10_000_000n)
    return own
  }
  await spending('stale')
  await spending('restarting')
  expect(await served.leasedRows(org.orgId)).toBe(180_000_000n)

  // The same instance boots again (its first boot never stopped): the earlier boot's lease goes back at once.
  const restarted = await ledgerOver(app, new ClientExecutor(app.deps.database.client), 'restarting')
  served.others.push(restarted.sweeper)
  expect([restarted.sweeper.returned, await served.leasedRows(org.orgId)]).toEqual([1, 90_000_000n])
  // The other goes stale: the app's sweep returns its lease.
  app.clock.advance(app.deps.config.ledger.instanceStaleAfterMs + 1)
  await restarted.sweeper.heartbeat()
  await app.deps.sweeper.tick()
  expect(await served.leasedRows(org.orgId)).toBe(0n)
  expect(await prepaidOf(app, org.orgId)).toBe(10n * 1_000_000_000n - 20_000_000n)
  await verifyClean(app)
})
