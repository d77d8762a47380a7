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

// drizzle/0004_ledger_lean_indexes.sql (bench/README.md, "Leaner ledger_entries indexes"): a
// database that 0003 left with ledger rows keeps every entry, balance and idempotency claim
// through the migration, and the hot queries still find their rows through an index.

const folder = migrationsFolder()
const LEAN_INDEXES = ['ledger_entries_idempotency_key_unique', 'ledger_entries_org', 'ledger_entries_key']
// The ledger_entries indexes as 0001 created them (0002 and 0003 did not touch them).
const INDEXES_0003 = readFileSync(join(folder, '0001_ledger.sql'), 'utf8')
  .split('--> statement-breakpoint')
  .map(statement => statement.trim().replace(/;$/, ''))
  .filter(statement => /^CREATE (UNIQUE )?INDEX `ledger_entries_/.test(statement))
const when0004 = (JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as { entries: Array<{ tag: string; when: number }> })
  .entries.find(entry => entry.tag === '0004_ledger_lean_indexes')!.when
// What a claim looked like before 0004 (and still looks like in older code): its conflict target
// names no WHERE, so it matches only a full unique index.
const OLD_CLAIM = `INSERT INTO ledger_entries (op_id, idempotency_key, org_id, kind, source, amount_nanos, created_at_ms)
  VALUES ('old-op', 'top_up:old-code', ?, 'top_up', 'top_up', 1, 0) ON CONFLICT(idempotency_key) DO NOTHING`

/** Puts a migrated test database back where 0003 left it: 0001's indexes, 0004 not recorded. */
async function backTo0003(client: Client): Promise<void> {
  for (const name of LEAN_INDEXES) await client.execute(`DROP INDEX ${name}`)
  for (const statement of INDEXES_0003) await client.execute(statement)
  await client.execute({ sql: 'DELETE FROM __drizzle_migrations WHERE created_at = ?', args: [when0004] })
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

describe('0003 → 0004 with rows in the ledger', () => {
  test('every entry, running total and claim survives; replays still charge nothing; older code can no longer claim', async () => {
    const client = t.deps.database.client
    await backTo0003(client)
    expect((await entryIndexes(client)).map(sql => sql.split(' ON ')[0])).toEqual([
      'CREATE UNIQUE INDEX `ledger_entries_idempotency_key_unique`', 'CREATE INDEX `ledger_entries_key`',
      'CREATE INDEX `ledger_entries_op`', 'CREATE INDEX `ledger_entries_org`',
    ])
    // Traffic under 0003 (today's code books on both schemas): settles from the allowance and
    // then prepaid, capped keys, billing keys, top-ups with and without a reference.
    const admin = await adminPrincipal(t, org)
    const overall = await createCappedKey(t, org, 'overall', 20n * USD)
    const daily = await createCappedKey(t, org, 'daily', 30n * USD)
    for (let index = 0; index < 30; index += 1) {
      const principal = [admin, overall.principal, daily.principal][index % 3]!
      const reservation = await admitOk(t, principal, 1n * USD, index % 5 === 0 ? { billingKey: `old-${index}` } : {})
      await t.deps.ledger.settle(reservation, 700_000_000n + BigInt(index) * 1_000_000n)
    }
    expect((await t.deps.ledger.topUp({ orgId: org.orgId, amount: 5n * USD, reference: 'invoice-1' })).applied).toBe(true)
    await t.deps.ledger.topUp({ orgId: org.orgId, amount: 1n * USD })
    await client.execute({ sql: OLD_CLAIM, args: [org.orgId] }) // older code claims fine under 0003
    await client.execute({ sql: 'INSERT INTO balances (org_id, prepaid_nanos, prepaid_leased_nanos) VALUES (?, 1, 0) ON CONFLICT(org_id) DO UPDATE SET prepaid_nanos = prepaid_nanos + 1', args: [org.orgId] })
    await verifyClean(t)
    const before = await snapshotLedger(client)
    const balanceBefore = await readBalance(client, t.deps.plans, t.clock, org.orgId)
    expect(Number(await countEntries(t, 'cap_window_start_ms IS NOT NULL'))).toBeGreaterThan(0)
    expect(Number(await countEntries(t, 'idempotency_key IS NOT NULL'))).toBe(6 + 1 + 1)

    await migrateDatabase(t.deps.database)
    expect(await entryIndexes(client)).toEqual([
      'CREATE UNIQUE INDEX `ledger_entries_idempotency_key_unique` ON `ledger_entries` (`idempotency_key`) WHERE "ledger_entries"."idempotency_key" IS NOT NULL',
      'CREATE INDEX `ledger_entries_key` ON `ledger_entries` (`key_id`,`cap_window_start_ms`) WHERE "ledger_entries"."cap_window_start_ms" IS NOT NULL',
      'CREATE INDEX `ledger_entries_org` ON `ledger_entries` (`org_id`,`source`)',
    ])
    expect(await snapshotLedger(client)).toEqual(before)
    expect(await readBalance(client, t.deps.plans, t.clock, org.orgId)).toEqual(balanceBefore)
    await verifyClean(t)

    // Claims made under 0003 still hold: a replayed billing key and top-up reference book nothing.
    const prepaid = await prepaidOf(t, org.orgId)
    const replay = await admitOk(t, admin, 1n * USD, { billingKey: 'old-0' })
    await t.deps.ledger.settle(replay, 900_000_000n)
    expect((await t.deps.ledger.topUp({ orgId: org.orgId, amount: 5n * USD, reference: 'invoice-1' })).applied).toBe(false)
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
    expect((await entryIndexes(client)).length).toBe(3)
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

describe('the queries on ledger_entries use its indexes after 0004 (EXPLAIN QUERY PLAN)', () => {
  test('balance, verify, and the claim checks of a billing-key settlement', async () => {
    const client = t.deps.database.client
    const schema = schemaOnly()
    const capped = await createCappedKey(t, org, 'monthly', 5n * USD)
    await t.deps.ledger.settle(await admitOk(t, capped.principal, USD, { billingKey: 'plan-1' }), USD / 2n)

    const recorded: InStatement[] = []
    await readBalance(recording(client, recorded), t.deps.plans, t.clock, org.orgId)
    expect(plan(schema, recorded[3]!)).toContain('SEARCH ledger_entries USING INDEX ledger_entries_org (org_id=? AND source=?)')

    recorded.length = 0
    await verifyLedger(recording(client, recorded), { nowMs: t.clock.now(), staleAfterMs: 60_000 })
    const verifyPlans = recorded.filter(statement => JSON.stringify(statement).includes('ledger_entries e')).map(statement => plan(schema, statement))
    // Prepaid and allowance totals per org, key spend per key and window.
    expect(verifyPlans[0]).toContain('SEARCH e USING INDEX ledger_entries_org (org_id=? AND source=?)')
    expect(verifyPlans[1]).toContain('SEARCH e USING INDEX ledger_entries_org (org_id=? AND source=?)')
    // Allowance entries without an allowances row: a scan by design (an audit, not a hot path;
    // it scanned before 0004 too).
    expect(verifyPlans[2]).toContain('SCAN e')
    expect(verifyPlans[3]).toContain('SEARCH e USING INDEX ledger_entries_key (key_id=? AND cap_window_start_ms=?)')

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
