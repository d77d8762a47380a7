import { afterEach, expect, test } from 'bun:test'
import { ClientExecutor } from '../../src/billing/executor'
import type { Ledger, Reservation } from '../../src/billing/ledger'
import type { Sweeper } from '../../src/billing/sweeper'
import { utcDay } from '../../src/lib/clock'
import type { Principal } from '../../src/keys/principal'
import { buildTestApp, type TestApp } from '../support/harness'
import { USD, adminPrincipal, admitOk, buildPaygApp, configWith, createCappedKey, expectInsufficientQuota, keySpentOf, ledgerOver, verifyClean } from './fixtures'

// An instance paused past instance_stale_after_s (SIGSTOP, a frozen VM) resumes to find its leases
// returned by another instance's sweep: its cut calls still settle, then it goes on serving. QA
// (SIGSTOP of one of two instances, then SIGCONT) found its pools' leased totals driven negative
// by those settlements, and 19 of 20 calls after it refused as "spent" though the organization
// had plenty; and a key's daily cap overshot by what the paused calls had reserved on it.

let t: TestApp
const others: Array<{ sweeper: Sweeper }> = []
afterEach(async () => {
  for (const other of others.splice(0)) await other.sweeper.stop()
  await t?.close()
})

const BASIC = { basic: { monthly_allowance: '1', fusion: false } }

async function instanceB() {
  const b = await ledgerOver(t, new ClientExecutor(t.deps.database.client), 'instance-b')
  others.push(b)
  return b
}

async function hold(ledger: Ledger, principal: Principal, estimate: bigint): Promise<Reservation> {
  const result = await ledger.admit({ principal, purpose: 'chat', estimate })
  if (!result.ok) throw new Error(`expected admission, got ${result.error.status} ${result.error.code}: ${result.error.message}`)
  return result.reservation
}

/** B falls silent past the staleness bound; A's sweep returns B's leases. */
async function pauseAndSweep() {
  t.clock.advance(t.deps.config.ledger.instanceStaleAfterMs + 1_000)
  await t.deps.sweeper.tick()
}

const leasedTotals = (ledger: Ledger) => ledger.pools.all().map(pool => pool.leased)

test('after its leases were swept, a paused instance settles its cut calls and admits new ones (before: its prepaid leased went negative, then calls were refused as spent)', async () => {
  t = await buildTestApp({}, configWith({ plans: BASIC }))
  const org = await t.createOrg('acme', 10n * USD)
  const principal = await adminPrincipal(t, org)
  const b = await instanceB()
  // B holds the whole allowance (1 USD) and 0.6 USD of a prepaid lease, on four calls.
  const cut = [await hold(b.ledger, principal, 400_000_000n), await hold(b.ledger, principal, 400_000_000n)]
  cut.push(await hold(b.ledger, principal, 400_000_000n), await hold(b.ledger, principal, 400_000_000n))
  await pauseAndSweep()
  // B resumes: its first settlement confirms the leases (LeaseTrust), finds them gone, and settles
  // on none of them: every cut call is charged in full to prepaid (the allowance pays only what
  // the boot still leases of it).
  for (const reservation of cut) {
    expect(await b.ledger.settle(reservation, 400_000_000n)).toBe(400_000_000n)
    for (const leased of leasedTotals(b.ledger)) expect(leased).toBeGreaterThanOrEqual(0n)
  }
  // New calls lease afresh, first the month's allowance (its free part now covers the estimate
  // alone, while prepaid's leased total must not count against it).
  const next: Reservation[] = []
  for (let call = 0; call < 4; call += 1) next.push(await hold(b.ledger, principal, 500_000_000n))
  for (const reservation of next) await b.ledger.settle(reservation, 500_000_000n)
  for (const leased of leasedTotals(b.ledger)) expect(leased).toBeGreaterThanOrEqual(0n)
  await b.sweeper.stop()
  await verifyClean(t)
})

test('holds on a lost prepaid lease do not block admission on the allowance (before: refused, the allowance free)', async () => {
  t = await buildTestApp({}, configWith({ plans: BASIC }))
  const org = await t.createOrg('acme', 600_000_000n)
  const principal = await adminPrincipal(t, org)
  const b = await instanceB()
  // B: one call on the whole allowance (1 USD), one on the whole prepaid balance (0.6 USD).
  const onAllowance = await hold(b.ledger, principal, USD)
  const onPrepaid = await hold(b.ledger, principal, 600_000_000n)
  await pauseAndSweep()
  // A leases all of the prepaid balance; the allowance it leased with it goes back.
  await t.deps.ledger.settle(await admitOk(t, principal, 1_600_000_000n), 0n)
  await t.deps.ledger.returnLease(t.deps.ledger.pools.all().find(pool => pool.ref.scope === 'allowance')!)
  await b.sweeper.tick() // B resumes: its leases are gone, 0.6 USD still held on its prepaid pool
  await b.ledger.settle(onAllowance, 0n)
  // The allowance alone covers 0.5 USD; prepaid's free part (-0.6 USD) does not count against it.
  const next = await hold(b.ledger, principal, 500_000_000n)
  expect(next.holds.prepaid).toBeNull()
  for (const reservation of [onPrepaid, next]) await b.ledger.settle(reservation, reservation.amount)
  for (const leased of leasedTotals(b.ledger)) expect(leased).toBeGreaterThanOrEqual(0n)
  await b.sweeper.stop()
  await verifyClean(t)
})

test('a call after large holds on a lost prepaid lease grows prepaid past them at once (before: by 0.1 USD a round, it ran out of rounds)', async () => {
  t = await buildPaygApp()
  const principal = await adminPrincipal(t, await t.createOrg('acme', 20n * USD))
  const b = await instanceB()
  const cut = await hold(b.ledger, principal, 8n * USD)
  await pauseAndSweep()
  await b.sweeper.tick() // B resumes: prepaid leased 0, 8 USD held on it
  const next = await hold(b.ledger, principal, 10_000_000n)
  for (const reservation of [cut, next]) await b.ledger.settle(reservation, reservation.amount)
  for (const leased of leasedTotals(b.ledger)) expect(leased).toBeGreaterThanOrEqual(0n)
  await b.sweeper.stop()
  await verifyClean(t)
})

test('an admission whose rounds run out is refused as retryable (held money), not as spent', async () => {
  t = await buildPaygApp()
  const org = await t.createOrg('acme', 10n * USD)
  const principal = await adminPrincipal(t, org)
  const key = await createCappedKey(t, org, 'daily', USD)
  const now = t.clock.now()
  // A growth forever in flight that never leaves room (calls admitted meanwhile taking each one's
  // grant, at its worst): every round waits on it and looks again.
  const prepaid = t.deps.ledger.pools.get('prepaid', org.orgId, null, 0, now)
  const keyPool = t.deps.ledger.pools.get('key_cap', org.orgId, key.keyId, utcDay(now).startMs, now)
  prepaid.growing = keyPool.growing = Promise.resolve()
  for (const [who, says] of [[principal, 'organization'], [key.principal, 'spend cap']] as const) {
    const error = expectInsufficientQuota(await t.deps.ledger.admit({ principal: who, purpose: 'chat', estimate: 100_000_000n }))
    expect(error.headers?.['x-should-retry']).toBe('true')
    expect(error.headers?.['retry-after']).toBe('2')
    expect(error.message).toContain(says)
  }
  prepaid.growing = keyPool.growing = null
  await t.deps.ledger.settle(await admitOk(t, key.principal, 100_000_000n), 0n)
  await verifyClean(t)
})

test("a paused instance's cut calls take its key past the cap by at most what they held on the key; the cap then refuses at once", async () => {
  t = await buildPaygApp()
  const org = await t.createOrg('acme', 10n * USD)
  const cap = 600_000_000n
  const key = await createCappedKey(t, org, 'daily', cap)
  const b = await instanceB()
  // B leases the whole cap and holds 0.3 USD of it on three calls.
  const cut = [await hold(b.ledger, key.principal, 100_000_000n), await hold(b.ledger, key.principal, 100_000_000n), await hold(b.ledger, key.principal, 100_000_000n)]
  const heldOnKey = cut.reduce((sum, reservation) => sum + (reservation.holds.key?.amount ?? 0n), 0n)
  await pauseAndSweep()
  // Meanwhile A spends the whole cap.
  await t.deps.ledger.settle(await admitOk(t, key.principal, cap), cap)
  // B resumes; its cut calls produced their whole reservations, and are charged for them.
  for (const reservation of cut) await b.ledger.settle(reservation, 100_000_000n)
  for (const leased of leasedTotals(b.ledger)) expect(leased).toBeGreaterThanOrEqual(0n)
  const spent = await keySpentOf(t, key.keyId, utcDay(t.clock.now()).startMs)
  expect(spent).toBe(cap + heldOnKey) // the documented bound, reached
  // Neither instance admits another call on the key: its cap is spent, not merely held.
  for (const ledger of [t.deps.ledger, b.ledger]) {
    const error = expectInsufficientQuota(await ledger.admit({ principal: key.principal, purpose: 'chat', estimate: 1_000_000n }))
    expect(error.headers?.['x-should-retry']).toBeUndefined()
    expect(error.message).toContain('after what it spent')
  }
  await b.sweeper.stop()
  await verifyClean(t)
})
