import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { verifyLedger } from '../../src/billing/verify'
import { utcMonth } from '../../src/lib/clock'
import { buildTestApp, type TestApp, type TestOrg } from '../support/harness'
import { USD, adminPrincipal, admitOk, configWith, createCappedKey } from './fixtures'

// `svc ledger verify` (ARCHITECTURE.md §7.6) is what the other ledger suites lean on, so each of
// its checks must actually fire: a consistent ledger verifies clean, and each kind of tampering
// with the running totals, leases or keys is reported.

let t: TestApp
let org: TestOrg
let keyId: string
let month: number

beforeEach(async () => {
  t = await buildTestApp({}, configWith({ plans: { basic: { monthly_allowance: '1', fusion: false } } }))
  org = await t.createOrg('acme', 10n * USD)
  const key = await createCappedKey(t, org, 'overall', 5n * USD)
  keyId = key.keyId
  month = utcMonth(t.clock.now()).startMs
  // Allowance and prepaid both used, a key cap window charged, and an open hold keeping leases.
  await t.deps.ledger.settle(await admitOk(t, key.principal, 1_500_000_000n), 1_500_000_000n)
  await admitOk(t, await adminPrincipal(t, org), 10_000_000n)
})
afterEach(async () => {
  await t.close()
})

const verify = () => verifyLedger(t.deps.database.client, { nowMs: t.clock.now(), staleAfterMs: t.deps.config.ledger.instanceStaleAfterMs })
const run = (sql: string, args: Array<string | number> = []) => t.deps.database.client.execute({ sql, args })

test('a consistent ledger (with open leases) verifies clean', async () => {
  expect(await verify()).toEqual([])
})

describe('each check fires', () => {
  const cases: Array<[string, () => Promise<unknown>, RegExp]> = [
    ['prepaid running total', () => run('UPDATE balances SET prepaid_nanos = prepaid_nanos + 1'), /balances\.prepaid_nanos .* != ledger entries/],
    ['top-up credited total', () => run('UPDATE balances SET top_up_credited_nanos = top_up_credited_nanos + 1'), /balances\.top_up_credited_nanos .* != credited top-up entries/],
    ['top-up spent total', () => run('UPDATE balances SET top_up_spent_nanos = top_up_spent_nanos + 1'), /balances\.top_up_spent_nanos .* != settled top-up entries/],
    ['allowance used total', () => run('UPDATE allowances SET used_nanos = used_nanos - 1, granted_nanos = granted_nanos'), /allowances\.used_nanos .* != ledger entries/],
    ['allowance entries without a period row', () => run('DELETE FROM allowances'), /allowance entries for period .* have no allowances row/],
    ['prepaid leased total', () => run('UPDATE balances SET prepaid_leased_nanos = prepaid_leased_nanos + 1'), /prepaid_leased_nanos .* != open leases/],
    ['allowance leased total', () => run('UPDATE allowances SET leased_nanos = leased_nanos + 1'), /allowances\.leased_nanos .* != open leases/],
    ['key window leased total', () => run('UPDATE key_spend SET leased_nanos = leased_nanos + 1'), /key_spend\.leased_nanos .* != open leases/],
    ['key spend', () => run('UPDATE key_spend SET spent_nanos = spent_nanos + 1'), /key_spend\.spent_nanos .* != settled charges/],
    ['an active key past its overall cap', () => run('UPDATE api_keys SET spend_cap_nanos = 1 WHERE id = ?', [keyId]), /has used up its overall cap but is still active/],
    ['a lease of a dead boot', () => run("UPDATE leases SET boot_id = 'dead-boot' WHERE rowid = (SELECT MIN(rowid) FROM leases)"), /belongs to a dead boot or a stale instance/],
    ['a missing trigger', () => run('DROP TRIGGER ledger_entries_no_update'), /missing ledger_entries_no_update/],
  ]
  for (const [name, tamper, expected] of cases) {
    test(name, async () => {
      await tamper()
      const problems = await verify()
      expect(problems.some(line => expected.test(line))).toBe(true)
    })
  }

  test('a key window’s settled charges without a key_spend row are reported, naming key and window', async () => {
    // Without its row the window reads as unspent, so the key's cap would start over.
    await run('DELETE FROM key_spend WHERE key_id = ?', [keyId])
    expect(await verify()).toEqual([`key ${keyId} window 0: settled charges 1500000000 have no key_spend row`])
  })

  test('an idempotency index that is not unique is reported, and so are the keys it let through twice', async () => {
    // Same name, so only the index's kind shows it: a claim no longer arbitrates anything.
    await run('DROP INDEX ledger_entries_idempotency_key_unique')
    await run('CREATE INDEX ledger_entries_idempotency_key_unique ON ledger_entries (idempotency_key)')
    expect(await verify()).toEqual(['ledger_entries_idempotency_key_unique is not a unique index on ledger_entries(idempotency_key)'])
    const entry = "INSERT INTO ledger_entries (op_id, idempotency_key, org_id, kind, source, amount_nanos, created_at_ms) VALUES (?, 'top_up:same-ref', ?, 'top_up', 'top_up', 0, 0)"
    await run(entry, ['op-1', org.orgId])
    await run(entry, ['op-2', org.orgId])
    expect(await verify()).toContain('idempotency key top_up:same-ref is on 2 ledger entries')
  })

  test('ledger rows of an organization that does not exist are reported, naming it', async () => {
    // Check 1 starts from the organizations, so their money would otherwise never be compared.
    await run("INSERT INTO ledger_entries (op_id, org_id, kind, source, amount_nanos, created_at_ms) VALUES ('op-orphan', 'no-such-org', 'top_up', 'top_up', 999, 0)")
    expect(await verify()).toEqual(['org no-such-org does not exist but has ledger_entries rows (1)'])
    await run("INSERT INTO balances (org_id, prepaid_nanos, prepaid_leased_nanos, top_up_credited_nanos, top_up_spent_nanos) VALUES ('no-such-org', 999, 0, 999, 0)")
    await run('INSERT INTO allowances (org_id, period_start_ms, granted_nanos, used_nanos, leased_nanos) VALUES (?, ?, 0, 0, 0), (?, ?, 0, 0, 0)', ['no-such-org', month, 'no-such-org', 0])
    await run(`INSERT INTO leases (id, instance_id, boot_id, scope, org_id, key_id, period_start_ms, amount_nanos, last_grant_nanos, updated_at_ms)
               SELECT 'lease-orphan', instance_id, boot_id, 'prepaid', 'no-such-org', NULL, 0, 0, 0, 0 FROM leases LIMIT 1`)
    expect(await verify()).toEqual([
      'org no-such-org does not exist but has ledger_entries rows (1)',
      'org no-such-org does not exist but has balances rows (1)',
      'org no-such-org does not exist but has allowances rows (2)',
      'org no-such-org does not exist but has leases rows (1)',
    ])
  })

  test('a stale heartbeat flags this instance’s leases', async () => {
    t.clock.advance(t.deps.config.ledger.instanceStaleAfterMs + 1)
    expect((await verify()).some(line => line.includes('stale instance'))).toBe(true)
    await t.deps.sweeper.tick() // a heartbeat: live again
    expect(await verify()).toEqual([])
  })

  test('an allowance period used and leased beyond its grant (granted lowered under it) is reported', async () => {
    // The running totals still agree with the entries and the leases; only the grant is short.
    const row = (await run('SELECT used_nanos, leased_nanos FROM allowances WHERE org_id = ? AND period_start_ms = ?', [org.orgId, month])).rows[0]!
    expect(BigInt(row.used_nanos as bigint)).toBe(USD)
    await run('UPDATE allowances SET granted_nanos = ? WHERE org_id = ? AND period_start_ms = ?', [String(USD - 1n), org.orgId, month])
    const problems = await verify()
    expect(problems.some(line => line.includes(org.orgId) && /used beyond its grant/.test(line))).toBe(true)
  })
})
