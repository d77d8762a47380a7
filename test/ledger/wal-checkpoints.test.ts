import { afterEach, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { NativeExecutor, type Statement } from '../../src/billing/executor'
import { openDatabase } from '../../src/db/client'

// The writer's WAL checkpoints (executor.ts, WalCheckpointer): the WAL must restart often enough
// to stay under SQLite's 1000-frame autocheckpoint, which other connections of the process still
// use (past it, their next write would checkpoint the whole WAL on the event loop), and every
// commit must reach the database file.

const PAGE = 4096
const AUTOCHECKPOINT_FRAMES = 1000
let dir: string | undefined

afterEach(() => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  dir = undefined
})

/** Frames the WAL file has held at most: SQLite does not truncate it on a restart, so its size is the high-water mark. */
function walFrames(path: string): number {
  const size = statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0
  return size <= 32 ? 0 : (size - 32) / (PAGE + 24)
}

test('a long run of commits keeps the WAL under the autocheckpoint and loses none of them', async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-wal-'))
  const path = join(dir, 'ledger.db')
  const executor = new NativeExecutor(path)
  // Rows over two tables and an index: several pages change per commit, as in a ledger batch.
  await executor.write([{ sql: 'CREATE TABLE entries (id INTEGER PRIMARY KEY, org TEXT NOT NULL, amount INTEGER NOT NULL)', args: [] }])
  await executor.write([{ sql: 'CREATE INDEX entries_org ON entries (org, amount)', args: [] }])
  await executor.write([{ sql: 'CREATE TABLE totals (org TEXT PRIMARY KEY, amount INTEGER NOT NULL)', args: [] }])
  const commits = 3000
  let expected = 0n
  for (let commit = 0; commit < commits; commit += 1) {
    const statements: Statement[] = []
    for (let row = 0; row < 8; row += 1) {
      const org = `org-${(commit * 8 + row) % 97}`
      const amount = BigInt(commit * 8 + row + 1)
      expected += amount
      statements.push({ sql: 'INSERT INTO entries (org, amount) VALUES (?, ?)', args: [org, amount] })
      statements.push({ sql: 'INSERT INTO totals (org, amount) VALUES (?, ?) ON CONFLICT (org) DO UPDATE SET amount = amount + excluded.amount', args: [org, amount] })
    }
    await executor.write(statements)
  }
  // Without restarts (or with SQLite's own autocheckpoint instead) the WAL reaches the bound.
  expect(walFrames(path)).toBeGreaterThan(0)
  expect(walFrames(path)).toBeLessThan(AUTOCHECKPOINT_FRAMES)
  executor.close()

  // Every commit is in the database, read through another connection after the writer closed.
  const database = await openDatabase(`file:${path}`)
  try {
    const { rows } = await database.client.execute('SELECT COUNT(*) AS entries, SUM(amount) AS total, (SELECT SUM(amount) FROM totals) AS totals FROM entries')
    expect(rows[0]).toMatchObject({ entries: BigInt(commits * 8), total: expected, totals: expected })
  } finally {
    database.close()
  }
})

/** The WAL header's salts: a restart changes them (https://sqlite.org/fileformat.html#the_write_ahead_log). */
function walSalts(path: string): string {
  return readFileSync(`${path}-wal`).subarray(16, 24).toString('hex')
}

test('the catch-up restarts the WAL on its own connection, so the writer only appends', async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-wal-'))
  const path = join(dir, 'ledger.db')
  const executor = new NativeExecutor(path)
  const checkpointer = (executor as unknown as { checkpointer: { restartDue: boolean; catchUp(): Promise<void> } }).checkpointer
  await executor.write([{ sql: 'CREATE TABLE entries (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)', args: [] }])
  const insert = (amount: number): Statement[] => [{ sql: 'INSERT INTO entries (amount) VALUES (?)', args: [amount] }]
  for (let commit = 0; !checkpointer.restartDue; commit += 1) await executor.write(insert(commit))

  // What write() does before its next transaction when a restart is due.
  const before = walSalts(path)
  await checkpointer.catchUp()
  const restarted = walSalts(path)
  expect(restarted).not.toBe(before)
  // The writer's transaction appends to the restarted WAL (a restart would change the salts
  // again, and write and fsync a new header on the event loop).
  await executor.write(insert(-1))
  expect(walSalts(path)).toBe(restarted)
  executor.close()

  const database = await openDatabase(`file:${path}`)
  try {
    const { rows } = await database.client.execute('SELECT MIN(amount) AS least FROM entries')
    expect(rows[0]).toMatchObject({ least: -1n })
  } finally {
    database.close()
  }
})
