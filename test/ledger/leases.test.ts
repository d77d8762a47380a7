import { afterEach, describe, expect, test } from 'bun:test'
import { buildTestApp, type TestApp } from '../support/harness'
import {
  USD, adminPrincipal, admit, admitOk, buildPaygApp, configWith, createCappedKey, expectInsufficientQuota, prepaidOf, scalar, verifyClean,
} from './fixtures'

// Lease bookkeeping (ARCHITECTURE.md §7.2, §7.5): leases move funds into this boot; idle and
// shutdown return them; a return racing an admission must not strand money in a lease that
// nothing in the process can see any more.

let t: TestApp
afterEach(async () => {
  await t?.close()
})

const leasedPrepaid = (orgId: string) =>
  scalar(t.deps.database.client, 'SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?', [orgId])
const leaseRows = () => scalar(t.deps.database.client, 'SELECT COUNT(*) FROM leases')

describe('idle return', () => {
  test('a lease unused for 10 s goes back at the next sweep; the money stays the org’s throughout', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    const principal = await adminPrincipal(t, org)
    await t.deps.ledger.settle(await admitOk(t, principal, 10_000_000n), 10_000_000n)
    expect(await leasedPrepaid(org.orgId)).toBeGreaterThan(0n)
    t.clock.advance(9_000)
    await t.deps.sweeper.tick()
    expect(await leasedPrepaid(org.orgId)).toBeGreaterThan(0n) // not idle long enough yet
    t.clock.advance(1_001)
    await t.deps.sweeper.tick()
    expect(await leasedPrepaid(org.orgId)).toBe(0n)
    expect((await t.deps.balance(org.orgId)).availableNanos).toBe(10n * USD - 10_000_000n)
    // And it is admissible again, all of it.
    await t.deps.ledger.settle(await admitOk(t, principal, 10n * USD - 10_000_000n), 10n * USD - 10_000_000n)
    expect(await prepaidOf(t, org.orgId)).toBe(0n)
    await verifyClean(t)
  })

  test('a lease with an open hold is never returned, however old', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', USD)
    const reservation = await admitOk(t, await adminPrincipal(t, org), 10_000_000n)
    t.clock.advance(60_000)
    await t.deps.sweeper.tick()
    expect(await leasedPrepaid(org.orgId)).toBeGreaterThanOrEqual(10_000_000n)
    await t.deps.ledger.settle(reservation, 10_000_000n)
    await verifyClean(t)
  })

  test('shutdown returns every lease (deps.close)', async () => {
    t = await buildTestApp({}, configWith({ plans: { basic: { monthly_allowance: '1', fusion: false } } }))
    const org = await t.createOrg('acme', USD)
    const key = await createCappedKey(t, org, "daily", 2n * USD)
    await t.deps.ledger.settle(await admitOk(t, key.principal, 1_500_000_000n), 1_500_000_000n) // allowance + prepaid + key cap
    expect(await leaseRows()).toBe(3n)
    await t.deps.sweeper.stop()
    expect(await leaseRows()).toBe(0n)
    await verifyClean(t)
  })
})

test('shutdown right after a settlement was queued still returns every lease, after the settlement commits', async () => {
  t = await buildPaygApp()
  const org = await t.createOrg('acme', USD)
  const reservation = await admitOk(t, await adminPrincipal(t, org), 10_000_000n)
  const settling = t.deps.ledger.settle(reservation, 10_000_000n)
  await t.deps.sweeper.stop()
  await settling
  expect(await leaseRows()).toBe(0n)
  expect(await prepaidOf(t, org.orgId)).toBe(USD - 10_000_000n)
  await verifyClean(t)
})

describe('a lease return racing an admission', () => {
  test('money leased while the return was in flight stays usable (not stranded in a forgotten pool)', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 50_000_000n) // below the minimum lease: one lease takes it all
    const principal = await adminPrincipal(t, org)
    await t.deps.ledger.settle(await admitOk(t, principal, 10_000_000n), 10_000_000n)
    const pool = t.deps.ledger.pools.get('prepaid', org.orgId, null, 0, t.clock.now())
    expect(pool.leased).toBe(40_000_000n)

    // The idle sweep hands the lease back while a request arrives.
    const returning = t.deps.ledger.returnLease(pool)
    const racing = admit(t, principal, 10_000_000n)
    await returning
    const reservation = (await racing)
    if (!reservation.ok) throw new Error('the racing admission should have been funded')
    await t.deps.ledger.settle(reservation.reservation, 10_000_000n)
    expect(await prepaidOf(t, org.orgId)).toBe(30_000_000n)

    // 0.03 USD is left and shown as available, so it must be admissible: three more calls.
    t.clock.advance(1_001)
    for (let call = 0; call < 3; call += 1) await t.deps.ledger.settle(await admitOk(t, principal, 10_000_000n), 10_000_000n)
    t.clock.advance(1_001)
    expectInsufficientQuota(await admit(t, principal, 1n))
    expect(await prepaidOf(t, org.orgId)).toBe(0n)

    // Nothing stays leased after shutdown.
    await t.deps.sweeper.stop()
    expect(await leaseRows()).toBe(0n)
    await verifyClean(t)
  })

  test('an admission that was waiting on the allowance when the return began still leases into the live pool', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', USD)
    const principal = await adminPrincipal(t, org)
    await t.deps.ledger.settle(await admitOk(t, principal, 10_000_000n), 10_000_000n)
    const pool = t.deps.ledger.pools.get('prepaid', org.orgId, null, 0, t.clock.now())
    expect(pool.leased).toBe(90_000_000n) // a 0.10 USD lease less the 0.01 USD spent
    t.clock.advance(1_001) // the allowance's "empty" answer has expired: the admission asks the database again
    // More than the pool holds: the admission must look at the allowance, then grow prepaid.
    const racing = admit(t, principal, 95_000_000n)
    const returning = t.deps.ledger.returnLease(pool)
    await returning
    const result = await racing
    if (!result.ok) throw new Error(`the racing admission should have been funded: ${result.error.message}`)
    await t.deps.ledger.settle(result.reservation, 95_000_000n)
    const left = USD - 105_000_000n
    expect(await prepaidOf(t, org.orgId)).toBe(left)
    expect((await t.deps.balance(org.orgId)).availableNanos).toBe(left)
    // All of what is shown as available is admissible in one call.
    t.clock.advance(1_001)
    await t.deps.ledger.settle(await admitOk(t, principal, left), left)
    expect(await prepaidOf(t, org.orgId)).toBe(0n)
    await t.deps.sweeper.stop()
    expect(await leaseRows()).toBe(0n)
    await verifyClean(t)
  })

  test('a return racing a settlement whose billing key turns out to be a replay: no phantom lease, no over-admission', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 30_000_000n) // below the minimum lease: one lease takes it all
    const principal = await adminPrincipal(t, org)
    await t.deps.ledger.settle(await admitOk(t, principal, 10_000_000n, { billingKey: 'fusion-1:judge' }), 10_000_000n)
    const replay = await admitOk(t, principal, 10_000_000n, { billingKey: 'fusion-1:judge' })
    const pool = t.deps.ledger.pools.get('prepaid', org.orgId, null, 0, t.clock.now())

    // The replay's settlement (which will charge nothing) and an idle return of the same lease commit together.
    const settling = t.deps.ledger.settle(replay, 10_000_000n)
    const returning = t.deps.ledger.returnLease(pool)
    await Promise.all([settling, returning])
    expect(await prepaidOf(t, org.orgId)).toBe(20_000_000n)
    // What this process believes it has leased is what the database has leased to it.
    const live = t.deps.ledger.pools.get('prepaid', org.orgId, null, 0, t.clock.now())
    expect(live.leased).toBe(await leasedPrepaid(org.orgId))

    // 0.02 USD is left: two calls of 0.01 USD fit, a third must not.
    const results = await Promise.all(Array.from({ length: 4 }, () => admit(t, principal, 10_000_000n)))
    expect(results.filter(result => result.ok).length).toBe(2)
    for (const result of results) if (result.ok) await t.deps.ledger.settle(result.reservation, 10_000_000n)
    expect(await prepaidOf(t, org.orgId)).toBe(0n)
    await verifyClean(t)
  })
})

test("a lease row's stamp never goes back, even when the clock does (the writer's batched draws, a grant)", async () => {
  t = await buildPaygApp()
  const org = await t.createOrg('acme', 10n * USD)
  const principal = await adminPrincipal(t, org)
  const stamp = () => scalar(t.deps.database.client, 'SELECT updated_at_ms FROM leases WHERE org_id = ?', [org.orgId])
  await t.deps.ledger.settle(await admitOk(t, principal, 10_000_000n), 10_000_000n)
  const first = await stamp()
  t.clock.advance(-60_000) // a wall clock stepped back
  await t.deps.ledger.settle(await admitOk(t, principal, 10_000_000n), 10_000_000n)
  const second = await stamp()
  expect(second).toBeGreaterThan(first)
  await t.deps.ledger.settle(await admitOk(t, principal, 500_000_000n), 500_000_000n) // a grant tops the lease up, then a draw
  expect(await stamp()).toBeGreaterThan(second)
  await verifyClean(t)
})
