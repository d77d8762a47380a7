import { describe, expect, test } from 'bun:test'
import { ClientExecutor, type BatchExecutor, type Statement, type StatementResult } from '../../src/billing/executor'
import type { Ledger } from '../../src/billing/ledger'
import type { LedgerWriter } from '../../src/billing/ledger-writer'
import type { Sweeper } from '../../src/billing/sweeper'
import type { Principal } from '../../src/keys/principal'
import type { TestApp, TestOrg } from '../support/harness'
import { USD, ledgerOver, countEntries, createCappedKey, prepaidOf, scalar, verifyClean, eachTestPaygOrg } from './fixtures'

// L11 (SECURITY-NOTES.md §3): one bad op or one failed guard in a group-committed batch does
// not affect the other ops of that batch. The ledger here runs on its own writer over a spy
// executor (same in-memory database), so the tests can see how ops were batched.

class SpyExecutor implements BatchExecutor {
  readonly calls: Statement[][] = []
  failures = 0
  fail: ((statements: readonly Statement[]) => boolean) | undefined
  constructor(private readonly inner: BatchExecutor) {}
  async write(statements: readonly Statement[]): Promise<StatementResult[]> {
    this.calls.push([...statements])
    if (this.fail?.(statements)) {
      this.failures += 1
      throw new Error('injected: the database is unreachable')
    }
    return this.inner.write(statements)
  }
  close(): void {}
}

let t: TestApp
let org: TestOrg
let principal: Principal
let spy: SpyExecutor
let writer: LedgerWriter
let ledger: Ledger
let sweeper: Sweeper

eachTestPaygOrg(async setup => {
  ;({ t, org, principal } = setup)
  spy = new SpyExecutor(new ClientExecutor(t.deps.database.client))
  ;({ writer, ledger, sweeper } = await ledgerOver(t, spy, 'writer-test'))
}, () => sweeper.stop())

async function admitted(estimate: bigint, extra: { billingKey?: string; principal?: Principal } = {}) {
  const result = await ledger.admit({ principal: extra.principal ?? principal, purpose: 'chat', estimate, billingKey: extra.billingKey })
  if (!result.ok) throw new Error(result.error.message)
  return result.reservation
}

const badOp = (sql: string) => writer.submit({ kind: 'plain', statements: [{ sql, args: [] }], interpret: () => 'should not resolve' })

describe('batch isolation', () => {
  test('a plain op whose SQL fails rejects alone; settles, a top-up and billing-key settles in the same batch commit', async () => {
    const plain = [await admitted(30_000_000n), await admitted(20_000_000n)]
    const billed = [await admitted(10_000_000n, { billingKey: 'bk-1' }), await admitted(10_000_000n, { billingKey: 'bk-1' })]
    const callsBefore = spy.calls.length

    // All submitted in one turn of the event loop: one batch.
    const outcomes = await Promise.allSettled([
      ledger.settle(plain[0]!, 25_000_000n),
      badOp('INSERT INTO no_such_table VALUES (1)'),
      ledger.settle(plain[1]!, 20_000_000n),
      ledger.topUp({ orgId: org.orgId, amount: 7n, reference: 'mixed-batch' }),
      ledger.settle(billed[0]!, 4_000_000n),
      ledger.settle(billed[1]!, 4_000_000n),
    ])
    expect(outcomes.map(outcome => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled'])
    expect(String((outcomes[1] as PromiseRejectedResult).reason)).toContain('no_such_table')
    expect((outcomes[3] as PromiseFulfilledResult<unknown>).value).toEqual({ applied: true })

    // The first write carried every op and failed; then each op ran on its own.
    const batches = spy.calls.slice(callsBefore)
    expect(batches[0]!.some(statement => statement.sql.includes('no_such_table'))).toBe(true)
    expect(batches[0]!.some(statement => statement.args.includes('top_up:mixed-batch'))).toBe(true)
    // Two claims of the billing key (its further statements are guarded by key and op id).
    expect(batches[0]!.filter(statement => statement.sql.includes('ON CONFLICT (idempotency_key)') && statement.args.includes('bill:bk-1')).length).toBe(2)
    expect(batches.length).toBe(1 + 6)

    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 25_000_000n - 20_000_000n + 7n - 4_000_000n)
    expect(await countEntries(t, "kind = 'settle'")).toBe(3n)
    expect(await countEntries(t, "idempotency_key = 'bill:bk-1'")).toBe(1n)
    expect(billed.map(reservation => reservation.state)).toEqual(['settled', 'settled'])
    await verifyClean(t)
  })

  test('a constraint violation (a CHECK on the leases table) rejects alone', async () => {
    const reservation = await admitted(30_000_000n)
    const outcomes = await Promise.allSettled([
      writer.submit({
        kind: 'plain',
        statements: [{ sql: "UPDATE leases SET amount_nanos = -1 WHERE instance_id = 'writer-test'", args: [] }],
        interpret: () => undefined,
      }),
      ledger.settle(reservation, 30_000_000n),
      ledger.topUp({ orgId: org.orgId, amount: 1n }),
    ])
    expect(outcomes.map(outcome => outcome.status)).toEqual(['rejected', 'fulfilled', 'fulfilled'])
    expect(String((outcomes[0] as PromiseRejectedResult).reason)).toMatch(/CHECK/i)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 30_000_000n + 1n)
    await verifyClean(t)
  })

  test('a failed guard is not a failure: a refused lease in the batch leaves the settles beside it alone, in one write', async () => {
    const capped = await createCappedKey(t, org, 'daily', 50_000_000n)
    const reservations = [await admitted(10_000_000n), await admitted(10_000_000n, { principal: capped.principal })]
    const callsBefore = spy.calls.length
    const [tooBig, ...settled] = await Promise.all([
      ledger.admit({ principal, purpose: 'chat', estimate: 100n * USD }), // its prepaid lease guard finds too little free
      ...reservations.map(reservation => ledger.settle(reservation, 10_000_000n)),
    ])
    expect(tooBig.ok).toBe(false)
    expect(settled).toEqual([10_000_000n, 10_000_000n]) // what each charged
    // No write failed, so nothing was retried one by one.
    expect(spy.failures).toBe(0)
    expect(spy.calls.length - callsBefore).toBeLessThanOrEqual(3)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 20_000_000n)
    expect(await scalar(t.deps.database.client, 'SELECT spent_nanos FROM key_spend WHERE key_id = ?', [capped.keyId])).toBe(10_000_000n)
    await verifyClean(t)
  })

  test('settles queued together are group-committed: one write, one multi-row INSERT of entries', async () => {
    const reservations = await Promise.all(Array.from({ length: 40 }, () => admitted(1_000_000n)))
    const callsBefore = spy.calls.length
    await Promise.all(reservations.map(reservation => ledger.settle(reservation, 1_000_000n)))
    const writes = spy.calls.slice(callsBefore)
    expect(writes.length).toBe(1)
    const inserts = writes[0]!.filter(statement => statement.sql.startsWith('INSERT INTO ledger_entries'))
    expect(inserts.length).toBe(1)
    // 10 bound values per settle entry: kind, idempotency key and note are in the SQL.
    expect(inserts[0]!.args.length).toBe(40 * 10)
    expect(await countEntries(t, "kind = 'settle'")).toBe(40n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 40_000_000n)
    await verifyClean(t)
  })
})

describe('statements per batch', () => {
  test('a batch of settles on a capped key: the entries, the lease draws, and one statement per running total that also recomputes its leased total', async () => {
    const key = await createCappedKey(t, org, 'daily', 1n * USD)
    const reservations = await Promise.all(Array.from({ length: 24 }, () => admitted(1_000_000n, { principal: key.principal })))
    const callsBefore = spy.calls.length
    await Promise.all(reservations.map(reservation => ledger.settle(reservation, 900_000n)))
    const writes = spy.calls.slice(callsBefore)
    expect(writes.length).toBe(1)
    // Before: entries, prepaid, key spend, draws, and a leased recompute each for balances and key_spend.
    expect(writes[0]!.map(statement => statement.sql.trim().split(/\s+/).slice(0, 3).join(' '))).toEqual([
      'INSERT INTO ledger_entries',
      'UPDATE leases SET',
      'INSERT INTO balances',
      'INSERT INTO key_spend',
    ])
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 24n * 900_000n)
    // The leased totals are the leases' sums after the draws (verify checks them against the leases rows).
    const leased = await scalar(t.deps.database.client, "SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?", [org.orgId])
    expect(leased).toBe(await scalar(t.deps.database.client, "SELECT SUM(amount_nanos) FROM leases WHERE org_id = ? AND scope = 'prepaid'", [org.orgId]))
    expect(await scalar(t.deps.database.client, 'SELECT spent_nanos FROM key_spend WHERE key_id = ?', [key.keyId])).toBe(24n * 900_000n)
    await verifyClean(t)
  })
})

describe('leased totals in the aggregated statements', () => {
  test('a drawn lease whose parent row is missing creates no row; an existing parent gets its leased total, and its prepaid is left alone', async () => {
    const client = t.deps.database.client
    const beta = await t.createOrg('beta', 0n)
    const count = (sql: string, args: string[]) => scalar(client, sql, args)
    expect(await count('SELECT COUNT(*) FROM balances WHERE org_id = ?', [beta.orgId])).toBe(0n)
    // A prepaid lease of beta's with no balances row (not a state the ledger makes: leaseGrant
    // inserts the parent first), drawn on by a settlement of acme's.
    const lease = { id: 'test|prepaid|beta', scope: 'prepaid' as const, orgId: beta.orgId, keyId: null, periodStartMs: 0 }
    await client.execute({
      sql: `INSERT INTO leases (id, instance_id, boot_id, scope, org_id, key_id, period_start_ms, amount_nanos, last_grant_nanos, updated_at_ms)
            VALUES (?, 'test', 'test', 'prepaid', ?, NULL, 0, 5000000, 0, 0)`,
      args: [lease.id, beta.orgId],
    })
    let ops = 0
    const settle = () =>
      writer.submit({
        kind: 'settle', nowMs: t.clock.now(), allowance: null, keySpend: null, leaseDraws: [{ lease, amount: 1000n }],
        entries: [{
          opId: `parent-test-${(ops += 1)}`, idempotencyKey: null, orgId: org.orgId, keyId: null, kind: 'settle', source: 'top_up', amountNanos: 1000n,
          periodStartMs: null, capWindowStartMs: null, purpose: 'chat', requestId: null, note: null, createdAtMs: t.clock.now(),
        }],
      })
    await settle()
    expect(await count('SELECT COUNT(*) FROM balances WHERE org_id = ?', [beta.orgId])).toBe(0n)
    expect(await count('SELECT amount_nanos FROM leases WHERE id = ?', [lease.id])).toBe(4_999_000n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 1000n)

    await client.execute({ sql: 'INSERT INTO balances (org_id, prepaid_nanos, prepaid_leased_nanos) VALUES (?, 7, 0)', args: [beta.orgId] })
    await settle()
    expect(await count('SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?', [beta.orgId])).toBe(4_998_000n)
    expect(await count('SELECT prepaid_nanos FROM balances WHERE org_id = ?', [beta.orgId])).toBe(7n)
  })
})

describe('an outage', () => {
  test('a settlement that cannot commit after its retries throws unavailable, charges nothing, and frees its hold', async () => {
    const reservation = await admitted(30_000_000n)
    const pool = ledger.pools.get('prepaid', org.orgId, null, 0, t.clock.now())
    const leasedBefore = pool.leased
    spy.fail = statements => statements.some(statement => statement.sql.startsWith('INSERT INTO ledger_entries'))
    await expect(ledger.settle(reservation, 30_000_000n)).rejects.toMatchObject({ code: 'unavailable', status: 503 })
    expect(spy.failures).toBe(3)
    expect(reservation.state).toBe('released')
    expect(pool.held).toBe(0n)
    expect(pool.leased).toBe(leasedBefore)
    spy.fail = undefined
    expect(await countEntries(t, "kind = 'settle'")).toBe(0n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD)
    // The lease is intact: the next call is admitted from memory and settles.
    await ledger.settle(await admitted(30_000_000n), 30_000_000n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 30_000_000n)
    await verifyClean(t)
  })

  test('an admission during an outage is 503 unavailable, never a zero-cost hold', async () => {
    spy.fail = () => true
    const result = await ledger.admit({ principal, purpose: 'chat', estimate: 10_000_000n })
    expect(result.ok).toBe(false)
    if (!result.ok) {
      expect(result.error.status).toBe(503)
      expect(result.error.code).toBe('unavailable')
    }
    spy.fail = undefined
  })
})
