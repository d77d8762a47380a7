import { expect, test } from 'bun:test'
import { ClientExecutor, type Statement } from '../../src/billing/executor'
import type { Ledger } from '../../src/billing/ledger'
import type { LedgerWriter } from '../../src/billing/ledger-writer'
import type { Sweeper } from '../../src/billing/sweeper'
import type { Principal } from '../../src/keys/principal'
import type { TestApp, TestOrg } from '../support/harness'
import { USD, LostReplyExecutor, adminPrincipal, eachTestPaygOrg, ledgerOver, prepaidOf, scalar, verifyClean } from './fixtures'

// Lease writes whose COMMIT went through and whose reply was lost (a libSQL server: a reset
// connection, DATABASE_TIMEOUT_S), on a ledger whose own writer stands for that server. A grant
// was stranded for the rest of the boot (QA): the admission that asked for it failed, the process
// never learnt of the row, and its idle return only forgot the pool. The writer's op-by-op rerun of
// a failed batch granted a second time over the first. Every such lease row now goes back whole,
// by a DELETE (what the database holds, not what memory says), once nothing holds on it.

let t: TestApp
let org: TestOrg
let principal: Principal
let executor: LostReplyExecutor
let writer: LedgerWriter
let ledger: Ledger
let sweeper: Sweeper

eachTestPaygOrg(async setup => {
  ;({ t, org, principal } = setup)
  executor = new LostReplyExecutor(new ClientExecutor(t.deps.database.client))
  ;({ writer, ledger, sweeper } = await ledgerOver(t, executor, 'lost-grant-test'))
}, () => sweeper.stop())

const prepaidGrant = (statements: readonly Statement[]) =>
  statements.some(statement => statement.sql.includes('INSERT INTO leases') && statement.args.some(arg => String(arg).includes('|prepaid|')))

const leasedRow = (orgId: string) => scalar(t.deps.database.client, "SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE org_id = ? AND scope = 'prepaid'", [orgId])
const leasedTotal = (orgId: string) => scalar(t.deps.database.client, 'SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?', [orgId])
const prepaidPool = (orgId: string) => ledger.pools.all().find(pool => pool.ref.scope === 'prepaid' && pool.ref.orgId === orgId)

async function admitted(estimate: bigint, who: Principal = principal) {
  const result = await ledger.admit({ principal: who, purpose: 'chat', estimate })
  if (!result.ok) throw new Error(result.error.message)
  return result.reservation
}

/** A lease of this org on `ledger`'s pool, drawn to 90,000,000 nanos; its allowance found empty. */
async function leasedAlready(): Promise<void> {
  await ledger.settle(await admitted(10_000_000n), 10_000_000n)
  expect(prepaidPool(org.orgId)!.leased).toBe(90_000_000n)
}

test('a grant whose reply was lost, and no call after it: the next sweep returns the whole row', async () => {
  executor.lose = prepaidGrant
  const lost = await ledger.admit({ principal, purpose: 'chat', estimate: 10_000_000n })
  expect(lost.ok ? 'admitted' : lost.error.code).toBe('unavailable')
  expect(executor.lost).toBe(1)
  expect(await leasedRow(org.orgId)).toBe(100_000_000n) // committed all the same

  await sweeper.tick()
  expect(await leasedRow(org.orgId)).toBe(0n)
  expect(await leasedTotal(org.orgId)).toBe(0n)
  expect(await prepaidOf(t, org.orgId)).toBe(10n * USD)
  await verifyClean(t)
})

test('a grant of all an organization has, its reply lost: the next call is admitted from that money', async () => {
  const small = await t.createOrg('small', 50_000_000n)
  const smallPrincipal = await adminPrincipal(t, small)
  executor.lose = prepaidGrant
  expect((await ledger.admit({ principal: smallPrincipal, purpose: 'chat', estimate: 261_000n })).ok).toBe(false)
  expect(await leasedRow(small.orgId)).toBe(50_000_000n)

  // QA: 429 "another gateway instance holds the rest leased", for as long as the boot lasted.
  const reservation = await admitted(261_000n, smallPrincipal)
  expect(await leasedRow(small.orgId)).toBe(prepaidPool(small.orgId)!.leased)
  await ledger.settle(reservation, 261_000n)
  expect(await leasedRow(small.orgId)).toBe(50_000_000n - 261_000n)
  expect(prepaidPool(small.orgId)!.leased).toBe(50_000_000n - 261_000n)
  await sweeper.stop()
  expect(await leasedTotal(small.orgId)).toBe(0n)
  expect(await prepaidOf(t, small.orgId)).toBe(50_000_000n - 261_000n)
  await verifyClean(t)
})

test("the writer's rerun of a lost batch with a grant, nothing held: the rerun replaces the first grant, it does not add to it", async () => {
  await leasedAlready()
  executor.lose = prepaidGrant
  // The grant shares its batch with a heartbeat, so the failed batch is rerun op by op.
  const [reservation] = await Promise.all([admitted(500_000_000n), sweeper.heartbeat()])
  expect(executor.lost).toBe(1)
  const pool = prepaidPool(org.orgId)!
  expect(await leasedRow(org.orgId)).toBe(pool.leased)
  expect(pool.leased).toBe(4_090_000_000n) // 8 × the estimate, on top of the 0.09 USD it had
  await ledger.settle(reservation, 500_000_000n)
  expect(await leasedRow(org.orgId)).toBe(pool.leased)
  await sweeper.stop()
  expect(await leasedTotal(org.orgId)).toBe(0n)
  expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 510_000_000n)
  await verifyClean(t)
})

test('a grant that returns a row with an unknown grant, itself rerun after a lost reply: still exactly what the process knows', async () => {
  await leasedAlready()
  executor.lose = prepaidGrant
  expect((await ledger.admit({ principal, purpose: 'chat', estimate: 500_000_000n })).ok).toBe(false)
  expect(await leasedRow(org.orgId)).toBe(4_090_000_000n) // the 0.09 USD known, 4 USD not

  executor.lose = prepaidGrant
  const [reservation] = await Promise.all([admitted(500_000_000n), sweeper.heartbeat()])
  expect(executor.lost).toBe(2)
  // Both attempts returned the row whole and asked for the 0.09 USD again with the growth.
  expect(prepaidPool(org.orgId)!.leased).toBe(4_090_000_000n)
  expect(await leasedRow(org.orgId)).toBe(4_090_000_000n)
  ledger.release(reservation)
  await sweeper.stop()
  expect(await leasedTotal(org.orgId)).toBe(0n)
  expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 10_000_000n)
  await verifyClean(t)
})

test("the writer's rerun of a lost batch with a grant while calls hold on the lease: the surplus goes back once they end", async () => {
  await leasedAlready()
  const holding = await admitted(10_000_000n)
  executor.lose = prepaidGrant
  const [big] = await Promise.all([admitted(500_000_000n), sweeper.heartbeat()])
  expect(executor.lost).toBe(1)
  const pool = prepaidPool(org.orgId)!
  // Granted twice: the row holds a grant more than the process knows of, spent by no one.
  expect(await leasedRow(org.orgId)).toBe(pool.leased + 4_000_000_000n)
  await sweeper.tick()
  expect(await leasedRow(org.orgId)).toBe(pool.leased + 4_000_000_000n) // still held on

  await ledger.settle(holding, 10_000_000n)
  ledger.release(big)
  await sweeper.tick()
  expect(await leasedRow(org.orgId)).toBe(0n)
  expect(await leasedTotal(org.orgId)).toBe(0n)
  expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 20_000_000n)
  // And it is all admissible again.
  await ledger.settle(await admitted(10n * USD - 20_000_000n), 10n * USD - 20_000_000n)
  expect(await prepaidOf(t, org.orgId)).toBe(0n)
  await verifyClean(t)
})
