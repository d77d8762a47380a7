import { afterEach, describe, expect, test } from 'bun:test'
import { createApp } from '../../src/app'
import { readBalance } from '../../src/billing/balance'
import { verifyLedger } from '../../src/billing/verify'
import { openDatabase, migrateDatabase } from '../../src/db/client'
import type { Deps } from '../../src/deps'
import { buildTestApp, json, type TestApp, type TestOrg } from '../support/harness'
import { PAYG_ONLY, USD, adminPrincipal, admitOk, buildPaygApp, configWith, snapshotLedger } from '../ledger/fixtures'

// GET /api/v1/billing/balance (spec §2.2, §3.3, §4.4; ARCHITECTURE.md §7.3): admin only, exact
// fields, the top-up projection (running totals: credited minus spent) omitted, never zeroed,
// when it disagrees with the running balance, zeros for a missing account, 503 (never a fabricated zero) on a ledger outage,
// Cache-Control: no-store, and no inference slot or inference bucket taken. Key creation needs a
// funded organization; listing and revoking do not.

const BALANCE = '/api/v1/billing/balance'
const FULL = ['available_nanos', 'top_up_projection_state', 'top_up_remaining_nanos', 'top_up_spent_nanos']
const PROJECTION_UNAVAILABLE = ['available_nanos', 'top_up_projection_state']

let t: TestApp
afterEach(async () => {
  await t?.close()
})

async function balanceOk(key: string): Promise<Record<string, string>> {
  const response = await t.request('GET', BALANCE, { key })
  expect(response.status).toBe(200)
  expect(response.headers.get('cache-control')).toBe('no-store')
  expect(response.headers.get('content-type')).toStartWith('application/json')
  return json(response)
}

async function expectError(response: Response, status: number, code: string): Promise<Record<string, any>> {
  const text = await response.text()
  expect(`${response.status} ${text}`).toStartWith(`${status} `)
  const body = JSON.parse(text)
  expect(Object.keys(body)).toEqual(['error'])
  expect(body.error.code).toBe(code)
  expect(body.error.request_id).toBe(response.headers.get('x-request-id'))
  return body
}

describe('happy', () => {
  test('exact fields: plan allowance + prepaid available, top-ups remaining and spent, as decimal strings', async () => {
    t = await buildTestApp() // embedded default: plan "pro" with a 20 USD monthly allowance
    const org = await t.createOrg('acme', 10n * USD)
    let body = await balanceOk(org.adminKey)
    expect(Object.keys(body).sort()).toEqual(FULL)
    expect(body).toEqual({
      available_nanos: '30000000000', top_up_projection_state: 'available', top_up_remaining_nanos: '10000000000', top_up_spent_nanos: '0',
    })

    // Spend past the allowance: 20 USD from the allowance, 1.5 USD from top-ups.
    const principal = await adminPrincipal(t, org)
    await t.deps.ledger.settle(await admitOk(t, principal, 21_500_000_000n), 21_500_000_000n)
    body = await balanceOk(org.adminKey)
    expect(body).toEqual({
      available_nanos: '8500000000', top_up_projection_state: 'available', top_up_remaining_nanos: '8500000000', top_up_spent_nanos: '1500000000',
    })
  })

  test('a new month restores the allowance; top-ups carry over; money on open holds still counts as available', async () => {
    t = await buildTestApp({}, configWith({ plans: { basic: { monthly_allowance: '1', fusion: false } } }))
    t.clock.set(Date.UTC(2026, 0, 31, 12, 0, 0))
    const org = await t.createOrg('acme', 2n * USD)
    const principal = await adminPrincipal(t, org)
    await t.deps.ledger.settle(await admitOk(t, principal, 1_500_000_000n), 1_500_000_000n)
    expect((await balanceOk(org.adminKey)).available_nanos).toBe('1500000000')
    const open = await admitOk(t, principal, 1_000_000_000n) // held, not spent
    expect((await balanceOk(org.adminKey)).available_nanos).toBe('1500000000')
    t.clock.set(Date.UTC(2026, 1, 1, 0, 0, 0))
    expect(await balanceOk(org.adminKey)).toEqual({
      available_nanos: '2500000000', top_up_projection_state: 'available', top_up_remaining_nanos: '1500000000', top_up_spent_nanos: '500000000',
    })
    t.deps.ledger.release(open)
  })

  test('a missing account is zeros with the projection available (no allowance plan, nothing ever credited)', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('empty', 0n)
    const rows = await t.deps.database.client.execute({ sql: 'SELECT COUNT(*) AS n FROM balances WHERE org_id = ?', args: [org.orgId] })
    expect(Number(rows.rows[0]!.n)).toBe(0)
    expect(await balanceOk(org.adminKey)).toEqual({
      available_nanos: '0', top_up_projection_state: 'available', top_up_remaining_nanos: '0', top_up_spent_nanos: '0',
    })
  })

  test('an org with only a plan allowance: available is the allowance, top-ups are zero', async () => {
    t = await buildTestApp()
    const org = await t.createOrg('allowance-only', 0n)
    expect(await balanceOk(org.adminKey)).toEqual({
      available_nanos: '20000000000', top_up_projection_state: 'available', top_up_remaining_nanos: '0', top_up_spent_nanos: '0',
    })
  })

  test('an estimator overshoot that took prepaid below zero is shown as it is, never clamped', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10_000_000n)
    await t.deps.ledger.settle(await admitOk(t, await adminPrincipal(t, org), 10_000_000n), 15_000_000n)
    expect(await balanceOk(org.adminKey)).toEqual({
      available_nanos: '-5000000', top_up_projection_state: 'available', top_up_remaining_nanos: '-5000000', top_up_spent_nanos: '15000000',
    })
  })

  test('each organization sees its own balance only', async () => {
    t = await buildPaygApp()
    const one = await t.createOrg('one', USD)
    const two = await t.createOrg('two', 3n * USD)
    expect((await balanceOk(one.adminKey)).available_nanos).toBe('1000000000')
    expect((await balanceOk(two.adminKey)).available_nanos).toBe('3000000000')
    // There is no way to pick an organization: a query parameter is refused, naming it.
    const response = await t.request('GET', `${BALANCE}?org_id=${two.orgId}`, { key: one.adminKey })
    expect(response.status).toBe(400)
    expect((await json(response)).error.param).toBe('org_id')
  })
})

describe('projection unavailable', () => {
  async function setup(): Promise<TestOrg> {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    await t.deps.ledger.settle(await admitOk(t, await adminPrincipal(t, org), USD), USD)
    return org
  }

  test('the balances row disagrees with the entries: only available_nanos and the state, still 200', async () => {
    const org = await setup()
    await t.deps.database.client.execute({ sql: 'UPDATE balances SET prepaid_nanos = prepaid_nanos + 1 WHERE org_id = ?', args: [org.orgId] })
    const body = await balanceOk(org.adminKey)
    expect(Object.keys(body).sort()).toEqual(PROJECTION_UNAVAILABLE)
    expect(body).toEqual({ available_nanos: '9000000001', top_up_projection_state: 'unavailable' })
  })

  test('an entry the running totals never saw (inserted directly): the balance reads the totals only; verify names the drift', async () => {
    const org = await setup()
    await t.deps.database.client.execute({
      sql: `INSERT INTO ledger_entries (op_id, org_id, kind, source, amount_nanos, created_at_ms) VALUES ('rogue', ?, 'top_up', 'top_up', 5, 0)`,
      args: [org.orgId],
    })
    // Reading a balance sums no entries (it would grow with the ledger): the totals are shown.
    expect(await balanceOk(org.adminKey)).toEqual({
      available_nanos: '9000000000', top_up_projection_state: 'available', top_up_remaining_nanos: '9000000000', top_up_spent_nanos: '1000000000',
    })
    const problems = await verifyLedger(t.deps.database.client, { nowMs: t.clock.now(), staleAfterMs: t.deps.config.ledger.instanceStaleAfterMs })
    expect(problems).toEqual([
      `org ${org.orgId}: balances.prepaid_nanos 9000000000 != ledger entries 9000000005; balances.top_up_credited_nanos 10000000000 != credited top-up entries 10000000005`,
    ])
  })

  test('a balances row with no entries at all: unavailable, not zero', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 0n)
    await t.deps.database.client.execute({ sql: 'INSERT INTO balances (org_id, prepaid_nanos, prepaid_leased_nanos) VALUES (?, 42, 0)', args: [org.orgId] })
    expect(await balanceOk(org.adminKey)).toEqual({ available_nanos: '42', top_up_projection_state: 'unavailable' })
  })
})

describe('errors', () => {
  test('a database failure while reading the balance is 503 unavailable, never a zero balance', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', USD)
    // The key and membership tables still work (auth passes); the ledger read fails.
    await t.deps.database.client.execute('DROP TABLE allowances')
    const response = await t.request('GET', BALANCE, { key: org.adminKey })
    const body = await expectError(response, 503, 'unavailable')
    expect(JSON.stringify(body)).not.toContain('available_nanos')
  })

  test('a balance reader that throws is 503 unavailable (deps with a broken database)', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', USD)
    const broken: Deps = { ...t.deps, balance: () => Promise.reject(new Error('SQLITE_IOERR: disk I/O error')) }
    const app = createApp(broken)
    const response = await app.handle(new Request(`http://localhost${BALANCE}`, { headers: { authorization: `Bearer ${org.adminKey}` } }))
    const body = await expectError(response, 503, 'unavailable')
    expect(body.error.message).not.toContain('SQLITE') // internals stay in the log
    expect(response.headers.get('cache-control')).toBe('no-store')
  })

  test('readBalance propagates a closed database instead of answering zeros', async () => {
    t = await buildPaygApp()
    const database = await openDatabase(':memory:')
    await migrateDatabase(database)
    database.close()
    await expect(readBalance(database.client, t.deps.plans, t.clock, 'any-org')).rejects.toThrow()
  })

  test('the management bucket still applies: 429 rate_limited with Retry-After, and the ledger is untouched', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', USD)
    const before = await snapshotLedger(t.deps.database.client)
    const burst = t.deps.config.limits.management.key.burst
    for (let call = 0; call < burst; call += 1) expect((await t.request('GET', BALANCE, { key: org.adminKey })).status).toBe(200)
    const limited = await t.request('GET', BALANCE, { key: org.adminKey })
    await expectError(limited, 429, 'rate_limited')
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(await snapshotLedger(t.deps.database.client)).toEqual(before)
  })
})

describe('no inference capacity involved', () => {
  test('the read holds no inference slot and takes nothing from the inference buckets; one management token per call', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', USD)
    let slotsDuringRead = -1
    const observed: Deps = {
      ...t.deps,
      balance: async orgId => {
        slotsDuringRead = t.deps.limits.concurrency.inUse(orgId)
        return t.deps.balance(orgId)
      },
    }
    const app = createApp(observed)
    const who = { orgId: org.orgId, keyId: org.adminKeyId }
    const before = t.deps.limits.snapshot(who)
    for (let call = 0; call < 3; call += 1) {
      const response = await app.handle(new Request(`http://localhost${BALANCE}`, { headers: { authorization: `Bearer ${org.adminKey}` } }))
      expect(response.status).toBe(200)
    }
    expect(slotsDuringRead).toBe(0)
    const after = t.deps.limits.snapshot(who)
    expect(after.inference).toEqual(before.inference)
    expect(after.concurrency.inUse).toBe(0)
    expect(after.management.key.remaining).toBe(before.management.key.remaining - 3)
  })

  test('it answers while every inference slot of the org is taken', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', USD)
    const releases = Array.from({ length: t.deps.config.limits.orgInferenceConcurrency }, () => t.deps.limits.acquireInferenceSlot(org.orgId))
    expect((await balanceOk(org.adminKey)).available_nanos).toBe('1000000000')
    for (const release of releases) release()
  })

  test('it needs no funded balance and no key spend-cap room', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('broke', 0n)
    const { secret } = await t.deps.keys.create({
      orgId: org.orgId, userId: org.ownerUserId, name: 'capped admin', admin: true, expiresAtMs: null, spendCap: { period: 'daily', nanos: 1n },
    })
    expect((await balanceOk(secret)).available_nanos).toBe('0')
  })
})

describe('auth', () => {
  test('a member key is 403; an admin-flagged key of a member is 403; an admin-role user needs an admin key', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', USD)
    for (const [role, admin] of [['member', false], ['member', true], ['admin', false], ['owner', false]] as const) {
      const member = await t.createMember(org, role, { admin })
      await expectError(await t.request('GET', BALANCE, { key: member.key }), 403, 'forbidden')
    }
    const admin = await t.createMember(org, 'admin', { admin: true })
    expect((await balanceOk(admin.key)).available_nanos).toBe('1000000000')
  })
})

// The shared credential suite (runAuthSuite) runs for this route in test/routes/auth.test.ts.

describe('key creation needs funding; listing and revoking do not', () => {
  test('an unfunded org (no allowance, no credit): create is 429 insufficient_quota; list and revoke work', async () => {
    t = await buildTestApp({}, configWith({ plans: PAYG_ONLY }))
    const org = await t.createOrg('unfunded', 0n)
    const member = await t.createMember(org, 'member')
    const before = await snapshotLedger(t.deps.database.client)

    const refused = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'new key' } })
    await expectError(refused, 429, 'insufficient_quota')
    const listed = await t.request('GET', '/api/v1/api-keys', { key: org.adminKey })
    expect(listed.status).toBe(200)
    expect((await json(listed)).keys.length).toBe(2)
    expect((await t.request('DELETE', `/api/v1/api-keys/${member.keyId}`, { key: org.adminKey })).status).toBe(204)
    expect((await balanceOk(org.adminKey)).available_nanos).toBe('0')
    expect(await snapshotLedger(t.deps.database.client)).toEqual(before)

    // A top-up funds it.
    await t.deps.ledger.topUp({ orgId: org.orgId, amount: 1n })
    expect((await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'new key' } })).status).toBe(201)
  })

  test('an org whose prepaid went below zero is unfunded too', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10_000_000n)
    await t.deps.ledger.settle(await admitOk(t, await adminPrincipal(t, org), 10_000_000n), 10_000_001n)
    await expectError(await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'x' } }), 429, 'insufficient_quota')
  })

  test('a plan allowance alone funds key creation', async () => {
    t = await buildTestApp()
    const org = await t.createOrg('allowance-only', 0n)
    expect((await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'x' } })).status).toBe(201)
  })

  test('a ledger outage during the funding check is 503, not a refusal or a key', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', USD)
    await t.deps.database.client.execute('DROP TABLE allowances')
    await expectError(await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'x' } }), 503, 'unavailable')
    const keys = await t.deps.keys.list(org.orgId)
    expect(keys.length).toBe(1)
  })
})
