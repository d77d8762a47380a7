import { afterEach, describe, expect, test } from 'bun:test'
import { utcDay, utcMonth } from '../../src/lib/clock'
import { formatUsd } from '../../src/lib/money'
import { json, type TestApp } from '../support/harness'
import {
  USD, admit, admitOk, billedApp, buildPaygApp, createCappedKey, expectInsufficientQuota, keySpentOf, scalar, verifyClean,
} from './fixtures'

// L8 (SECURITY-NOTES.md §3), spec §3.1 and §8: daily caps reset at 00:00:00.000 UTC and monthly
// caps at the first of the month, with no status change; a refusal is 429 insufficient_quota
// naming the cap, with Retry-After = seconds until the reset. An exhausted overall cap expires
// the key: it then fails verification and every authenticated route answers 401.

let t: TestApp
afterEach(async () => {
  await t?.close()
})

const E = 10_000_000n
const keyStatus = (keyId: string) => t.deps.database.client.execute({ sql: 'SELECT status FROM api_keys WHERE id = ?', args: [keyId] }).then(result => result.rows[0]!.status)

describe('daily cap', () => {
  test('exhausted at 23:59:59.999 UTC (Retry-After 1), usable again at 00:00:00.000 UTC, status active throughout', async () => {
    t = await buildPaygApp()
    t.clock.set(Date.UTC(2026, 4, 10, 9, 30, 0))
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'daily', 3n * E)
    for (let call = 0; call < 3; call += 1) await t.deps.ledger.settle(await admitOk(t, key.principal, E), E)

    // 09:30:00 → 14.5 h to midnight.
    let error = expectInsufficientQuota(await admit(t, key.principal, 1n))
    expect(error.message).toContain('daily spend cap of 0.030000000 USD (30000000 nanos)')
    expect(error.message).toContain('2026-05-11T00:00:00.000Z')
    expect(error.headers?.['retry-after']).toBe(String(14.5 * 3600))

    t.clock.set(Date.UTC(2026, 4, 10, 23, 59, 58, 500))
    error = expectInsufficientQuota(await admit(t, key.principal, 1n))
    expect(error.headers?.['retry-after']).toBe('2') // 1.5 s, rounded up

    t.clock.set(Date.UTC(2026, 4, 10, 23, 59, 59, 999))
    error = expectInsufficientQuota(await admit(t, key.principal, 1n))
    expect(error.headers?.['retry-after']).toBe('1')
    expect(await keyStatus(key.keyId)).toBe('active')

    t.clock.set(Date.UTC(2026, 4, 11, 0, 0, 0, 0))
    for (let call = 0; call < 3; call += 1) await t.deps.ledger.settle(await admitOk(t, key.principal, E), E)
    expectInsufficientQuota(await admit(t, key.principal, 1n))
    expect(await keySpentOf(t, key.keyId, Date.UTC(2026, 4, 10))).toBe(3n * E)
    expect(await keySpentOf(t, key.keyId, Date.UTC(2026, 4, 11))).toBe(3n * E)
    expect(await keyStatus(key.keyId)).toBe('active')
    expect((await t.deps.keys.verify(key.secret)).ok).toBe(true)
    await verifyClean(t)
  })

  test('a call admitted at 23:59:59.999 and settled after midnight is charged to the day it was admitted in', async () => {
    t = await buildPaygApp()
    t.clock.set(Date.UTC(2026, 4, 10, 23, 59, 59, 999))
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'daily', 3n * E)
    const late = await admitOk(t, key.principal, E)
    t.clock.set(Date.UTC(2026, 4, 11, 0, 0, 5))
    await t.deps.ledger.settle(late, E)
    expect(await keySpentOf(t, key.keyId, Date.UTC(2026, 4, 10))).toBe(E)
    // The new day's window is whole.
    for (let call = 0; call < 3; call += 1) await t.deps.ledger.settle(await admitOk(t, key.principal, E), E)
    expect(await keySpentOf(t, key.keyId, Date.UTC(2026, 4, 11))).toBe(3n * E)
    await verifyClean(t)
  })
})

describe('monthly cap', () => {
  test('February 2028 (leap year): one window from Feb 1 to Mar 1, Feb 29 included; resets at 2028-03-01T00:00:00.000Z', async () => {
    t = await buildPaygApp()
    t.clock.set(Date.UTC(2028, 1, 1, 0, 0, 0))
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'monthly', 2n * E)
    await t.deps.ledger.settle(await admitOk(t, key.principal, E), E)

    // Feb 28 is not the end in a leap year: the spend of Feb 1 still counts, and two days remain.
    t.clock.set(Date.UTC(2028, 1, 28, 0, 0, 0))
    await t.deps.ledger.settle(await admitOk(t, key.principal, E), E)
    let error = expectInsufficientQuota(await admit(t, key.principal, 1n))
    expect(error.message).toContain('monthly spend cap of 0.020000000 USD (20000000 nanos)')
    expect(error.message).toContain('2028-03-01T00:00:00.000Z')
    expect(error.headers?.['retry-after']).toBe(String(2 * 86_400))

    t.clock.set(Date.UTC(2028, 1, 29, 12, 0, 0))
    error = expectInsufficientQuota(await admit(t, key.principal, 1n))
    expect(error.headers?.['retry-after']).toBe(String(12 * 3600))

    t.clock.set(Date.UTC(2028, 1, 29, 23, 59, 59, 999))
    error = expectInsufficientQuota(await admit(t, key.principal, 1n))
    expect(error.headers?.['retry-after']).toBe('1')

    t.clock.set(Date.UTC(2028, 2, 1, 0, 0, 0, 0))
    for (let call = 0; call < 2; call += 1) await t.deps.ledger.settle(await admitOk(t, key.principal, E), E)
    expectInsufficientQuota(await admit(t, key.principal, 1n))
    expect(await keySpentOf(t, key.keyId, Date.UTC(2028, 1, 1))).toBe(2n * E)
    expect(await keySpentOf(t, key.keyId, Date.UTC(2028, 2, 1))).toBe(2n * E)
    expect(await keyStatus(key.keyId)).toBe('active')
    await verifyClean(t)
  })

  test('the window helpers agree: leap February has 29 days, 2026 February 28', () => {
    expect(utcMonth(Date.UTC(2028, 1, 29, 23, 59, 59, 999))).toEqual({ startMs: Date.UTC(2028, 1, 1), endMs: Date.UTC(2028, 2, 1) })
    expect((Date.UTC(2028, 2, 1) - Date.UTC(2028, 1, 1)) / 86_400_000).toBe(29)
    expect(utcMonth(Date.UTC(2026, 1, 28, 23, 59, 59, 999)).endMs).toBe(Date.UTC(2026, 2, 1))
    expect(utcDay(Date.UTC(2026, 11, 31, 23, 59, 59, 999))).toEqual({ startMs: Date.UTC(2026, 11, 31), endMs: Date.UTC(2027, 0, 1) })
  })
})

describe('over HTTP (a billed route on the metering API)', () => {
  test('a daily cap refusal is 429 insufficient_quota naming the cap, with retry-after = seconds to midnight UTC', async () => {
    t = await buildPaygApp()
    t.clock.set(Date.UTC(2026, 6, 1, 23, 0, 0))
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'daily', 2n * E)
    const billed = billedApp(t)
    expect((await billed.call(key.secret, { estimate: String(E) })).status).toBe(200)
    expect((await billed.call(key.secret, { estimate: String(E) })).status).toBe(200)
    const refused = await billed.call(key.secret, { estimate: '1' })
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('3600')
    const body = await json(refused)
    expect(body.error.code).toBe('insufficient_quota')
    expect(body.error.message).toContain('daily spend cap')
    expect(body.error.request_id).toBe(refused.headers.get('x-request-id'))
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
    t.clock.set(Date.UTC(2026, 6, 2, 0, 0, 0))
    expect((await billed.call(key.secret, { estimate: String(E) })).status).toBe(200)
  })

  test('a request whose worst case exceeds the whole daily cap gets no retry-after: waiting for the reset cannot help', async () => {
    t = await buildPaygApp()
    t.clock.set(Date.UTC(2026, 6, 1, 23, 0, 0))
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'daily', E)
    const billed = billedApp(t)
    // Nothing spent yet: the cap itself is below this call's worst case.
    const refused = await billed.call(key.secret, { estimate: String(2n * E) })
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBeNull()
    const message = (await json(refused)).error.message
    expect(message).toContain(`daily spend cap of ${formatUsd(E)} USD (${E} nanos) cannot cover this request's worst-case cost`)
    expect(message).toContain('a smaller request (a lower max_tokens, a shorter input) may still fit')
    expect(message).not.toContain('resets at')
    // A call that fits the cap is still admitted.
    expect((await billed.call(key.secret, { estimate: String(E) })).status).toBe(200)
  })

  test('an overall cap refusal has no retry-after (it never resets) while the key stays active until the cap is used up', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'overall', 2n * E)
    const billed = billedApp(t)
    expect((await billed.call(key.secret, { estimate: String(E), actual: String(E + E / 2n) })).status).toBe(200)
    const refused = await billed.call(key.secret, { estimate: String(E) })
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBeNull()
    // Half the cap is left: not "used up", but less than this call's worst case (QA: the message
    // said "is used up" while the key had room for a smaller call).
    const message = (await json(refused)).error.message
    expect(message).toContain(`overall spend cap of ${formatUsd(2n * E)} USD`)
    expect(message).toContain(`has less left than this request's worst-case cost of ${formatUsd(E)} USD`)
    expect(message).not.toContain('cannot cover') // a cap of twice the cost covers it; what is left does not
    expect(message).not.toContain('used up')
    expect(await keyStatus(key.keyId)).toBe('active')
  })
})

describe('overall cap exhaustion', () => {
  test('the settlement that reaches the cap flips the key to expired: verify says expired and every route answers 401', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    // An admin key, so the admin routes would otherwise accept it.
    const key = await createCappedKey(t, org, 'overall', 3n * E, { admin: true })
    const billed = billedApp(t)
    expect((await t.request('GET', '/api/v1/billing/balance', { key: key.secret })).status).toBe(200)
    for (let call = 0; call < 2; call += 1) expect((await billed.call(key.secret, { estimate: String(E) })).status).toBe(200)
    expect(await keyStatus(key.keyId)).toBe('active')
    expect((await billed.call(key.secret, { estimate: String(E) })).status).toBe(200) // spent == cap now
    expect(await keyStatus(key.keyId)).toBe('expired')
    expect(await scalar(t.deps.database.client, 'SELECT spent_nanos FROM key_spend WHERE key_id = ? AND window_start_ms = 0', [key.keyId])).toBe(3n * E)

    expect(await t.deps.keys.verify(key.secret)).toEqual({ ok: false, reason: 'expired' })
    expect(await t.deps.keys.verify(key.secret, true)).toEqual({ ok: false, reason: 'expired' })
    for (const [method, path] of [['GET', '/api/v1/billing/balance'], ['GET', '/api/v1/api-keys'], ['GET', '/api/v1/rate-limits'], ['POST', '/api/v1/api-keys']] as const) {
      const response = await t.request(method, path, { key: key.secret, body: method === 'POST' ? { name: 'x' } : undefined })
      expect(`${method} ${path} ${response.status}`).toBe(`${method} ${path} 401`)
      const body = await json(response)
      expect(body.error.code).toBe('unauthorized')
      expect(body.error.message).toContain('expired')
    }
    const billedRefusal = await billed.call(key.secret, { estimate: '1' })
    expect(billedRefusal.status).toBe(401)
    // The listing shows the key as expired, the org's other keys are untouched.
    const listed = (await json(await t.request('GET', '/api/v1/api-keys', { key: org.adminKey }))).keys
    expect(listed.find((entry: { id: string }) => entry.id === key.keyId).status).toBe('expired')
    expect(listed.find((entry: { id: string }) => entry.id === org.adminKeyId).status).toBe('active')
    await verifyClean(t)
  })

  test('an overshooting settlement that passes the cap expires the key too; a stale principal gets 401 from the ledger', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'overall', 3n * E)
    await t.deps.ledger.settle(await admitOk(t, key.principal, E), 5n * E)
    expect(await keyStatus(key.keyId)).toBe('expired')
    // A principal resolved before the expiry (another instance's verify cache, say): the ledger
    // re-checks the key when it needs cap room and answers 401.
    t.clock.advance(1001)
    const stale = await admit(t, key.principal, E)
    if (stale.ok) throw new Error('an expired key was admitted')
    expect(stale.error.status).toBe(401)
    expect(stale.error.code).toBe('unauthorized')
    await verifyClean(t)
  })

  test('a key expired by another process (row flipped directly) is refused with 401 when its lease needs room', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'overall', USD)
    await t.deps.ledger.settle(await admitOk(t, key.principal, E), E)
    await t.deps.database.client.execute({ sql: "UPDATE api_keys SET status = 'expired' WHERE id = ?", args: [key.keyId] })
    t.clock.advance(11_000)
    await t.deps.sweeper.tick() // the idle key lease goes back: the next admission must ask the database
    const result = await admit(t, key.principal, E)
    if (result.ok) throw new Error('an expired key was admitted')
    expect(result.error.status).toBe(401)
    expect(await t.deps.keys.verify(key.secret)).toEqual({ ok: false, reason: 'expired' })
  })
})
