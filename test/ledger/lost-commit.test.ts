import { describe, expect, test } from 'bun:test'
import { ClientExecutor, createExecutor, type Statement } from '../../src/billing/executor'
import type { Ledger } from '../../src/billing/ledger'
import type { Sweeper } from '../../src/billing/sweeper'
import type { Principal } from '../../src/keys/principal'
import type { TestApp, TestOrg } from '../support/harness'
import { USD, LostReplyExecutor, ledgerOver, countEntries, createCappedKey, keySettledOf, prepaidOf, scalar, verifyClean, eachTestPaygOrg } from './fixtures'

// L5 (SECURITY-NOTES.md §3) when a COMMIT's outcome is unknown: against a libSQL server the
// transaction can commit and its reply be lost (a reset connection), so the writer sees a failure
// for a write that happened. Its retries (the writer's op-by-op rerun of a failed batch, the
// ledger's settlement retries) must then charge nothing twice. Idempotent ops (billing-key
// settlements, top-ups with a reference) claim under a fresh op id per attempt and recognise their
// own earlier claim (settle-guarded.ts); over a server, every settlement and top-up gets such a
// claim (ledger.ts, claimForRetries). The ledger runs on its own writer over an executor that
// commits, then loses the reply.

let t: TestApp
let org: TestOrg
let principal: Principal
let executor: LostReplyExecutor
let ledger: Ledger
let sweeper: Sweeper

eachTestPaygOrg(async setup => {
  ;({ t, org, principal } = setup)
  executor = new LostReplyExecutor(new ClientExecutor(t.deps.database.client))
  ;({ ledger, sweeper } = await ledgerOver(t, executor, 'lost-commit-test'))
}, () => sweeper.stop())

/** A reservation on this test's ledger; without a billing key, a plain chat call's. */
async function admitted(estimate: bigint, billingKey?: string, who: Principal = principal, on: Ledger = ledger) {
  const result = await on.admit({ principal: who, purpose: billingKey ? 'fusion' : 'chat', estimate, billingKey })
  if (!result.ok) throw new Error(result.error.message)
  return result.reservation
}

const claimOf = (statements: readonly Statement[], key: string) =>
  statements.some(statement => /ON CONFLICT ?\(idempotency_key\)/.test(statement.sql) && statement.args.includes(key))

/** Every lease this process holds in memory equals its row: nothing was given back that the database kept. */
async function expectPoolsMatchLeases(): Promise<void> {
  for (const pool of ledger.pools.all()) {
    expect(await scalar(t.deps.database.client, 'SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE id = ?', [pool.ref.id])).toBe(pool.leased)
  }
}

describe('a COMMIT that went through but whose reply was lost', () => {
  test('a billing-key settlement alone in its batch: the retry charges nothing again and the settlement is not a duplicate', async () => {
    const capped = await createCappedKey(t, org, 'overall', 5n * USD)
    const reservation = await admitted(100_000_000n, 'fusion-1', capped.principal)
    executor.lose = statements => claimOf(statements, 'bill:fusion-1')
    await ledger.settle(reservation, 60_000_000n)

    expect(executor.lost).toBe(1)
    expect(reservation.state).toBe('settled')
    expect(await countEntries(t, "kind = 'settle'")).toBe(1n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 60_000_000n)
    expect(await keySettledOf(t, capped.keyId)).toBe(60_000_000n)
    // The retry did not mistake the first attempt's charge for another request's and hand the
    // drawn lease back in memory (which would let this process spend it a second time).
    await expectPoolsMatchLeases()
    await verifyClean(t)

    // A real replay of the key is still a duplicate.
    await ledger.settle(await admitted(100_000_000n, 'fusion-1', capped.principal), 60_000_000n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 60_000_000n)
    await expectPoolsMatchLeases()
    await verifyClean(t)
  })

  test('in a batch with other idempotent ops: the writer reruns each alone, and each books exactly once', async () => {
    const first = await admitted(100_000_000n, 'fusion-a')
    const second = await admitted(100_000_000n, 'fusion-b')
    const replay = await admitted(100_000_000n, 'fusion-a')
    executor.lose = statements => claimOf(statements, 'bill:fusion-b')
    const outcomes = await Promise.all([
      ledger.settle(first, 30_000_000n),
      ledger.settle(second, 20_000_000n),
      ledger.topUp({ orgId: org.orgId, amount: 7n, reference: 'lost-reply' }),
      ledger.settle(replay, 30_000_000n),
    ])

    expect(executor.lost).toBe(1)
    expect(outcomes[2]).toEqual({ applied: true })
    expect(await countEntries(t, "kind = 'settle'")).toBe(2n)
    expect(await countEntries(t, "kind = 'top_up' AND idempotency_key = 'top_up:lost-reply'")).toBe(1n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 30_000_000n - 20_000_000n + 7n)
    await expectPoolsMatchLeases()
    await verifyClean(t)
  })
})

// Regression QA: the first try committed with its reply lost, and both retries met the server
// still down. The client was told "nothing was charged" while the entry stood, and the draw went
// back into memory, so this process could spend the same lease money twice.
test('a settlement whose every try failed after the first committed: unconfirmed, and memory keeps no money the row lost', async () => {
  const reservation = await admitted(100_000_000n)
  executor.lose = statements => statements.some(statement => /INSERT INTO .?ledger_entries/i.test(statement.sql))
  executor.downFor = 2
  await expect(ledger.settle(reservation, 40_000_000n)).rejects.toThrow('the ledger could not confirm this charge')
  expect(await countEntries(t, "kind = 'settle'")).toBe(1n)
  await expectPoolsMatchLeases()
  await verifyClean(t)
})

describe('over a server, writes without a billing key or a reference', () => {
  const writesEntries = (statements: readonly Statement[]) => statements.some(statement => /INSERT INTO .?ledger_entries/i.test(statement.sql))

  test('a plain settlement whose reply was lost is charged once: it carried a claim of its own', async () => {
    const reservation = await admitted(100_000_000n)
    executor.lose = writesEntries
    await ledger.settle(reservation, 40_000_000n)

    expect(executor.lost).toBe(1)
    expect(reservation.state).toBe('settled')
    expect(await countEntries(t, "kind = 'settle'")).toBe(1n)
    expect(await countEntries(t, "kind = 'settle' AND idempotency_key LIKE 'op:%'")).toBe(1n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 40_000_000n)
    await expectPoolsMatchLeases()
    await verifyClean(t)
  })

  test('several plain settlements in one lost batch: the writer reruns each alone, and each books once', async () => {
    const reservations = [await admitted(100_000_000n), await admitted(100_000_000n), await admitted(100_000_000n)]
    executor.lose = writesEntries
    await Promise.all(reservations.map((reservation, i) => ledger.settle(reservation, BigInt(i + 1) * 10_000_000n)))

    expect(executor.lost).toBe(1)
    expect(await countEntries(t, "kind = 'settle'")).toBe(3n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 60_000_000n)
    await expectPoolsMatchLeases()
    await verifyClean(t)
  })

  test('a top-up without a reference whose reply was lost is applied once', async () => {
    executor.lose = writesEntries
    expect(await ledger.topUp({ orgId: org.orgId, amount: 5n * USD })).toEqual({ applied: true })

    expect(executor.lost).toBe(1)
    expect(await countEntries(t, "kind = 'top_up' AND org_id = '" + org.orgId + "' AND amount_nanos = " + 5n * USD)).toBe(1n)
    expect(await prepaidOf(t, org.orgId)).toBe(15n * USD)
    await verifyClean(t)
  })
})

test('on a local database (no lost replies) a plain settlement carries no claim: it stays on the aggregated path', async () => {
  // The app's own ledger: an in-memory database, whose failed writes never committed.
  await t.deps.ledger.settle(await admitted(100_000_000n, undefined, principal, t.deps.ledger), 40_000_000n)
  expect(await countEntries(t, "kind = 'settle'")).toBe(1n)
  expect(await countEntries(t, 'idempotency_key IS NOT NULL')).toBe(0n)
})

test('only a server URL is taken to lose replies', () => {
  const client = t.deps.database.client
  expect(createExecutor('libsql://ledger.example.test', client).ambiguousCommits).toBe(true)
  expect(createExecutor('https://ledger.example.test', client).ambiguousCommits).toBe(true)
  expect(createExecutor(':memory:', client).ambiguousCommits).toBe(false)
  expect(createExecutor('file::memory:', client).ambiguousCommits).toBe(false)
})
