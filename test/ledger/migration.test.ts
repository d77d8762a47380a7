import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import Libsql from 'libsql'
import { join } from 'node:path'
import type { Client, InStatement, TransactionMode } from '@libsql/client'
import { readBalance } from '../../src/billing/balance'
import { settleStatementsGuarded } from '../../src/billing/settle-guarded'
import type { SettleOp } from '../../src/billing/ledger-writer'
import { verifyLedger } from '../../src/billing/verify'
import { migrateDatabase, migrationsFolder } from '../../src/db/client'
import { buildTestApp, type TestApp, type TestOrg } from '../support/harness'
import { USD, adminPrincipal, admitOk, countEntries, createCappedKey, prepaidOf, snapshotLedger, verifyClean } from './fixtures'

// drizzle/0004_ledger_lean_indexes.sql and 0005_ledger_running_totals.sql (bench/README.md,
// "Leaner ledger_entries indexes" and "The balance read without the entries"): a database that
// an older schema left with ledger rows keeps every entry, balance and idempotency claim through
// the migrations, the new running totals are filled in from the entries, and the queries on
// ledger_entries still find their rows through an index or read none.

const folder = migrationsFolder()
// The ledger_entries indexes as 0001 created them (0002 and 0003 did not touch them), and 0004's.
const INDEXES_0003 = readFileSync(join(folder, '0001_ledger.sql'), 'utf8')
  .split('--> statement-breakpoint')
  .map(statement => statement.trim().replace(/;$/, ''))
  .filter(statement => /^CREATE (UNIQUE )?INDEX `ledger_entries_/.test(statement))
const INDEXES_0004 = ['ledger_entries_idempotency_key_unique', 'ledger_entries_org', 'ledger_entries_key']
const ORG_INDEX_0004 = 'CREATE INDEX `ledger_entries_org` ON `ledger_entries` (`org_id`,`source`)'
const whenOf = (tag: string) =>
  (JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as { entries: Array<{ tag: string; when: number }> }).entries.find(entry => entry.tag === tag)!.when
// What a claim looked like before 0004 (and still looks like in older code): its conflict target
// names no WHERE, so it matches only a full unique index.
const OLD_CLAIM = `INSERT INTO ledger_entries (op_id, idempotency_key, org_id, kind, source, amount_nanos, created_at_ms)
  VALUES ('old-op', 'top_up:old-code', ?, 'top_up', 'top_up', 1, 0) ON CONFLICT(idempotency_key) DO NOTHING`
// The indexes every migration leaves.
const LATEST_INDEXES = [
  'CREATE UNIQUE INDEX `ledger_entries_idempotency_key_unique` ON `ledger_entries` (`idempotency_key`) WHERE "ledger_entries"."idempotency_key" IS NOT NULL',
]
const KEY_INDEX_0004 = 'CREATE INDEX `ledger_entries_key` ON `ledger_entries` (`key_id`,`cap_window_start_ms`) WHERE "ledger_entries"."cap_window_start_ms" IS NOT NULL'

/** Puts a migrated test database back where 0006 left it: no refresh-token exchange count, 0007 not recorded. */
async function backTo0006(client: Client): Promise<void> {
  await client.execute('ALTER TABLE oauth_tokens DROP COLUMN exchanges')
  await client.execute({ sql: 'DELETE FROM __drizzle_migrations WHERE created_at = ?', args: [whenOf('0007_oauth_refresh_reuse')] })
}

/**
 * Puts a migrated test database back where 0005 left it: no OAuth key_id columns, 0006 not
 * recorded. drizzle's migrator runs only migrations newer than the last one recorded, so a later
 * migration has to be undone too before an earlier one can be replayed.
 */
async function backTo0005(client: Client): Promise<void> {
  await backTo0006(client)
  for (const table of ['oauth_codes', 'oauth_device_codes', 'oauth_grants']) await client.execute(`ALTER TABLE ${table} DROP COLUMN key_id`)
  await client.execute({ sql: 'DELETE FROM __drizzle_migrations WHERE created_at = ?', args: [whenOf('0006_oauth_grant_key')] })
}

/** Puts a migrated test database back where 0004 left it: the org and key indexes, no top-up totals, 0005 not recorded. */
async function backTo0004(client: Client): Promise<void> {
  await backTo0005(client)
  await client.execute(ORG_INDEX_0004)
  await client.execute(KEY_INDEX_0004)
  for (const column of ['top_up_credited_nanos', 'top_up_spent_nanos']) await client.execute(`ALTER TABLE balances DROP COLUMN ${column}`)
  await client.execute({ sql: 'DELETE FROM __drizzle_migrations WHERE created_at = ?', args: [whenOf('0005_ledger_running_totals')] })
}

/** Puts a migrated test database back where 0003 left it: 0001's indexes, neither 0004 nor 0005 recorded. */
async function backTo0003(client: Client): Promise<void> {
  await backTo0004(client)
  for (const name of INDEXES_0004) await client.execute(`DROP INDEX ${name}`)
  for (const statement of INDEXES_0003) await client.execute(statement)
  await client.execute({ sql: 'DELETE FROM __drizzle_migrations WHERE created_at = ?', args: [whenOf('0004_ledger_lean_indexes')] })
}

/** Settles from the allowance and then prepaid, on capped keys and with billing keys; top-ups with and without a reference. */
async function traffic(t: TestApp, org: TestOrg, prefix: string): Promise<void> {
  const admin = await adminPrincipal(t, org)
  const overall = await createCappedKey(t, org, 'overall', 20n * USD)
  const daily = await createCappedKey(t, org, 'daily', 30n * USD)
  for (let index = 0; index < 30; index += 1) {
    const principal = [admin, overall.principal, daily.principal][index % 3]!
    const reservation = await admitOk(t, principal, 1n * USD, index % 5 === 0 ? { billingKey: `${prefix}-${index}` } : {})
    await t.deps.ledger.settle(reservation, 700_000_000n + BigInt(index) * 1_000_000n)
  }
  expect((await t.deps.ledger.topUp({ orgId: org.orgId, amount: 5n * USD, reference: `invoice-${prefix}` })).applied).toBe(true)
  await t.deps.ledger.topUp({ orgId: org.orgId, amount: 1n * USD })
}

async function entryIndexes(client: Client): Promise<string[]> {
  const result = await client.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger_entries' AND sql IS NOT NULL ORDER BY name")
  return result.rows.map(row => String(row.sql))
}

let t: TestApp
let org: TestOrg

beforeEach(async () => {
  t = await buildTestApp()
  org = await t.createOrg('acme', 50n * USD)
})
afterEach(async () => {
  await t.close()
})

describe('0003 → latest with rows in the ledger', () => {
  test('every entry, running total and claim survives; replays still charge nothing; older code can no longer claim', async () => {
    const client = t.deps.database.client
    await traffic(t, org, 'old')
    await verifyClean(t)
    const balanceBefore = await readBalance(client, t.deps.plans, t.clock, org.orgId)
    await backTo0003(client)
    expect((await entryIndexes(client)).map(sql => sql.split(' ON ')[0])).toEqual([
      'CREATE UNIQUE INDEX `ledger_entries_idempotency_key_unique`', 'CREATE INDEX `ledger_entries_key`',
      'CREATE INDEX `ledger_entries_op`', 'CREATE INDEX `ledger_entries_org`',
    ])
    await client.execute({ sql: OLD_CLAIM, args: [org.orgId] }) // older code claims fine under 0003
    await client.execute({ sql: 'INSERT INTO balances (org_id, prepaid_nanos, prepaid_leased_nanos) VALUES (?, 1, 0) ON CONFLICT(org_id) DO UPDATE SET prepaid_nanos = prepaid_nanos + 1', args: [org.orgId] })
    const before = await snapshotLedger(client)
    expect(Number(await countEntries(t, 'cap_window_start_ms IS NOT NULL'))).toBeGreaterThan(0)
    expect(Number(await countEntries(t, 'idempotency_key IS NOT NULL'))).toBe(6 + 1 + 1)

    await migrateDatabase(t.deps.database)
    expect(await entryIndexes(client)).toEqual(LATEST_INDEXES)
    // Every row as it was; balances gained the top-up totals, filled in from the entries.
    const after = await snapshotLedger(client)
    expect({ ...after, balances: [] }).toEqual({ ...before, balances: [] })
    expect(after.balances!.map(row => JSON.stringify({ ...JSON.parse(row), top_up_credited_nanos: undefined, top_up_spent_nanos: undefined }))).toEqual(before.balances!)
    // The older code's top-up of 1 nano counts as credit, not spending.
    expect(await readBalance(client, t.deps.plans, t.clock, org.orgId)).toEqual({
      ...balanceBefore,
      availableNanos: balanceBefore.availableNanos + 1n,
      prepaidNanos: balanceBefore.prepaidNanos + 1n,
      topUp: { remainingNanos: balanceBefore.topUp!.remainingNanos + 1n, spentNanos: balanceBefore.topUp!.spentNanos },
    })
    await verifyClean(t)

    // Claims made under 0003 still hold: a replayed billing key and top-up reference book nothing.
    const admin = await adminPrincipal(t, org)
    const prepaid = await prepaidOf(t, org.orgId)
    const replay = await admitOk(t, admin, 1n * USD, { billingKey: 'old-0' })
    await t.deps.ledger.settle(replay, 900_000_000n)
    expect((await t.deps.ledger.topUp({ orgId: org.orgId, amount: 5n * USD, reference: 'invoice-old' })).applied).toBe(false)
    expect(await prepaidOf(t, org.orgId)).toBe(prepaid)
    expect(await snapshotLedger(client, ['ledger_entries'])).toEqual({ ledger_entries: before.ledger_entries! })
    // A new key charges once, however often it is replayed.
    for (let index = 0; index < 3; index += 1) await t.deps.ledger.settle(await admitOk(t, admin, 1n * USD, { billingKey: 'new-1' }), 400_000_000n)
    expect(await countEntries(t, "idempotency_key = 'bill:new-1'")).toBe(1n)
    expect(await prepaidOf(t, org.orgId)).toBe(prepaid - 400_000_000n)
    await verifyClean(t)

    // The rollout risk (README.md, Operations): older code's claims no longer prepare.
    await expect(client.execute({ sql: OLD_CLAIM.replace('old-code', 'old-code-2'), args: [org.orgId] })).rejects.toThrow(/ON CONFLICT clause does not match/)
    // And migrating again does nothing.
    const settled = await snapshotLedger(client)
    await migrateDatabase(t.deps.database)
    expect(await snapshotLedger(client)).toEqual(settled)
    expect(await entryIndexes(client)).toEqual(LATEST_INDEXES)
  })
})

describe('0004 → 0005: the top-up projection as running totals', () => {
  test('the totals are filled in from the entries, per organization; the balance reads as before; the org and key indexes are gone', async () => {
    const client = t.deps.database.client
    // A second organization with a balance row and no spending, one with no row at all.
    const idle = await t.createOrg('idle', 3n * USD)
    const unfunded = await t.createOrg('unfunded', 0n)
    await traffic(t, org, 'a')
    await verifyClean(t)
    const before = await snapshotLedger(client)
    const balances = await Promise.all([org, idle, unfunded].map(each => readBalance(client, t.deps.plans, t.clock, each.orgId)))
    expect(balances[0]!.topUp!.spentNanos).toBeGreaterThan(0n)
    expect(balances[1]!.topUp).toEqual({ remainingNanos: 3n * USD, spentNanos: 0n })
    expect(balances[2]!.topUp).toEqual({ remainingNanos: 0n, spentNanos: 0n })

    await backTo0004(client)
    expect(await entryIndexes(client)).toEqual([...LATEST_INDEXES, KEY_INDEX_0004, ORG_INDEX_0004]) // by name
    await migrateDatabase(t.deps.database)
    expect(await entryIndexes(client)).toEqual(LATEST_INDEXES)
    expect(await snapshotLedger(client)).toEqual(before)
    expect(await Promise.all([org, idle, unfunded].map(each => readBalance(client, t.deps.plans, t.clock, each.orgId)))).toEqual(balances)
    await verifyClean(t)
  })

  test('older code settling after the upgrade (prepaid moved, spent not): the projection is unavailable and verify names the total', async () => {
    const client = t.deps.database.client
    await traffic(t, org, 'b')
    await verifyClean(t)
    // What a settlement of 7 nanos by pre-0005 code writes: the entry and prepaid, no spent total.
    await client.execute({
      sql: `INSERT INTO ledger_entries (op_id, org_id, kind, source, amount_nanos, created_at_ms) VALUES ('old-settle', ?, 'settle', 'top_up', 7, 0)`,
      args: [org.orgId],
    })
    await client.execute({ sql: 'UPDATE balances SET prepaid_nanos = prepaid_nanos - 7 WHERE org_id = ?', args: [org.orgId] })
    expect((await readBalance(client, t.deps.plans, t.clock, org.orgId)).topUp).toBeUndefined()
    const problems = await verifyLedger(client, { nowMs: t.clock.now(), staleAfterMs: t.deps.config.ledger.instanceStaleAfterMs })
    expect(problems).toEqual([expect.stringMatching(new RegExp(`^org ${org.orgId}: balances.top_up_spent_nanos (\\d+) != settled top-up entries (\\d+)$`))])
  })
})

/** A client that records the statements of its batches (and runs them on the real one). */
function recording(client: Client, into: InStatement[]): Client {
  return {
    batch: (statements: InStatement[], mode?: TransactionMode) => {
      into.push(...statements)
      return client.batch(statements, mode)
    },
  } as unknown as Client
}

/**
 * Plans are read on a schema-only copy (every migration in drizzle/, no rows, no ANALYZE: the
 * planner's own choice, as in production). Not on the test's database: libsql leaves an
 * EXPLAIN of a write statement open on its connection, and that connection's next COMMIT fails.
 */
function schemaOnly(): Libsql.Database {
  const database = new Libsql(':memory:')
  const journal = JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as { entries: Array<{ tag: string }> }
  for (const { tag } of journal.entries) database.exec(readFileSync(join(folder, `${tag}.sql`), 'utf8').replaceAll('--> statement-breakpoint', ''))
  return database
}

function plan(database: Libsql.Database, statement: InStatement): string {
  const { sql, args } = typeof statement === 'string' ? { sql: statement, args: [] } : statement
  const rows = database.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(args as never) as Array<{ detail: string }>
  return rows.map(row => row.detail).join('\n')
}

describe('the queries on ledger_entries after 0005 (EXPLAIN QUERY PLAN)', () => {
  test('balance reads no entries; verify scans each total once; the claim checks of a billing-key settlement seek', async () => {
    const client = t.deps.database.client
    const schema = schemaOnly()
    const capped = await createCappedKey(t, org, 'monthly', 5n * USD)
    await t.deps.ledger.settle(await admitOk(t, capped.principal, USD, { billingKey: 'plan-1' }), USD / 2n)

    const recorded: InStatement[] = []
    await readBalance(recording(client, recorded), t.deps.plans, t.clock, org.orgId)
    expect(recorded.length).toBeGreaterThan(0)
    for (const statement of recorded) expect(plan(schema, statement)).not.toContain('ledger_entries')

    recorded.length = 0
    await verifyLedger(recording(client, recorded), { nowMs: t.clock.now(), staleAfterMs: 60_000 })
    const verifyPlans = recorded.filter(statement => JSON.stringify(statement).includes('FROM ledger_entries')).map(statement => plan(schema, statement))
    // Prepaid totals per org (and entries of unknown orgs), allowance totals per org and period,
    // key spend per key and window (compared both ways): one scan each (an audit, not a
    // request), not a scan or a seek per row of the totals.
    expect(verifyPlans).toHaveLength(5)
    for (const index of [0, 1, 3]) {
      expect(verifyPlans[index]).toMatch(/(^|\n)MATERIALIZE derived\nSCAN ledger_entries\n/)
      expect(verifyPlans[index]!.match(/ledger_entries/g)).toHaveLength(1)
    }
    // Allowance entries without an allowances row: a scan, as before.
    expect(verifyPlans[2]).toContain('SCAN e')
    // Idempotency keys held twice: only the partial index's entries are read.
    expect(verifyPlans[4]).toMatch(/^(SCAN|SEARCH) ledger_entries USING COVERING INDEX ledger_entries_idempotency_key_unique\b/)

    // A billing-key settlement: the claim's conflict target, every claim check and the holder read.
    const op: SettleOp = {
      kind: 'settle', nowMs: t.clock.now(), allowance: null,
      entries: [{
        opId: 'x', idempotencyKey: 'bill:plan-2', orgId: org.orgId, keyId: capped.keyId, kind: 'settle', source: 'top_up', amountNanos: 1n,
        periodStartMs: null, capWindowStartMs: 0, purpose: 'chat', requestId: null, note: null, createdAtMs: t.clock.now(),
      }],
      keySpend: { keyId: capped.keyId, windowStartMs: 0, amount: 1n, overallCap: false },
      leaseDraws: [],
    }
    const guarded = settleStatementsGuarded(op).statements as () => InStatement[]
    const statements = guarded()
    expect(statements.length).toBeGreaterThan(2)
    for (const statement of statements.slice(1)) {
      const text = plan(schema, statement)
      expect(text).toContain('ledger_entries USING INDEX ledger_entries_idempotency_key_unique (idempotency_key=?)')
      expect(text).not.toMatch(/SCAN ledger_entries/)
    }
  })
})
