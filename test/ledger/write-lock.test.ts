import { afterEach, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Libsql from 'libsql'
import { NativeExecutor } from '../../src/billing/executor'

// Another process holding the database file's write lock (a second instance, an operator's
// sqlite3 session, a migration): the writer waits for it between event-loop turns. SQLite's own
// busy-wait is synchronous, so with a busy timeout every route and stream of the process froze
// for as long as the lock was held, up to the timeout per batch and per health probe.

let dir: string | undefined
afterEach(() => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  dir = undefined
})

/** A database file with a table, a writer on it, and another connection ("process") that can take its write lock. */
async function setup(busyWaitMs?: number) {
  dir = mkdtempSync(join(tmpdir(), 'svc-lock-'))
  const path = join(dir, 'ledger.db')
  const executor = new NativeExecutor(path, busyWaitMs)
  await executor.write([{ sql: 'CREATE TABLE entries (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)', args: [] }])
  const other = new Libsql(path, { timeout: 0 })
  const rows = () => Number((other.prepare('SELECT count(*) AS n FROM entries').get() as { n: number | bigint }).n)
  return { executor, other, rows }
}

const turn = () => new Promise(resolve => setImmediate(resolve))

test('a batch waits for the lock without blocking the event loop, then commits', async () => {
  const { executor, other, rows } = await setup()
  other.prepare('BEGIN IMMEDIATE').run()
  let settled = false
  const write = executor.write([{ sql: 'INSERT INTO entries (amount) VALUES (?)', args: [1n] }]).finally(() => (settled = true))
  // The loop keeps turning while the batch waits (a synchronous busy-wait would not let one run).
  for (let index = 0; index < 20; index++) await turn()
  expect(settled).toBe(false)
  other.prepare('COMMIT').run()
  expect(await write).toHaveLength(1)
  expect(rows()).toBe(1)
  executor.close()
  other.close()
})

test('a lock held past the wait fails the batch with SQLITE_BUSY, and nothing of it is written', async () => {
  const { executor, other, rows } = await setup(20)
  other.prepare('BEGIN IMMEDIATE').run()
  const failure = await executor.write([{ sql: 'INSERT INTO entries (amount) VALUES (?)', args: [1n] }]).catch(error => error)
  expect((failure as { code?: string }).code).toBe('SQLITE_BUSY')
  other.prepare('COMMIT').run()
  expect(rows()).toBe(0)
  // The writer is not stuck: the next batch goes through.
  await executor.write([{ sql: 'INSERT INTO entries (amount) VALUES (?)', args: [2n] }])
  expect(rows()).toBe(1)
  executor.close()
  other.close()
})

test('once a batch has waited out a held lock, the next ones try once while it is held; a commit ends that', async () => {
  // Batches run one at a time: each used to wait the whole budget again, so a settlement queued
  // behind heartbeats and probes waited as long as the lock was held, past its three tries.
  const { executor, other, rows } = await setup(40)
  other.prepare('BEGIN IMMEDIATE').run()
  const insert = (amount: bigint) => executor.write([{ sql: 'INSERT INTO entries (amount) VALUES (?)', args: [amount] }])
  expect(((await insert(1n).catch(error => error)) as { code?: string }).code).toBe('SQLITE_BUSY')
  // The next batch fails without waiting: before a few event-loop turns have passed.
  let failedAt: number | undefined
  let turns = 0
  const next = insert(2n).catch(error => {
    failedAt = turns
    return error
  })
  for (; turns < 3; turns++) await turn()
  expect(failedAt).toBe(0)
  expect(((await next) as { code?: string }).code).toBe('SQLITE_BUSY')
  other.prepare('COMMIT').run()
  // Released: a batch commits, and the one after it waits for a lock again as before.
  await insert(3n)
  expect(rows()).toBe(1)
  other.prepare('BEGIN IMMEDIATE').run()
  let settled = false
  const waiting = insert(4n).finally(() => (settled = true))
  for (let index = 0; index < 5; index++) await turn()
  expect(settled).toBe(false)
  other.prepare('COMMIT').run()
  await waiting
  expect(rows()).toBe(2)
  executor.close()
  other.close()
})

test('a batch that meets another connection recovering the WAL (SQLITE_BUSY_RECOVERY) waits and commits, as for SQLITE_BUSY', async () => {
  // Seen in CI: the first write to a fresh file met the checkpointer's connection recovering the
  // WAL on its native thread, and the batch failed instead of waiting.
  const { executor, other, rows } = await setup()
  const inner = executor as unknown as { begin: { run(): unknown } }
  const begin = inner.begin
  let recovering = 2
  inner.begin = {
    run: () => {
      if (recovering-- > 0) throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY_RECOVERY' })
      return begin.run()
    },
  }
  await executor.write([{ sql: 'INSERT INTO entries (amount) VALUES (?)', args: [1n] }])
  expect(recovering).toBe(-1)
  expect(rows()).toBe(1)
  executor.close()
  other.close()
})
