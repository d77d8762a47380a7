import { afterEach, expect, test } from 'bun:test'
import { ClientExecutor } from '../../src/billing/executor'
import type { Ledger } from '../../src/billing/ledger'
import { IDLE_RETURN_MS, type Sweeper } from '../../src/billing/sweeper'
import { forgetStaleInstances } from '../../src/billing/ledger-ops'
import { verifyLedger } from '../../src/billing/verify'
import type { Principal } from '../../src/keys/principal'
import type { TestApp } from '../support/harness'
import { USD, adminPrincipal, buildPaygApp, ledgerOver, scalar, verifyClean } from './fixtures'

// Instance rows (ARCHITECTURE.md §7.5) are forgotten once their leases are back: a clean stop
// forgets its own, the sweep the stale ones. Before (QA), every fresh instance id (a second
// process on a local file, an overlapping restart, pod names as SVC_INSTANCE_ID) left its row
// for good, and every 5 s sweep scanned them all. A row that still has a lease is kept, so the
// sweep keeps finding that lease.

let t: TestApp
let principal: Principal
const others: Array<{ sweeper: Sweeper }> = []
afterEach(async () => {
  for (const other of others.splice(0)) await other.sweeper.stop()
  await t?.close()
})

const instanceRows = (instanceId: string) => scalar(t.deps.database.client, 'SELECT COUNT(*) FROM instances WHERE instance_id = ?', [instanceId])
const leaseRows = (instanceId: string) => scalar(t.deps.database.client, 'SELECT COUNT(*) FROM leases WHERE instance_id = ?', [instanceId])

/** A second instance on the app's database, as another process on the same file would be. */
async function otherInstance(instanceId: string) {
  t = await buildPaygApp()
  principal = await adminPrincipal(t, await t.createOrg('acme', 10n * USD))
  const other = await ledgerOver(t, new ClientExecutor(t.deps.database.client), instanceId)
  others.push(other)
  return other
}

/** Admits `estimate` on `ledger` (taking a lease) and returns the open reservation. */
async function hold(ledger: Ledger, estimate: bigint) {
  const result = await ledger.admit({ principal, purpose: 'chat', estimate })
  if (!result.ok) throw new Error(`expected admission, got ${result.error.code}`)
  return result.reservation
}

/** Lets the other instance's heartbeat go stale, then runs the app's sweep. */
async function sweepAfterSilence() {
  t.clock.advance(t.deps.config.ledger.instanceStaleAfterMs + 1)
  await t.deps.sweeper.tick()
}

test('a clean stop returns its leases, then forgets its own row', async () => {
  const other = await otherInstance('ephemeral-b')
  await other.ledger.settle(await hold(other.ledger, 10_000_000n), 10_000_000n)
  expect([await leaseRows('ephemeral-b'), await instanceRows('ephemeral-b')]).toEqual([1n, 1n])
  await other.sweeper.stop()
  expect([await leaseRows('ephemeral-b'), await instanceRows('ephemeral-b')]).toEqual([0n, 0n])
  await verifyClean(t)
})

test('a lease drawn to zero is returned when idle, so a clean stop forgets its row (before: a 0-nano lease row and the instance row stayed)', async () => {
  const other = await otherInstance('drained-b')
  // One call takes the whole balance: the lease is drawn to 0 nanos, its row stays (with 0).
  await other.ledger.settle(await hold(other.ledger, 10n * USD), 10n * USD)
  expect(await leaseRows('drained-b')).toBe(1n)
  t.clock.advance(IDLE_RETURN_MS + 1)
  await other.sweeper.tick()
  expect(await leaseRows('drained-b')).toBe(0n)
  await other.sweeper.stop()
  expect([await leaseRows('drained-b'), await instanceRows('drained-b')]).toEqual([0n, 0n])
  // `svc ledger verify` once the stopped instance would be stale, with no sweep run since.
  const staleAfterMs = t.deps.config.ledger.instanceStaleAfterMs
  expect(await verifyLedger(t.deps.database.client, { nowMs: t.clock.now() + staleAfterMs + 1, staleAfterMs })).toEqual([])
  await verifyClean(t)
})

test('a clean stop returns a lease drawn to zero that is still in memory', async () => {
  const other = await otherInstance('drained-b')
  await other.ledger.settle(await hold(other.ledger, 10n * USD), 10n * USD)
  await other.sweeper.stop()
  expect([await leaseRows('drained-b'), await instanceRows('drained-b')]).toEqual([0n, 0n])
  await verifyClean(t)
})

test('a stop that leaves a lease keeps its row; the stale sweep returns the lease, then forgets the row', async () => {
  const other = await otherInstance('ephemeral-b')
  await hold(other.ledger, 10_000_000n) // a call that never ends: its lease is not returned at stop
  await other.sweeper.stop()
  expect([await leaseRows('ephemeral-b'), await instanceRows('ephemeral-b')]).toEqual([1n, 1n])
  // Forgetting stale instances before their leases are back leaves this one: its lease is still out.
  t.clock.advance(t.deps.config.ledger.instanceStaleAfterMs + 1)
  await t.deps.writer.submit({ kind: 'plain', statements: [forgetStaleInstances(t.clock.now())], interpret: () => undefined })
  expect(await instanceRows('ephemeral-b')).toBe(1n)
  await t.deps.sweeper.tick()
  expect([await leaseRows('ephemeral-b'), await instanceRows('ephemeral-b')]).toEqual([0n, 0n])
  expect(await instanceRows(t.deps.identity.instanceId)).toBe(1n) // the sweeping instance's own, live
  await verifyClean(t)
})

test('an instance forgotten while it held no lease gets its row back with its next lease, so the sweep still finds that lease', async () => {
  const other = await otherInstance('slow-b')
  // Silent past the staleness bound (paused, starved) with no lease: the sweep forgets it.
  await sweepAfterSilence()
  expect(await instanceRows('slow-b')).toBe(0n)
  // It goes on and leases before its next heartbeat, then dies.
  await hold(other.ledger, 10_000_000n)
  expect(await instanceRows('slow-b')).toBe(1n)
  await sweepAfterSilence()
  expect([await leaseRows('slow-b'), await instanceRows('slow-b')]).toEqual([0n, 0n])
  await verifyClean(t)
})
