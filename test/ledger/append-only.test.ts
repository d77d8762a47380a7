import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { NativeExecutor } from '../../src/billing/executor'
import { verifyLedger } from '../../src/billing/verify'
import { migrateDatabase, openDatabase } from '../../src/db/client'
import type { TestApp, TestOrg } from '../support/harness'
import { USD, adminPrincipal, admitOk, buildPaygApp, countEntries, snapshotLedger } from './fixtures'

// L2 (SECURITY-NOTES.md §3): ledger_entries is append-only. Corrections are new entries; an
// UPDATE or DELETE raises, whichever connection or driver issues it, and changes nothing.

let t: TestApp
let org: TestOrg

beforeEach(async () => {
  t = await buildPaygApp()
  org = await t.createOrg('acme', 10n * USD)
  await t.deps.ledger.settle(await admitOk(t, await adminPrincipal(t, org), 50_000_000n), 20_000_000n)
})
afterEach(async () => {
  await t.close()
})

const TAMPERING = [
  'UPDATE ledger_entries SET amount_nanos = 0',
  "UPDATE ledger_entries SET note = 'edited' WHERE kind = 'settle'",
  'UPDATE ledger_entries SET amount_nanos = amount_nanos WHERE 1 = 0 OR id = (SELECT MIN(id) FROM ledger_entries)',
  'DELETE FROM ledger_entries',
  "DELETE FROM ledger_entries WHERE kind = 'settle'",
]

describe('append-only ledger_entries', () => {
  for (const sql of TAMPERING) {
    test(`raises through @libsql/client: ${sql}`, async () => {
      const before = await snapshotLedger(t.deps.database.client)
      await expect(t.deps.database.client.execute(sql)).rejects.toThrow(/append-only/)
      expect(await snapshotLedger(t.deps.database.client)).toEqual(before)
    })
  }

  test('raises through the ledger writer, and the rest of that op rolls back with it', async () => {
    const before = await snapshotLedger(t.deps.database.client)
    const op = t.deps.writer.submit({
      kind: 'plain',
      statements: [
        { sql: 'UPDATE balances SET prepaid_nanos = prepaid_nanos + 1000 WHERE org_id = ?', args: [org.orgId] },
        { sql: 'DELETE FROM ledger_entries WHERE org_id = ?', args: [org.orgId] },
      ],
      interpret: () => undefined,
    })
    await expect(op).rejects.toThrow(/append-only/)
    expect(await snapshotLedger(t.deps.database.client)).toEqual(before)
  })

  test('raises through drizzle', async () => {
    const { ledgerEntries } = await import('../../src/db/schema')
    await expect(t.deps.database.db.delete(ledgerEntries).execute()).rejects.toThrow()
    await expect(t.deps.database.db.update(ledgerEntries).set({ amountNanos: 1n }).execute()).rejects.toThrow()
    expect(await countEntries(t)).toBe(2n)
  })

  test('INSERT still works (corrections are new entries) and verify notices a dropped trigger', async () => {
    expect(await verifyLedger(t.deps.database.client, { nowMs: t.clock.now(), staleAfterMs: 60_000 })).toEqual([])
    await t.deps.database.client.execute('DROP TRIGGER ledger_entries_no_delete')
    const problems = await verifyLedger(t.deps.database.client, { nowMs: t.clock.now(), staleAfterMs: 60_000 })
    expect(problems).toEqual(['missing ledger_entries_no_delete'])
  })

  test('a reused idempotency key is refused by the unique index', async () => {
    await t.deps.ledger.topUp({ orgId: org.orgId, amount: 5n, reference: 'ref-1' })
    const insert = (opId: string) =>
      t.deps.database.client.execute({
        sql: `INSERT INTO ledger_entries (op_id, idempotency_key, org_id, kind, source, amount_nanos, created_at_ms)
              VALUES (?, 'top_up:ref-1', ?, 'top_up', 'top_up', 5, 0)`,
        args: [opId, org.orgId],
      })
    await expect(insert('another-op')).rejects.toThrow(/UNIQUE/)
  })
})

test('the triggers also hold on a local file database through the native writer (NativeExecutor)', async () => {
  const directory = mkdtempSync(join(tmpdir(), 'svc-append-only-'))
  try {
    const url = `file:${join(directory, 'ledger.db')}`
    const database = await openDatabase(url)
    await migrateDatabase(database)
    await database.client.execute(`INSERT INTO ledger_entries (op_id, org_id, kind, source, amount_nanos, created_at_ms) VALUES ('op', 'org', 'top_up', 'top_up', 5, 0)`)
    const executor = new NativeExecutor(join(directory, 'ledger.db'))
    await expect(executor.write([{ sql: 'UPDATE ledger_entries SET amount_nanos = 6', args: [] }])).rejects.toThrow(/append-only/)
    await expect(executor.write([{ sql: 'DELETE FROM ledger_entries', args: [] }])).rejects.toThrow(/append-only/)
    // The failed transaction was rolled back: the writer can go on.
    const [result] = await executor.write([{ sql: 'SELECT amount_nanos FROM ledger_entries', args: [] }])
    expect(result!.rows.map(row => BigInt(row.amount_nanos as bigint))).toEqual([5n])
    executor.close()
    database.close()
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
})
