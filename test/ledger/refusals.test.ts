import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { generateKeySecret } from '../../src/keys/token'
import { MAX_NANOS } from '../../src/lib/money'
import type { TestApp, TestOrg } from '../support/harness'
import {
  LEDGER_TABLES, USD, adminPrincipal, admit, admitOk, billedApp, buildPaygApp, createCappedKey, expectInsufficientQuota, moneyState, refused,
  snapshotLedger, verifyClean,
} from './fixtures'

// L7 (SECURITY-NOTES.md §3): nothing rejected is billed. A refused admission, a 401, a 403 or a
// 400 leaves every ledger table as it was (balances, allowances, key spend, entries and, once a
// scope has been used, its lease rows too).

let t: TestApp
let org: TestOrg

beforeEach(async () => {
  t = await buildPaygApp()
  org = await t.createOrg('acme', 100_000_000n)
})
afterEach(async () => {
  await t.close()
})

const snapshot = () => snapshotLedger(t.deps.database.client)
const money = () => moneyState(t.deps.database.client, org.orgId)

describe('refused admissions', () => {
  test('insufficient funds, again and again: every ledger table is unchanged', async () => {
    const principal = await adminPrincipal(t, org)
    await t.deps.ledger.settle(await admitOk(t, principal, 30_000_000n), 30_000_000n)
    expectInsufficientQuota(await admit(t, principal, 70_000_001n)) // warms the scopes' bookkeeping rows
    const before = await snapshot()
    for (let attempt = 0; attempt < 5; attempt += 1) {
      t.clock.advance(1001) // each one asks the database
      expectInsufficientQuota(await admit(t, principal, 70_000_001n))
      expectInsufficientQuota(await admit(t, principal, 10n * USD))
    }
    expect(await snapshot()).toEqual(before)
    expect((await t.deps.balance(org.orgId)).availableNanos).toBe(70_000_000n)
    await verifyClean(t)
  })

  test('daily, monthly and overall caps reached: every ledger table is unchanged', async () => {
    const keys = await Promise.all((['daily', 'monthly', 'overall'] as const).map(period => createCappedKey(t, org, period, 10_000_000n)))
    for (const key of keys) await t.deps.ledger.settle(await admitOk(t, key.principal, 5_000_000n), 5_000_000n)
    for (const key of keys) expectInsufficientQuota(await admit(t, key.principal, 5_000_001n))
    const before = await snapshot()
    for (let attempt = 0; attempt < 3; attempt += 1) {
      t.clock.advance(1001)
      for (const key of keys) {
        const error = expectInsufficientQuota(await admit(t, key.principal, 5_000_001n))
        expect(error.message).toContain('spend cap')
      }
    }
    expect(await snapshot()).toEqual(before)
    await verifyClean(t)
  })

  test('from a cold start, a refusal moves no money; any row it leaves is zero bookkeeping', async () => {
    const key = await createCappedKey(t, org, 'daily', 10_000_000n)
    const beforeMoney = await money()
    const beforeRows = await snapshot()
    expectInsufficientQuota(await admit(t, key.principal, 10_000_001n)) // over the cap
    expectInsufficientQuota(await admit(t, await adminPrincipal(t, org), USD)) // over the balance
    expect(await money()).toEqual(beforeMoney)
    const after = await snapshot()
    for (const table of LEDGER_TABLES) {
      for (const row of after[table]!.filter(row => !beforeRows[table]!.includes(row))) {
        const values = JSON.parse(row) as Record<string, string>
        for (const column of ['amount_nanos', 'spent_nanos', 'leased_nanos', 'used_nanos', 'prepaid_leased_nanos']) {
          if (column in values) expect(`${table}.${column}=${values[column]}`).toBe(`${table}.${column}=0`)
        }
      }
    }
    expect(after.ledger_entries).toEqual(beforeRows.ledger_entries!)
    expect(after.balances).toEqual(beforeRows.balances!)
  })

  test('an estimate past what the ledger can hold is refused as unfundable (429), never a 503', async () => {
    // QA: a model priced at the money maximum made every call a 503 "ledger unavailable": the
    // estimate (and a lease target of 8 times a large one) failed to bind as a 64-bit integer.
    const principal = await adminPrincipal(t, org)
    await t.deps.ledger.release(await admitOk(t, principal, 1000n)) // the prepaid lease exists
    for (const estimate of [2n * MAX_NANOS, MAX_NANOS + 1n, MAX_NANOS, MAX_NANOS / 2n, MAX_NANOS / 8n]) {
      expect(refused(await admit(t, principal, estimate)).code).toBe('insufficient_quota')
    }
    // A rich organization gets such a call, from a lease target held to the maximum.
    const rich = await t.createOrg('rich', MAX_NANOS - 1000n)
    const reservation = await admitOk(t, await adminPrincipal(t, rich), MAX_NANOS / 2n)
    await t.deps.ledger.settle(reservation, 5n)
    expect((await t.deps.balance(rich.orgId)).availableNanos).toBe(MAX_NANOS - 1005n)
    await verifyClean(t)
  })

  test('a negative estimate is a programming error, not a charge', async () => {
    const before = await snapshot()
    await expect(admit(t, await adminPrincipal(t, org), -1n)).rejects.toThrow(RangeError)
    expect(await snapshot()).toEqual(before)
  })
})

describe('401, 403 and 400 on billed and admin routes', () => {
  test('nothing reaches the ledger, and no inference slot is left taken', async () => {
    const billed = billedApp(t)
    // Warm the org's scopes with one paid call, so lease rows exist and must stay as they are.
    expect((await billed.call(org.adminKey, { estimate: '10000000' })).status).toBe(200)
    const member = await t.createMember(org, 'member')
    const revoked = await t.createMember(org, 'admin', { admin: true })
    expect((await t.request('DELETE', `/api/v1/api-keys/${revoked.keyId}`, { key: org.adminKey })).status).toBe(204)
    const expiring = await t.deps.keys.create({ orgId: org.orgId, userId: org.ownerUserId, name: 'short', admin: true, expiresAtMs: t.clock.now() + 1000, spendCap: null })
    t.clock.advance(2000)
    const other = await t.createOrg('other', USD)
    const before = await snapshot()
    const balanceBefore = await t.deps.balance(org.orgId)

    const cases: Array<[string, () => Promise<Response>, number]> = [
      ['billed: no credential', () => billed.call(undefined, { estimate: '1' }), 401],
      ['billed: malformed', () => billed.call('sk-not-ours', { estimate: '1' }), 401],
      ['billed: unknown key', () => billed.call(generateKeySecret(), { estimate: '1' }), 401],
      ['billed: revoked key', () => billed.call(revoked.key, { estimate: '1' }), 401],
      ['billed: expired key', () => billed.call(expiring.secret, { estimate: '1' }), 401],
      ['billed: org mismatch', () => billed.call(org.adminKey, { estimate: '1' }, { 'x-org-id': other.orgId }), 403],
      ['billed: invalid body', () => billed.call(org.adminKey, { estimate: 'lots' }), 400],
      ['billed: unknown field', () => billed.call(org.adminKey, { estimate: '1', org_id: other.orgId }), 400],
      ['billed: not JSON', () => billed.call(org.adminKey, '{"estimate":'), 400],
      ['balance: member key', () => t.request('GET', '/api/v1/billing/balance', { key: member.key }), 403],
      ['balance: no credential', () => t.request('GET', '/api/v1/billing/balance'), 401],
      ['create key: member key', () => t.request('POST', '/api/v1/api-keys', { key: member.key, body: { name: 'x' } }), 403],
      ['create key: blank name', () => t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: ' ' } }), 400],
      ['create key: bad cap', () => t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'x', spend_cap_period: 'daily', spend_cap_nanos: '-1' } }), 400],
      ['revoke: member key', () => t.request('DELETE', `/api/v1/api-keys/${member.keyId}`, { key: member.key }), 403],
      ['revoke: revoked key', () => t.request('DELETE', `/api/v1/api-keys/${member.keyId}`, { key: revoked.key }), 401],
    ]
    for (const [name, send, status] of cases) {
      const response = await send()
      expect(`${name}: ${response.status}`).toBe(`${name}: ${status}`)
    }
    expect(await snapshot()).toEqual(before)
    expect(await t.deps.balance(org.orgId)).toEqual(balanceBefore)
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
    await verifyClean(t)
  })

  test('a 429 insufficient_quota on a billed route changes nothing either', async () => {
    const billed = billedApp(t)
    expect((await billed.call(org.adminKey, { estimate: '90000000' })).status).toBe(200)
    expect((await billed.call(org.adminKey, { estimate: '10000001' })).status).toBe(429)
    const before = await snapshot()
    t.clock.advance(1001)
    const response = await billed.call(org.adminKey, { estimate: '10000001' })
    expect(response.status).toBe(429)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('insufficient_quota')
    expect(await snapshot()).toEqual(before)
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
  })
})

test('refused() helper sanity: an admitted call is not a refusal', async () => {
  const result = await admit(t, await adminPrincipal(t, org), 1n)
  expect(() => refused(result)).toThrow()
})
