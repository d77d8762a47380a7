import { afterEach, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ClientExecutor } from '../../src/billing/executor'
import { IDLE_RETURN_MS, type Sweeper } from '../../src/billing/sweeper'
import { openDatabase } from '../../src/db/client'
import { newId } from '../../src/lib/ids'
import { buildTestApp, type TestApp } from '../support/harness'
import { hranaServer } from '../support/hrana-server'
import { USD, LostReplyExecutor, PAYG_ONLY, admit, adminPrincipal, admitOk, buildPaygApp, configWith, expectInsufficientQuota, ledgerOver, prepaidOf, scalar, verifyClean } from './fixtures'

// A pool's lease return (idle, shutdown) whose DELETE fails on a libSQL server: the DELETE may have
// committed, its reply lost, or the server may run it after the client gave up. Memory used to
// take the lease back at once, so for up to a heartbeat it held money whose row was gone, which
// another instance could lease and spend too. Now memory keeps neither lease nor row (the pool is
// rowUnknown), and the next tick returns whatever row is left. On a local file a failed DELETE
// never committed, and the lease is memory's again (lost-grant.test.ts).

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
const prepaidPool = (app: TestApp, orgId: string) => app.deps.ledger.pools.all().find(pool => pool.ref.scope === 'prepaid' && pool.ref.orgId === orgId)
// A pool's own return (the first lease DELETE of an idle tick).
const poolReturn = (body: string) => body.includes('DELETE FROM leases WHERE id = ?')

describe('over a libSQL server (Hrana over HTTP)', () => {
  /** The whole app on a Hrana server, whose requests get 300 ms to be answered (DATABASE_TIMEOUT_S). */
  async function appOnServer(): Promise<{ app: TestApp; database: ReturnType<typeof hranaServer> }> {
    directory = mkdtempSync(join(tmpdir(), 'svc-lost-return-'))
    server = hranaServer(join(directory, 'served.db'))
    const database = await openDatabase(server.url, undefined, { replyTimeoutMs: 300 })
    t = await buildTestApp({}, configWith({ plans: PAYG_ONLY }), { database, identity: { instanceId: 'served', bootId: newId() } })
    return { app: t, database: server }
  }
  /** Any committed write proves the database again (as the health probe would, a second later). */
  const anyCommit = (app: TestApp) => app.deps.writer.submit({ kind: 'plain', statements: [{ sql: 'SELECT 1', args: [] }], interpret: () => undefined })

  test('an idle return that the server runs after the client gave up: memory keeps no lease, and nobody spends the money twice', async () => {
    const { app, database } = await appOnServer()
    const org = await app.createOrg('small', 100_000_000n) // 0.1 USD: one grant takes it all
    const principal = await adminPrincipal(app, org)
    await app.deps.ledger.settle(await admitOk(app, principal, 10_000_000n), 10_000_000n)
    const pool = prepaidPool(app, org.orgId)!
    expect([pool.leased, await leasedRows(org.orgId)]).toEqual([90_000_000n, 90_000_000n])

    app.clock.advance(IDLE_RETURN_MS + 1)
    const late = database.runLate(poolReturn)
    await expect(app.deps.sweeper.tick()).rejects.toThrow('did not answer')
    expect([pool.leased, pool.leaseRow]).toEqual([0n, false]) // was: 90_000_000n and a row memory believed in
    await late.release()
    expect(await leasedRows(org.orgId)).toBe(0n)

    // Another instance leases and spends the 0.09 USD; this one has none of it to spend.
    const other = await ledgerOver(app, new ClientExecutor(app.deps.database.client), 'other')
    others.push(other.sweeper)
    const theirs = await other.ledger.admit({ principal, purpose: 'chat', estimate: 90_000_000n })
    if (!theirs.ok) throw new Error(theirs.error.message)
    await other.ledger.settle(theirs.reservation, 90_000_000n)
    await anyCommit(app)
    expectInsufficientQuota(await admit(app, principal, 90_000_000n))
    expect(await prepaidOf(app, org.orgId)).toBe(0n) // was: -0.09 USD, spent twice
  }, 20_000)

  test("an idle return that the server runs after the pool's next grant leaves that grant's row", async () => {
    const { app, database } = await appOnServer()
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
    expect([pool.leaseRow, await leasedRows(org.orgId)]).toEqual([true, before + granted])
    // The DELETE runs now and takes the row it was sent for, not the one written since.
    await late.release()
    expect(await leasedRows(org.orgId)).toBe(granted)
    await app.deps.ledger.settle(held, 10_000_000n)
    app.clock.advance(IDLE_RETURN_MS + 1)
    await app.deps.sweeper.tick()
    expect(await leasedRows(org.orgId)).toBe(0n)
    expect(await prepaidOf(app, org.orgId)).toBe(10n * USD - 20_000_000n)
    await verifyClean(app)
  }, 20_000)
})

test('a return that fails on a libSQL server keeps nothing in memory; the next tick returns the row', async () => {
  const app = (t = await buildPaygApp())
  const executor = new LostReplyExecutor(new ClientExecutor(app.deps.database.client))
  const { ledger, sweeper } = await ledgerOver(app, executor, 'lost-return-test')
  others.push(sweeper)
  const org = await app.createOrg('acme', 10n * USD)
  const result = await ledger.admit({ principal: await adminPrincipal(app, org), purpose: 'chat', estimate: 10_000_000n })
  if (!result.ok) throw new Error(result.error.message)
  await ledger.settle(result.reservation, 10_000_000n)
  const pool = ledger.pools.all().find(candidate => candidate.ref.orgId === org.orgId)!
  const amount = pool.leased

  executor.refuse = statements => statements.some(statement => statement.sql.startsWith('DELETE FROM leases'))
  await expect(ledger.returnLease(pool)).rejects.toThrow('nothing committed')
  expect([pool.leased, pool.leaseRow, pool.rowUnknown, await leasedRows(org.orgId)]).toEqual([0n, false, true, amount])
  executor.refuse = undefined
  await sweeper.tick()
  expect(await leasedRows(org.orgId)).toBe(0n)
  await verifyClean(app)
})
