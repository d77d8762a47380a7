// The cost of one settle entry in the writer's transaction, schema by schema (not a test):
// `bun bench/ledger-rows.ts [--rounds N] [--batches N] [--rows N] [--prefill N] [--orgs N]`.
//
// Five variants, each on its own database file (WAL, synchronous=NORMAL, prepared statements
// reused, as NativeExecutor does), alternated round by round so a busy machine loads them alike:
//   0003/13   the ledger_entries indexes of 0001–0003, 13 bound values per row (before)
//   0003/10   same indexes, kind/idempotency_key/note written into the SQL
//   0004/13   the indexes of 0004_ledger_lean_indexes, 13 bound values per row
//   0004/10   both (after)
//   0005/10   and 0005_ledger_running_totals: only the partial idempotency index
// Each batch is BEGIN IMMEDIATE, one multi-row INSERT of `--rows` settle entries (~24: what 32
// connections put in a batch), COMMIT. The rows look like the writer's: a third on capped keys
// (cap_window_start_ms set), a quarter from the allowance, no idempotency key. Reported per
// variant, medians over rounds: CPU µs per row of the INSERT and per COMMIT (process CPU time,
// so other processes' load moves it less than wall time), and WAL frames written per COMMIT.

import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Libsql from 'libsql'
import { insertEntries, insertSettleEntries, type EntryRow } from '../src/billing/ledger-ops'
import { migrationsFolder } from '../src/db/client'

const argv = process.argv.slice(2)
const option = (name: string, fallback: number) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : fallback)
const ROUNDS = option('rounds', 6)
const BATCHES = option('batches', 1500)
const ROWS = option('rows', 24)
// Rows already in the table, so the indexes have a realistic depth.
const PREFILL = option('prefill', 200_000)
// Organizations (keys: three each) the rows spread over: 1 is bench/ledger.ts's one-organization
// case, where a batch's index entries share a few leaf pages; 64 spreads them over many.
const ORGS = option('orgs', 64)
const PAGE = 4096

const folder = migrationsFolder()
const journal = (JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as { entries: Array<{ tag: string }> }).entries.map(entry => entry.tag)
const upTo = (tag: string) => journal.slice(0, journal.indexOf(tag) + 1)

let sequence = 0
const id = () => `0193${(sequence++).toString(16).padStart(28, '0')}`
const orgIds = Array.from({ length: ORGS }, (_, index) => `org-${index.toString().padStart(32, '0')}`)
const keyIds = Array.from({ length: ORGS * 3 }, (_, index) => `key-${index.toString().padStart(32, '0')}`)

function row(index: number): EntryRow {
  const key = index % keyIds.length
  const allowance = index % 4 === 0
  return {
    opId: id(), idempotencyKey: null, orgId: orgIds[key % ORGS]!, keyId: keyIds[key]!, kind: 'settle', source: allowance ? 'allowance' : 'top_up',
    amountNanos: 1_000_000n + BigInt(index % 1000), periodStartMs: allowance ? 1_793_491_200_000 : null, capWindowStartMs: key % 3 === 0 ? 0 : null,
    purpose: 'chat', requestId: id(), note: null, createdAtMs: 1_795_000_000_000 + index,
  }
}

interface Variant {
  name: string
  database: Libsql.Database
  wal: string
  insert: (rows: EntryRow[]) => { sql: string; args: readonly unknown[] }
  prepared: Map<string, Libsql.Statement<unknown[]>>
  samples: { insertUsPerRow: number[]; commitUs: number[]; framesPerCommit: number[] }
}

const directory = mkdtempSync(join(tmpdir(), 'ledger-rows-'))
function variant(name: string, lastMigration: string, insert: Variant['insert']): Variant {
  const path = join(directory, `${name.replace('/', '-')}.db`)
  const database = new Libsql(path)
  database.exec('PRAGMA journal_mode=WAL')
  database.exec('PRAGMA synchronous=NORMAL')
  for (const tag of upTo(lastMigration)) database.exec(readFileSync(join(folder, `${tag}.sql`), 'utf8').replaceAll('--> statement-breakpoint', ''))
  const prefill = database.prepare(insertEntries([row(0)]).sql)
  database.exec('BEGIN')
  for (let index = 0; index < PREFILL; index += 1) prefill.run(insertEntries([row(index)]).args)
  database.exec('COMMIT')
  database.exec('PRAGMA wal_checkpoint(TRUNCATE)')
  database.exec('PRAGMA wal_autocheckpoint=0')
  return { name, database, wal: `${path}-wal`, insert, prepared: new Map(), samples: { insertUsPerRow: [], commitUs: [], framesPerCommit: [] } }
}

const cpuUs = () => {
  const usage = process.cpuUsage()
  return usage.user + usage.system
}

function round(v: Variant): void {
  const begin = v.database.prepare('BEGIN IMMEDIATE')
  const commit = v.database.prepare('COMMIT')
  const batches = Array.from({ length: BATCHES }, () => Array.from({ length: ROWS }, (_, index) => row(sequence + index)))
  let insertUs = 0
  let commitUs = 0
  const walBefore = statSync(v.wal).size
  for (const rows of batches) {
    const statement = v.insert(rows)
    let prepared = v.prepared.get(statement.sql)
    if (prepared === undefined) v.prepared.set(statement.sql, (prepared = v.database.prepare(statement.sql)))
    begin.run()
    const start = cpuUs()
    prepared.run(statement.args as unknown[])
    const inserted = cpuUs()
    commit.run()
    const committed = cpuUs()
    insertUs += inserted - start
    commitUs += committed - inserted
  }
  const frames = (statSync(v.wal).size - walBefore) / (PAGE + 24)
  v.samples.insertUsPerRow.push(insertUs / (BATCHES * ROWS))
  v.samples.commitUs.push(commitUs / BATCHES)
  v.samples.framesPerCommit.push(frames / BATCHES)
  v.database.exec('PRAGMA wal_checkpoint(TRUNCATE)')
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const variants = [
  variant('0003/13', '0003_oauth', insertEntries),
  variant('0003/10', '0003_oauth', insertSettleEntries),
  variant('0004/13', '0004_ledger_lean_indexes', insertEntries),
  variant('0004/10', '0004_ledger_lean_indexes', insertSettleEntries),
  variant('0005/10', '0005_ledger_running_totals', insertSettleEntries),
]
// One warm-up round each, not recorded.
for (const v of variants) {
  round(v)
  v.samples = { insertUsPerRow: [], commitUs: [], framesPerCommit: [] }
}
for (let index = 0; index < ROUNDS; index += 1) for (const v of index % 2 === 0 ? variants : [...variants].reverse()) round(v)

const report = Object.fromEntries(
  variants.map(v => [
    v.name,
    {
      insert_cpu_us_per_row: Number(median(v.samples.insertUsPerRow).toFixed(2)),
      commit_cpu_us: Number(median(v.samples.commitUs).toFixed(1)),
      wal_frames_per_commit: Number(median(v.samples.framesPerCommit).toFixed(2)),
      insert_cpu_us_per_row_all: v.samples.insertUsPerRow.map(value => Number(value.toFixed(2))),
    },
  ]),
)
console.log(JSON.stringify({ rounds: ROUNDS, batches_per_round: BATCHES, rows_per_batch: ROWS, prefill: PREFILL, orgs: ORGS, variants: report }, null, 2))
for (const v of variants) v.database.close()
rmSync(directory, { recursive: true, force: true })
