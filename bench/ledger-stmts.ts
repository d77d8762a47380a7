// Where a settle batch's time goes, statement by statement (not a test):
//   bun bench/ledger-stmts.ts [--tree PATH] [--settles 24] [--batches 2000] [--rounds 5]
//                             [--scope allowance|prepaid-capped] [--prefill 200000] [--pragma 'cache_size=-8000']
//
// Runs the real LedgerWriter (from `--tree`, default this one, so a base tree can be compared)
// over an executor that does what NativeExecutor does (one libsql connection, WAL,
// synchronous=NORMAL, each SQL text prepared once, BEGIN IMMEDIATE … COMMIT) and times every
// statement. Batches are `--settles` settlements of one organization, as 32 connections form:
//   allowance        each settle from the org's allowance (the gateway bench's org: plan `pro`)
//   prepaid-capped   each settle from prepaid, on a key with a daily spend cap
// Reports, medians over rounds: µs per batch for each statement (labelled by its first words),
// for the whole transaction, and WAL frames per commit. Process CPU time around each call (the
// getrusage call itself adds ~1 µs to each); no checkpointer runs (the WAL is truncated between
// rounds).

import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import Libsql from 'libsql'
import type { BatchExecutor, Statement, StatementResult } from '../src/billing/executor'
import type { EntryRow, LeaseRef } from '../src/billing/ledger-ops'
import type { LedgerWriter as Writer, SettleOp } from '../src/billing/ledger-writer'
import { migrateDatabase, openDatabase } from '../src/db/client'

const argv = process.argv.slice(2)
const option = (name: string, fallback: string) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1]! : fallback)
const TREE = resolve(option('tree', resolve(import.meta.dir, '..')))
const SETTLES = Number(option('settles', '24'))
const BATCHES = Number(option('batches', '2000'))
const ROUNDS = Number(option('rounds', '5'))
const SCOPE = option('scope', 'allowance')
const PREFILL = Number(option('prefill', '200000'))
const PRAGMAS = argv.flatMap((arg, index) => (arg === '--pragma' ? [argv[index + 1]!] : []))
const PAGE = 4096
const MONTH = Date.UTC(2026, 10, 1)
const DAY = Date.UTC(2026, 10, 25)

const { LedgerWriter } = (await import(join(TREE, 'src/billing/ledger-writer.ts'))) as { LedgerWriter: new (executor: BatchExecutor) => Writer }

const directory = mkdtempSync(join(tmpdir(), 'ledger-stmts-'))
const path = join(directory, 'ledger.db')
const migrated = await openDatabase(`file:${path}`)
await migrateDatabase(migrated)
migrated.close()

const database = new Libsql(path, { timeout: 5000 })
database.defaultSafeIntegers(true)
database.exec('PRAGMA journal_mode=WAL')
database.exec('PRAGMA synchronous=NORMAL')
database.exec('PRAGMA wal_autocheckpoint=0')
for (const pragma of PRAGMAS) database.exec(`PRAGMA ${pragma}`)

// One org with an allowance, a prepaid balance, a capped key, and a lease on each scope.
const orgId = 'org-0193a1b2c3d4e5f60718293a4b5c6d7e'
const keyId = 'key-0193a1b2c3d4e5f60718293a4b5c6d7e'
const run = (sql: string, ...args: unknown[]) => database.prepare(sql).run(args)
run("INSERT INTO users (id, email, created_at_ms) VALUES ('u', 'u@example.test', 0)")
run("INSERT INTO orgs (id, name, plan_id, created_at_ms) VALUES (?, 'bench', 'pro', 0)", orgId)
run(
  `INSERT INTO api_keys (id, org_id, user_id, name, secret_hash, admin, status, created_at_ms, spend_cap_period, spend_cap_nanos)
   VALUES (?, ?, 'u', 'k', 'hash', 0, 'active', 0, 'daily', ?)`,
  keyId, orgId, 10n ** 18n,
)
const LEASE = 10n ** 17n
const leases: Record<string, LeaseRef> = {
  allowance: { id: 'boot|allowance', scope: 'allowance', orgId, keyId: null, periodStartMs: MONTH },
  prepaid: { id: 'boot|prepaid', scope: 'prepaid', orgId, keyId: null, periodStartMs: 0 },
  key_cap: { id: 'boot|key_cap', scope: 'key_cap', orgId, keyId, periodStartMs: DAY },
}
run('INSERT INTO balances (org_id, prepaid_nanos, prepaid_leased_nanos) VALUES (?, ?, ?)', orgId, 10n ** 18n, LEASE)
run('INSERT INTO allowances (org_id, period_start_ms, granted_nanos, used_nanos, leased_nanos) VALUES (?, ?, ?, 0, ?)', orgId, MONTH, 10n ** 18n, LEASE)
run('INSERT INTO key_spend (key_id, window_start_ms, spent_nanos, leased_nanos) VALUES (?, ?, 0, ?)', keyId, DAY, LEASE)
for (const lease of Object.values(leases)) {
  run(
    `INSERT INTO leases (id, instance_id, boot_id, scope, org_id, key_id, period_start_ms, amount_nanos, last_grant_nanos, updated_at_ms)
     VALUES (?, 'bench', 'boot', ?, ?, ?, ?, ?, 0, 0)`,
    lease.id, lease.scope, lease.orgId, lease.keyId, lease.periodStartMs, LEASE,
  )
}

let sequence = 0
const id = () => `0193${(sequence++).toString(16).padStart(28, '0')}`
function settle(): SettleOp {
  const amount = 1_000_000n + BigInt(sequence % 1000)
  const allowance = SCOPE === 'allowance'
  const entry: EntryRow = {
    opId: id(), idempotencyKey: null, orgId, keyId, kind: 'settle', source: allowance ? 'allowance' : 'top_up', amountNanos: amount,
    periodStartMs: allowance ? MONTH : null, capWindowStartMs: allowance ? null : DAY, purpose: 'chat', requestId: id(), note: null,
    createdAtMs: 1_795_000_000_000 + sequence,
  }
  return {
    kind: 'settle', entries: [entry], nowMs: entry.createdAtMs,
    allowance: allowance ? { periodStartMs: MONTH, amount } : null,
    keySpend: allowance ? null : { keyId, windowStartMs: DAY, amount, overallCap: false },
    leaseDraws: allowance ? [{ lease: leases.allowance!, amount }] : [{ lease: leases.prepaid!, amount }, { lease: leases.key_cap!, amount }],
  }
}

// Prefill through the writer itself, so the table and its indexes have a realistic depth.
const label = (sql: string) => sql.trim().split(/\s+/).slice(0, 3).join(' ')
let timing: Map<string, number> | null = null
const prepared = new Map<string, { statement: Libsql.Statement<unknown[]>; reader: boolean }>()
const begin = database.prepare('BEGIN IMMEDIATE')
const commit = database.prepare('COMMIT')
// Process CPU time (µs), not wall time: on a shared machine preemption moves wall time far more.
const cpuUs = () => {
  const usage = process.cpuUsage()
  return usage.user + usage.system
}
const add = (name: string, since: number) => {
  const now = cpuUs()
  if (timing) timing.set(name, (timing.get(name) ?? 0) + (now - since))
  return now
}
const executor: BatchExecutor = {
  async write(statements: readonly Statement[]): Promise<StatementResult[]> {
    const results: StatementResult[] = []
    let at = cpuUs()
    begin.run()
    at = add('BEGIN', at)
    for (const statement of statements) {
      let entry = prepared.get(statement.sql)
      if (entry === undefined) {
        const made = database.prepare(statement.sql)
        prepared.set(statement.sql, (entry = { statement: made, reader: made.reader }))
      }
      if (entry.reader) results.push({ changes: 0, rows: entry.statement.all(statement.args) as Array<Record<string, unknown>> })
      else results.push({ changes: entry.statement.run(statement.args).changes, rows: [] })
      at = add(label(statement.sql), at)
    }
    commit.run()
    add('COMMIT', at)
    return results
  },
  close: () => {},
}
const writer = new LedgerWriter(executor)
async function batches(count: number): Promise<void> {
  for (let index = 0; index < count; index += 1) await Promise.all(Array.from({ length: SETTLES }, () => writer.submit(settle())))
}
await batches(Math.ceil(PREFILL / SETTLES))
database.exec('PRAGMA wal_checkpoint(TRUNCATE)')

const rounds: Array<Record<string, number>> = []
for (let round = 0; round <= ROUNDS; round += 1) {
  timing = new Map()
  const walBefore = statSync(`${path}-wal`).size
  await batches(BATCHES)
  const frames = (statSync(`${path}-wal`).size - walBefore) / (PAGE + 24) / BATCHES
  const perBatch = Object.fromEntries([...timing].map(([name, us]) => [name, us / BATCHES]))
  perBatch.total = [...timing.values()].reduce((a, b) => a + b, 0) / BATCHES
  perBatch.wal_frames = frames
  // Round 0 warms up.
  if (round > 0) rounds.push(perBatch)
  database.exec('PRAGMA wal_checkpoint(TRUNCATE)')
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const names = Object.keys(rounds[0]!)
const report = Object.fromEntries(names.map(name => [name, Number(median(rounds.map(r => r[name] ?? 0)).toFixed(1))]))
console.log(JSON.stringify({ tree: TREE, scope: SCOPE, settles_per_batch: SETTLES, batches: BATCHES, rounds: ROUNDS, pragmas: PRAGMAS, us_per_batch: report }, null, 1))
database.close()
rmSync(directory, { recursive: true, force: true })
