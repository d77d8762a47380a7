import { expect, test } from 'bun:test'
import { ClientExecutor } from '../../src/billing/executor'
import { type TestApp } from '../support/harness'
import { USD, adminPrincipal, admitOk, ledgerOver, prepaidOf, scalar, verifyClean } from './fixtures'
import { Served, anyCommit, prepaidPool } from './served'

// A settlement that could not be confirmed (its every try refused by a libSQL server) draws on its
// pool's lease row by id, and each tick submits it again. Another instance took this one for dead
// and swept that row; before this one's heartbeat said so (or with the heartbeat blind to it: the
// pool drawn to 0, or a grant in flight), a grant made the row again under the same id. The tick's
// confirmation then drew from the new row, which memory believed whole: the organization ended at
// -0.01 USD and `svc ledger verify` saw nothing. A grant now never makes a row memory knew: it
// finds it gone, and the pool moves to a new id before leasing again.

const served = new Served('svc-swept-row-')

const settlement = (body: string) => body.includes('MAX(0, amount_nanos - ?2)')
const rowOf = (app: TestApp, id: string) => scalar(app.deps.database.client, 'SELECT COUNT(*) FROM leases WHERE id = ?', [id])

/**
 * An app on a server, an organization with 10 USD, a settlement of `amount` (at least 0.01 USD)
 * left unconfirmed, and another instance whose sweep then returned this one's lease.
 */
async function sweptUnderUnconfirmed(amount?: (leased: bigint) => bigint) {
  const { app, database } = await served.appOnServer()
  const org = await app.createOrg('acme', 10n * USD)
  const principal = await adminPrincipal(app, org)
  const first = await admitOk(app, principal, 10_000_000n)
  const charge = amount?.(prepaidPool(app, org.orgId)!.leased) ?? 10_000_000n
  database.refuse(settlement)
  await expect(app.deps.ledger.settle(first, charge)).rejects.toThrow('could not confirm')
  expect(app.deps.ledger.unconfirmed.size).toBe(1)
  const oldId = prepaidPool(app, org.orgId)!.ref.id

  const other = await ledgerOver(app, new ClientExecutor(app.deps.database.client), 'other')
  served.others.push(other.sweeper)
  app.clock.advance(app.deps.config.ledger.instanceStaleAfterMs + 1)
  await other.sweeper.tick()
  expect(await served.leasedRows(org.orgId)).toBe(0n)
  await anyCommit(app) // the refused tries marked the database down
  return { app, database, org, principal, oldId, charge, other }
}

/** The tick confirms the settlement; then this instance's row holds what memory does, and everything left can be spent, no more. */
async function confirmedAndSpent({ app, database, org, principal, oldId, charge, other }: Awaited<ReturnType<typeof sweptUnderUnconfirmed>>, open: Awaited<ReturnType<typeof admitOk>>) {
  const pool = prepaidPool(app, org.orgId)!
  expect([pool.ref.id === oldId, await rowOf(app, oldId)]).toEqual([false, 0n]) // was: the same id, made again
  database.refuse(undefined)
  await app.deps.sweeper.tick()
  expect(app.deps.ledger.unconfirmed.size).toBe(0)
  expect(await served.leasedRows(org.orgId)).toBe(pool.leased) // was: 0.01 USD less than memory

  // Both instances spend all they can: the other what the database shows free, this one its lease.
  const free = 10n * USD - charge - (await served.leasedRows(org.orgId))
  const theirs = await other.ledger.admit({ principal, purpose: 'chat', estimate: free })
  if (!theirs.ok) throw theirs.error
  await other.ledger.settle(theirs.reservation, free)
  await app.deps.ledger.settle(open, pool.leased)
  expect(await prepaidOf(app, org.orgId)).toBe(0n) // was: -0.01 USD
  await verifyClean(app)
}

test('a grant after a sweep, before the heartbeat, leases into a new row: the unconfirmed draw on the old id finds nothing', async () => {
  const swept = await sweptUnderUnconfirmed()
  // Memory still holds 0.09 USD of the swept row: this admission grows the pool.
  const open = await admitOk(swept.app, swept.principal, 95_000_000n)
  await confirmedAndSpent(swept, open)
}, 20_000)

test('a pool drawn to 0, which the heartbeat does not look at, leases into a new row after a sweep', async () => {
  const swept = await sweptUnderUnconfirmed(leased => leased) // the whole lease: memory holds 0
  await swept.app.deps.sweeper.heartbeat()
  const open = await admitOk(swept.app, swept.principal, 10_000_000n)
  await confirmedAndSpent(swept, open)
}, 20_000)

test('a heartbeat that finds the row swept while a grant is in flight: that grant leases into a new row', async () => {
  const swept = await sweptUnderUnconfirmed()
  const { app, principal } = swept
  app.deps.ledger.release(await admitOk(app, principal, 1_000_000n)) // asks for allowance now (none): the next admission grows prepaid at once
  // Both queued in one turn: the heartbeat sees the row gone while the grant is in flight (no
  // renewal then), and the grant runs after it in the same batch.
  const beat = app.deps.sweeper.heartbeat()
  const admission = admitOk(app, principal, 95_000_000n)
  expect(prepaidPool(app, swept.org.orgId)!.growing).not.toBeNull()
  await beat
  await confirmedAndSpent(swept, await admission)
}, 20_000)
