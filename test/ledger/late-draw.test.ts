import { afterEach, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ClientExecutor } from '../../src/billing/executor'
import { IDLE_RETURN_MS, type Sweeper } from '../../src/billing/sweeper'
import { openDatabase } from '../../src/db/client'
import { newId } from '../../src/lib/ids'
import { buildTestApp, type TestApp } from '../support/harness'
import { hranaServer } from '../support/hrana-server'
import { PAYG_ONLY, adminPrincipal, admitOk, configWith, ledgerOver, prepaidOf, scalar } from './fixtures'

// A settlement whose every try failed on a libSQL server ("could not confirm"; memory keeps its
// draw out), the first of which the server runs only later. Its lease row may meanwhile have gone
// (the pool's idle return, another instance's sweep) and the pool leased again. Under one id per
// pool, the late draw took from the row made since, which memory believed whole (QA: 0.10 USD in
// memory, 0.09 in the row), and a return run late could take that row. Each row a pool makes now
// has an id of its own.

let t: TestApp | undefined
let server: ReturnType<typeof hranaServer> | undefined
let directory: string | undefined
const others: Sweeper[] = []
afterEach(async () => {
  for (const sweeper of others.splice(0)) await sweeper.stop().catch(() => {})
  await t?.close()
  server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  t = server = directory = undefined
})

const leasedRows = (orgId: string) => scalar(t!.deps.database.client, "SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE org_id = ? AND scope = 'prepaid'", [orgId])
// A settlement's statements (its lease draw among them); a pool's own return.
const settlement = (body: string) => body.includes('MAX(0, amount_nanos - ?2)')
const poolReturn = (body: string) => body.includes('DELETE FROM leases WHERE id = ?') && !body.includes('amount_nanos = ?')

/** The whole app on a Hrana server, whose requests get 300 ms to be answered (DATABASE_TIMEOUT_S). */
async function appOnServer(): Promise<{ app: TestApp; database: ReturnType<typeof hranaServer> }> {
  directory = mkdtempSync(join(tmpdir(), 'svc-late-draw-'))
  server = hranaServer(join(directory, 'served.db'))
  const database = await openDatabase(server.url, undefined, { replyTimeoutMs: 300 })
  t = await buildTestApp({}, configWith({ plans: PAYG_ONLY }), { database, identity: { instanceId: 'served', bootId: newId() } })
  return { app: t, database: server }
}
/** Any committed write proves the database again (as the health probe would, a second later). */
const anyCommit = (app: TestApp) => app.deps.writer.submit({ kind: 'plain', statements: [{ sql: 'SELECT 1', args: [] }], interpret: () => undefined })
const prepaidPool = (app: TestApp, orgId: string) => app.deps.ledger.pools.all().find(pool => pool.ref.scope === 'prepaid' && pool.ref.orgId === orgId)

/** Settles 0.01 USD of `reservation` with its first try held by the server (the handle) and its retries refused. */
async function unconfirmedSettlement(app: TestApp, database: ReturnType<typeof hranaServer>, reservation: Awaited<ReturnType<typeof admitOk>>) {
  const late = database.runLate(settlement)
  let tries = 0
  database.refuse(body => settlement(body) && ++tries > 1)
  await expect(app.deps.ledger.settle(reservation, 10_000_000n)).rejects.toThrow('could not confirm')
  database.refuse(undefined)
  await anyCommit(app)
  return late
}

test("a settlement run late, after its pool's lease went back and the pool leased again, draws nothing from the new row", async () => {
  const { app, database } = await appOnServer()
  const org = await app.createOrg('small', 100_000_000n) // 0.1 USD: one grant takes it all
  const principal = await adminPrincipal(app, org)
  const late = await unconfirmedSettlement(app, database, await admitOk(app, principal, 10_000_000n))
  expect(prepaidPool(app, org.orgId)!.leased).toBe(90_000_000n) // the draw stays out of memory

  app.clock.advance(IDLE_RETURN_MS + 1)
  await app.deps.sweeper.tick() // the idle pool's row goes back whole: 0.1 USD, the settlement has not run
  expect(await leasedRows(org.orgId)).toBe(0n)
  const held = await admitOk(app, principal, 10_000_000n)
  expect([prepaidPool(app, org.orgId)!.leased, await leasedRows(org.orgId)]).toEqual([100_000_000n, 100_000_000n])

  await late.release() // the settlement runs now: charged, its draw finds no row of its own
  expect(await prepaidOf(app, org.orgId)).toBe(90_000_000n)
  expect([prepaidPool(app, org.orgId)!.leased, await leasedRows(org.orgId)]).toEqual([100_000_000n, 100_000_000n]) // was: 0.09 USD in the row
  await app.deps.ledger.settle(held, 10_000_000n)
  expect([prepaidPool(app, org.orgId)!.leased, await leasedRows(org.orgId)]).toEqual([90_000_000n, 90_000_000n])
}, 20_000)

test("a settlement and the pool's return both run late, after the pool leased again: the new row stays whole", async () => {
  const { app, database } = await appOnServer()
  const org = await app.createOrg('acme', 10n * 1_000_000_000n)
  const principal = await adminPrincipal(app, org)
  const lateDraw = await unconfirmedSettlement(app, database, await admitOk(app, principal, 10_000_000n))

  // The idle return's DELETE is held too: memory keeps no lease, the row stays.
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
  // The DELETE took the row it was sent for; the late draw wrote an older stamp on the new row,
  // which that DELETE's guard (updated_at_ms <= its stamp) then matched.
  expect(await leasedRows(org.orgId)).toBe(leased) // was: 0
  await app.deps.ledger.settle(held, 10_000_000n)
  expect(await leasedRows(org.orgId)).toBe(leased - 10_000_000n)
}, 20_000)

test('a settlement run late, after another instance swept the lease and the pool leased again, draws nothing from the new row', async () => {
  const { app, database } = await appOnServer()
  const org = await app.createOrg('small', 100_000_000n)
  const principal = await adminPrincipal(app, org)
  const late = await unconfirmedSettlement(app, database, await admitOk(app, principal, 10_000_000n))
  const open = await admitOk(app, principal, 1_000_000n) // a call in flight: the pool is not idle

  // This instance looks stale to another, which returns its lease; its next heartbeat finds it gone.
  const other = await ledgerOver(app, new ClientExecutor(app.deps.database.client), 'other')
  others.push(other.sweeper)
  app.clock.advance(app.deps.config.ledger.instanceStaleAfterMs + 1)
  await other.sweeper.tick()
  expect(await leasedRows(org.orgId)).toBe(0n)
  await app.deps.sweeper.tick()
  expect(prepaidPool(app, org.orgId)!.leased).toBe(0n)

  // The same pool leases again (a call holds on it), into a row of a new id.
  await admitOk(app, principal, 10_000_000n)
  expect([prepaidPool(app, org.orgId)!.leased, await leasedRows(org.orgId)]).toEqual([100_000_000n, 100_000_000n])
  await late.release()
  expect(await prepaidOf(app, org.orgId)).toBe(90_000_000n) // charged: a lost lease's call is (README)
  expect(await leasedRows(org.orgId)).toBe(100_000_000n) // was: 0.09 USD, below what memory holds
  app.deps.ledger.release(open)
}, 20_000)
