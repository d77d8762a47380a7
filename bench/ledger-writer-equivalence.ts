// Differential check of the writer's aggregated settle statements (not a test, not timed):
// `bun bench/ledger-writer-equivalence.ts [--rounds N]`.
//
// LedgerWriter folds a batch's settlements into one statement per kind over a VALUES list. This
// applies the same random batches two ways to copies of one seeded database file:
//   reference  the single-op statements of ledger-ops.ts (addPrepaid, addAllowanceUsed,
//              addKeySpend, drawLease, recomputeLeased, expireExhaustedKey), one per
//              organization, key window and lease, as the writer did before;
//   writer     the real LedgerWriter on a NativeExecutor;
// and requires identical tables and identical SettleResults. Run it after changing either side.

import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Libsql from 'libsql'
import { NativeExecutor, type Statement } from '../src/billing/executor'
import {
  addAllowanceUsed, addKeySpend, addPrepaid, drawLease, expireExhaustedKey, insertEntries, recomputeLeased,
  type EntryRow, type LeaseRef,
} from '../src/billing/ledger-ops'
import { LedgerWriter, type SettleOp } from '../src/billing/ledger-writer'
import { migrateDatabase, openDatabase } from '../src/db/client'

const argv = process.argv.slice(2)
const ROUNDS = Number(argv[argv.indexOf('--rounds') + 1] || 2000)
const ORGS = 40
const KEYS_PER_ORG = 4
// Rounds stay within the writer's MAX_BATCH (64), so each round is exactly one batch on both sides.
const MAX_OPS_PER_ROUND = 64
const MONTH = Date.UTC(2026, 10, 1)
const DAY = Date.UTC(2026, 10, 22)

// xorshift32: deterministic, and uniform enough over small ranges.
let state = 0x9e3779b9
const rand = (n: number) => {
  state ^= state << 13
  state ^= state >>> 17
  state ^= state << 5
  return (state >>> 0) % n
}

// Key k of an org: overall cap, daily cap, or none; capped keys have a key_cap lease.
const capOf = (k: number) => (['overall', 'daily', null] as const)[k % 3]!
const windowOf = (k: number) => (capOf(k) === 'overall' ? 0 : DAY)

/** A migrated database with orgs, keys (some capped), balances, allowances and leases. */
async function seedDatabase(path: string): Promise<void> {
  const database = await openDatabase(`file:${path}`)
  await migrateDatabase(database)
  database.close()
  const db = new Libsql(path)
  db.defaultSafeIntegers(true)
  const run = (sql: string, ...args: unknown[]) => db.prepare(sql).run(args)
  run("INSERT INTO users (id, email, created_at_ms) VALUES ('u', 'u@example.test', 0)")
  for (let o = 0; o < ORGS; o += 1) {
    const orgId = `org${o}`
    run('INSERT INTO orgs (id, name, plan_id, created_at_ms) VALUES (?, ?, ?, 0)', orgId, orgId, 'pro')
    // A third of the orgs have no balances row yet: the prepaid upsert must create it.
    if (o % 3 !== 0) run('INSERT INTO balances (org_id, prepaid_nanos, prepaid_leased_nanos) VALUES (?, ?, 0)', orgId, 1_000_000_000n)
    run('INSERT INTO allowances (org_id, period_start_ms, granted_nanos, used_nanos, leased_nanos) VALUES (?, ?, ?, 0, 0)', orgId, MONTH, 50_000_000n)
    for (const scope of ['prepaid', 'allowance']) {
      run(
        `INSERT INTO leases (id, instance_id, boot_id, scope, org_id, key_id, period_start_ms, amount_nanos, last_grant_nanos, updated_at_ms)
         VALUES (?, 'bench', 'boot', ?, ?, NULL, ?, ?, 0, 0)`,
        `L-${scope}-${orgId}`, scope, orgId, scope === 'allowance' ? MONTH : 0, 20_000_000n,
      )
    }
    for (let k = 0; k < KEYS_PER_ORG; k += 1) {
      const keyId = `key${o}-${k}`
      const cap = capOf(k)
      run(
        `INSERT INTO api_keys (id, org_id, user_id, name, secret_hash, admin, status, created_at_ms, spend_cap_period, spend_cap_nanos)
         VALUES (?, ?, 'u', 'k', ?, 0, 'active', 0, ?, ?)`,
        keyId, orgId, `hash-${keyId}`, cap, cap ? 30_000_000n + BigInt(k) * 10_000_000n : null,
      )
      if (!cap) continue
      // Half the capped keys have no key_spend row yet: the key-spend upsert must create it.
      if (k % 2 === 0) run('INSERT INTO key_spend (key_id, window_start_ms, spent_nanos, leased_nanos) VALUES (?, ?, 0, 0)', keyId, windowOf(k))
      run(
        `INSERT INTO leases (id, instance_id, boot_id, scope, org_id, key_id, period_start_ms, amount_nanos, last_grant_nanos, updated_at_ms)
         VALUES (?, 'bench', 'boot', 'key_cap', ?, ?, ?, ?, 0, 0)`,
        `L-key-${keyId}`, orgId, keyId, windowOf(k), 15_000_000n,
      )
    }
  }
  db.exec(`UPDATE balances SET prepaid_leased_nanos = (SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE leases.org_id = balances.org_id AND scope = 'prepaid')`)
  db.exec(`UPDATE allowances SET leased_nanos = (SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE leases.org_id = allowances.org_id AND scope = 'allowance')`)
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
  db.close()
}

let opCounter = 0
/** A random settlement: allowance and/or prepaid, any key; draws of zero and beyond the lease. */
function randomSettle(): SettleOp {
  const o = rand(ORGS)
  const k = rand(KEYS_PER_ORG)
  const orgId = `org${o}`
  const keyId = `key${o}-${k}`
  const cap = capOf(k)
  const fromAllowance = BigInt(rand(3) === 0 ? 0 : rand(2_000_000))
  const fromPrepaid = BigInt(rand(4) === 0 ? 0 : rand(3_000_000))
  const actual = fromAllowance + fromPrepaid
  const opId = `op${(opCounter += 1)}`
  const entry = (source: 'allowance' | 'top_up', amount: bigint): EntryRow => ({
    opId, idempotencyKey: null, orgId, keyId, kind: 'settle', source, amountNanos: amount,
    periodStartMs: source === 'allowance' ? MONTH : null, capWindowStartMs: cap ? windowOf(k) : null,
    purpose: 'chat', requestId: null, note: null, createdAtMs: 1_000 + opCounter,
  })
  const entries: EntryRow[] = []
  if (fromAllowance > 0n) entries.push(entry('allowance', fromAllowance))
  if (fromPrepaid > 0n || entries.length === 0) entries.push(entry('top_up', fromPrepaid))
  const lease = (scope: LeaseRef['scope']): LeaseRef => ({
    id: scope === 'key_cap' ? `L-key-${keyId}` : `L-${scope}-${orgId}`, scope, orgId,
    keyId: scope === 'key_cap' ? keyId : null, periodStartMs: scope === 'allowance' ? MONTH : scope === 'key_cap' ? windowOf(k) : 0,
  })
  const leaseDraws: SettleOp['leaseDraws'] = []
  if (fromAllowance > 0n) leaseDraws.push({ lease: lease('allowance'), amount: fromAllowance })
  if (rand(5) !== 0) leaseDraws.push({ lease: lease('prepaid'), amount: rand(6) === 0 ? 0n : fromPrepaid * BigInt(1 + rand(3)) })
  if (cap) leaseDraws.push({ lease: lease('key_cap'), amount: actual })
  return {
    kind: 'settle', entries, nowMs: 5_000 + opCounter, leaseDraws,
    allowance: fromAllowance > 0n ? { periodStartMs: MONTH, amount: fromAllowance } : null,
    keySpend: cap ? { keyId, windowStartMs: windowOf(k), amount: actual, overallCap: cap === 'overall' } : null,
  }
}

/** The per-organization statements (the writer's aggregation before it used VALUES lists). */
function referenceStatements(settles: SettleOp[]): { statements: Statement[]; expiryKeys: string[] } {
  const statements: Statement[] = []
  const prepaid = new Map<string, bigint>()
  const allowance = new Map<string, { orgId: string; periodStartMs: number; amount: bigint }>()
  const keySpend = new Map<string, { keyId: string; windowStartMs: number; amount: bigint }>()
  const draws = new Map<string, { lease: LeaseRef; amount: bigint }>()
  const overallKeys = new Set<string>()
  const rows: EntryRow[] = []
  for (const settle of settles) {
    rows.push(...settle.entries)
    for (const entry of settle.entries) if (entry.source === 'top_up') prepaid.set(entry.orgId, (prepaid.get(entry.orgId) ?? 0n) + entry.amountNanos)
    const orgId = settle.entries[0]!.orgId
    if (settle.allowance) {
      const sum = allowance.get(orgId) ?? { orgId, periodStartMs: settle.allowance.periodStartMs, amount: 0n }
      sum.amount += settle.allowance.amount
      allowance.set(orgId, sum)
    }
    if (settle.keySpend) {
      const id = `${settle.keySpend.keyId}|${settle.keySpend.windowStartMs}`
      const sum = keySpend.get(id) ?? { keyId: settle.keySpend.keyId, windowStartMs: settle.keySpend.windowStartMs, amount: 0n }
      sum.amount += settle.keySpend.amount
      keySpend.set(id, sum)
      if (settle.keySpend.overallCap) overallKeys.add(settle.keySpend.keyId)
    }
    for (const draw of settle.leaseDraws) {
      const sum = draws.get(draw.lease.id) ?? { lease: draw.lease, amount: 0n }
      sum.amount += draw.amount
      draws.set(draw.lease.id, sum)
    }
  }
  const nowMs = settles[settles.length - 1]!.nowMs
  for (let start = 0; start < rows.length; start += 128) statements.push(insertEntries(rows.slice(start, start + 128)))
  for (const [orgId, amount] of prepaid) if (amount !== 0n) statements.push(addPrepaid(orgId, { spent: amount }))
  for (const sum of allowance.values()) statements.push(addAllowanceUsed(sum.orgId, sum.periodStartMs, sum.amount))
  for (const sum of keySpend.values()) statements.push(addKeySpend(sum.keyId, sum.windowStartMs, sum.amount))
  const parents = new Map<string, LeaseRef>()
  for (const { lease, amount } of draws.values()) {
    if (amount > 0n) statements.push(drawLease(lease.id, amount, nowMs))
    parents.set(`${lease.scope}|${lease.orgId}|${lease.keyId}|${lease.periodStartMs}`, lease)
  }
  for (const lease of parents.values()) statements.push(recomputeLeased(lease))
  const expiryKeys = [...overallKeys]
  for (const keyId of expiryKeys) statements.push(expireExhaustedKey(keyId))
  return { statements, expiryKeys }
}

function dump(path: string): Record<string, string> {
  const db = new Libsql(path)
  db.defaultSafeIntegers(true)
  const tables: Record<string, string> = {}
  for (const table of ['balances', 'allowances', 'key_spend', 'leases', 'api_keys', 'ledger_entries']) {
    // A lease row's updated_at_ms moves on by at least 1 with each write of it: one per batch
    // here, one per draw statement in the reference, so it is left out.
    const rows = db.prepare(`SELECT * FROM ${table} ORDER BY 1, 2`).all() as Array<Record<string, unknown>>
    if (table === 'leases') for (const row of rows) delete row.updated_at_ms
    tables[table] = JSON.stringify(rows, (_key, value) => (typeof value === 'bigint' ? value.toString() : value))
  }
  db.close()
  return tables
}

const directory = mkdtempSync(join(tmpdir(), 'svc-writer-equivalence-'))
const seedPath = join(directory, 'seed.db')
await seedDatabase(seedPath)
const paths = { reference: join(directory, 'reference.db'), writer: join(directory, 'writer.db') }
copyFileSync(seedPath, paths.reference)
copyFileSync(seedPath, paths.writer)
const referenceExecutor = new NativeExecutor(paths.reference)
const writerExecutor = new NativeExecutor(paths.writer)
const writer = new LedgerWriter(writerExecutor)

let resultMismatches = 0
let expired = 0
for (let round = 0; round < ROUNDS; round += 1) {
  const ops = Array.from({ length: 1 + rand(rand(4) === 0 ? MAX_OPS_PER_ROUND : 12) }, randomSettle)
  const { statements, expiryKeys } = referenceStatements(ops)
  const results = await referenceExecutor.write(statements)
  const expiredKeys = new Set(expiryKeys.filter((_keyId, index) => results[statements.length - expiryKeys.length + index]!.changes > 0))
  expired += expiredKeys.size
  const expected = ops.map(op => ({ keyExpired: op.keySpend !== null && expiredKeys.has(op.keySpend.keyId), duplicate: false }))
  // Submitted in one turn: one batch.
  const actual = await Promise.all(ops.map(op => writer.submit(op)))
  if (JSON.stringify(actual) !== JSON.stringify(expected)) resultMismatches += 1
  // Top some leases up again (identically on both sides), so draws keep landing above zero and
  // not only on the MAX(0, …) floor.
  const grants: Statement[] = []
  for (let index = rand(4); index > 0; index -= 1) {
    const settle = randomSettle()
    opCounter -= 1 // only its leases are used
    for (const { lease } of settle.leaseDraws) {
      grants.push({ sql: 'UPDATE leases SET amount_nanos = amount_nanos + ? WHERE id = ?', args: [BigInt(rand(20_000_000)), lease.id] }, recomputeLeased(lease))
    }
  }
  if (grants.length > 0) {
    await referenceExecutor.write(grants)
    await writerExecutor.write(grants)
  }
}
await writer.drain()
referenceExecutor.close()
writerExecutor.close()

const reference = dump(paths.reference)
const written = dump(paths.writer)
const differing = Object.keys(reference).filter(table => reference[table] !== written[table])
rmSync(directory, { recursive: true, force: true })
console.log(JSON.stringify({ rounds: ROUNDS, settles: opCounter, keys_expired: expired, result_mismatches: resultMismatches, differing_tables: differing }))
if (resultMismatches > 0 || differing.length > 0) process.exitCode = 1
