import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import OpenAI from 'openai'
import { apiKeys } from '../../src/db/schema'
import { hashSecret, isWellFormedKeySecret } from '../../src/keys/token'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'

// Key management through HTTP (spec §2.1, §3.1, §4.1–4.3, §5, §7), on the fake clock.

const KEYS = '/api/v1/api-keys'
const NOW_ISO = '2026-01-15T12:00:00.000Z' // FakeClock's starting instant
const MINUTE = 60_000
const DAY = 86_400_000
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const ALWAYS = ['admin', 'created_at', 'id', 'name', 'status']

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

function create(body: unknown, key = org.adminKey, headers?: Record<string, string>): Promise<Response> {
  return t.request('POST', KEYS, { body, key, headers })
}

/** Creates a key through the API and returns the `key` object of the 201 response. */
async function createOk(body: Record<string, unknown>, key = org.adminKey): Promise<Record<string, any>> {
  const response = await create(body, key)
  if (response.status !== 201) throw new Error(`expected 201, got ${response.status}: ${await response.text()}`)
  return (await json(response)).key
}

async function list(key = org.adminKey): Promise<Array<Record<string, any>>> {
  const response = await t.request('GET', KEYS, { key })
  expect(response.status).toBe(200)
  return (await json(response)).keys
}

async function listed(id: string, key = org.adminKey): Promise<Record<string, any> | undefined> {
  return (await list(key)).find(entry => entry.id === id)
}

function revoke(id: string, key = org.adminKey): Promise<Response> {
  return t.request('DELETE', `${KEYS}/${id}`, { key })
}

/** Rows in api_keys across every organization: the ground truth for "nothing was written". */
async function rowCount(): Promise<number> {
  const rows = await t.deps.database.db.select({ n: sql<bigint>`count(*)` }).from(apiKeys)
  return Number(rows[0]!.n)
}

/**
 * Asserts the /api/v1 error envelope: exactly {error: {code, message, param?, request_id}},
 * request_id equal to the x-request-id header. `param` undefined means the field is absent.
 */
async function expectApiError(response: Response, status: number, code: string, param?: string): Promise<{ message: string }> {
  const text = await response.text()
  expect(`${response.status} ${text}`).toStartWith(`${status} `)
  expect(response.headers.get('content-type')).toStartWith('application/json')
  const requestId = response.headers.get('x-request-id')
  expect(requestId).toBeTruthy()
  const body = JSON.parse(text)
  expect(Object.keys(body)).toEqual(['error'])
  const expectedKeys = param === undefined ? ['code', 'message', 'request_id'] : ['code', 'message', 'param', 'request_id']
  expect(Object.keys(body.error).sort()).toEqual(expectedKeys)
  expect(body.error.code).toBe(code)
  expect(typeof body.error.message).toBe('string')
  expect(body.error.message.length).toBeGreaterThan(0)
  if (param !== undefined) expect(body.error.param).toBe(param)
  expect(body.error.request_id).toBe(requestId!)
  // Nothing secret ever leaks into an error.
  expect(text).not.toContain(org.adminKey)
  return body.error
}

/** Sends a create that must fail, and checks that no key was written. */
async function expectCreateRejected(send: () => Promise<Response>, status: number, code: string, param?: string) {
  const before = await rowCount()
  const listedBefore = (await list()).length
  const error = await expectApiError(await send(), status, code, param)
  expect(await rowCount()).toBe(before)
  expect(await list()).toHaveLength(listedBefore)
  return error
}

const createRejected = (body: unknown, param: string | undefined, status = 400, code = 'invalid_request') =>
  expectCreateRejected(() => create(body), status, code, param)

describe('create → use → list → revoke', () => {
  test('create returns 201 with the key, its token once, and no-store', async () => {
    const response = await create({ name: 'ci-deploy' })
    expect(response.status).toBe(201)
    expect(response.headers.get('cache-control')).toBe('no-store')
    expect(response.headers.get('content-type')).toStartWith('application/json')
    expect(response.headers.get('x-request-id')).toBeTruthy()
    const body = await json(response)
    expect(Object.keys(body)).toEqual(['key'])
    const { key } = body
    expect(Object.keys(key).sort()).toEqual([...ALWAYS, 'token'].sort())
    expect(key.id).toMatch(UUID)
    expect(key.name).toBe('ci-deploy')
    expect(key.status).toBe('active')
    expect(key.created_at).toBe(NOW_ISO)
    expect(key.admin).toBe(false)
    expect(key.token).toStartWith('z_sk_')
    expect(isWellFormedKeySecret(key.token)).toBe(true)
  })

  test('the token is a working credential, with the admin flag it was given', async () => {
    const plain = await createOk({ name: 'plain' })
    const admin = await createOk({ name: 'admin', admin: true })
    // An ordinary key authenticates (403, not 401) but has no admin authority.
    await expectApiError(await t.request('GET', KEYS, { key: plain.token }), 403, 'forbidden')
    // X-API-Key works as well as Bearer.
    const viaHeader = await t.request('GET', KEYS, { headers: { 'x-api-key': admin.token } })
    expect(viaHeader.status).toBe(200)
    // The new admin key can itself create and revoke.
    const child = await createOk({ name: 'child' }, admin.token)
    expect((await revoke(child.id, admin.token)).status).toBe(204)
  })

  test('only the SHA-256 is stored, and neither secret nor hash is ever listed', async () => {
    const created = await createOk({ name: 'secret-check', admin: true })
    const rows = await t.deps.database.db.select({ hash: apiKeys.secretHash }).from(apiKeys).where(sql`${apiKeys.id} = ${created.id}`)
    expect(rows).toEqual([{ hash: hashSecret(created.token) }])
    const response = await t.request('GET', KEYS, { key: created.token })
    const text = await response.text()
    expect(text).not.toContain(created.token)
    expect(text).not.toContain(created.token.slice(5))
    expect(text).not.toContain(hashSecret(created.token))
    expect(text).not.toContain(hashSecret(org.adminKey))
    expect(text).not.toContain(org.adminKey)
    for (const entry of JSON.parse(text).keys) {
      expect(entry).not.toHaveProperty('token')
      expect(entry).not.toHaveProperty('secret_hash')
      expect(entry).not.toHaveProperty('hash')
    }
  })

  test('list fields: the five always-present fields, optional ones only when set', async () => {
    const bare = await createOk({ name: 'bare' })
    t.clock.advance(1000)
    const full = await createOk({ name: 'full', admin: true, expires_in: '7d', spend_cap_period: 'monthly', spend_cap_nanos: '5000000000' })
    const keys = await list()
    expect(keys.map(entry => entry.name)).toEqual(['full', 'bare', 'admin']) // newest first
    const [fullEntry, bareEntry] = keys
    expect(Object.keys(bareEntry!).sort()).toEqual(ALWAYS)
    expect(bareEntry).toEqual({ id: bare.id, name: 'bare', status: 'active', created_at: NOW_ISO, admin: false })
    expect(fullEntry).toEqual({
      id: full.id,
      name: 'full',
      status: 'active',
      created_at: '2026-01-15T12:00:01.000Z',
      admin: true,
      expires_at: '2026-01-22T12:00:01.000Z',
      spend_cap_period: 'monthly',
      spend_cap_nanos: '5000000000',
    })
    // The creation response carries the same fields plus the token.
    const { token, ...withoutToken } = full
    expect(token).toStartWith('z_sk_')
    expect(withoutToken).toEqual(fullEntry!)
  })

  test('list response has no-store and only a keys array', async () => {
    const response = await t.request('GET', KEYS, { key: org.adminKey })
    expect(response.headers.get('cache-control')).toBe('no-store')
    const body = await json(response)
    expect(Object.keys(body)).toEqual(['keys'])
    expect(body.keys).toHaveLength(1)
  })

  test('last_used_at appears after use and advances at most once a minute', async () => {
    const key = await createOk({ name: 'used' })
    await t.deps.keys.idle()
    expect(await listed(key.id)).not.toHaveProperty('last_used_at')

    t.clock.advance(5 * MINUTE)
    await t.request('GET', KEYS, { key: key.token }) // 403, but the key authenticated
    await t.deps.keys.idle()
    expect((await listed(key.id))!.last_used_at).toBe('2026-01-15T12:05:00.000Z')

    t.clock.advance(30_000)
    await t.request('GET', KEYS, { key: key.token })
    await t.deps.keys.idle()
    expect((await listed(key.id))!.last_used_at).toBe('2026-01-15T12:05:00.000Z')

    t.clock.advance(30_000)
    await t.request('GET', KEYS, { key: key.token })
    await t.deps.keys.idle()
    expect((await listed(key.id))!.last_used_at).toBe('2026-01-15T12:06:00.000Z')
  })

  test('a refused credential does not count as use', async () => {
    const key = await createOk({ name: 'short', expires_in: '10m' })
    t.clock.advance(10 * MINUTE)
    expect((await t.request('GET', KEYS, { key: key.token })).status).toBe(401)
    await t.deps.keys.idle()
    expect(await listed(key.id)).not.toHaveProperty('last_used_at')
  })

  test('revoke: 204 without a body, then revoked + revoked_at in the list and 401 at once', async () => {
    const key = await createOk({ name: 'to-revoke', admin: true })
    expect((await t.request('GET', KEYS, { key: key.token })).status).toBe(200) // warm any cache
    t.clock.advance(90_000)
    // A UUID is case-insensitive on input: the id in upper case names the same key.
    const response = await revoke(key.id.toUpperCase())
    expect(response.status).toBe(204)
    expect(await response.text()).toBe('')
    expect(response.headers.get('x-request-id')).toBeTruthy()

    const entry = await listed(key.id)
    expect(entry!.status).toBe('revoked')
    expect(entry!.revoked_at).toBe('2026-01-15T12:01:30.000Z')
    expect(entry!.created_at).toBe(NOW_ISO)
    const error = await expectApiError(await t.request('GET', KEYS, { key: key.token }), 401, 'unauthorized')
    expect(error.message).toContain('revoked')
    expect((await t.request('GET', KEYS, { headers: { 'x-api-key': key.token } })).status).toBe(401)
  })

  test('revoking twice, or a key that never existed, is 404 naming key_id', async () => {
    const key = await createOk({ name: 'once' })
    expect((await revoke(key.id)).status).toBe(204)
    t.clock.advance(MINUTE)
    await expectApiError(await revoke(key.id), 404, 'not_found', 'key_id')
    // The first revocation time is kept.
    expect((await listed(key.id))!.revoked_at).toBe(NOW_ISO)
    await expectApiError(await revoke('00000000-0000-7000-8000-000000000000'), 404, 'not_found', 'key_id')
    await expectApiError(await revoke(crypto.randomUUID()), 404, 'not_found', 'key_id')
  })

  test('a key_id that is not a UUID is 400', async () => {
    for (const id of ['abc', '1', `${org.adminKeyId}x`, 'z_sk_abc', '%27%20OR%201%3D1']) {
      await expectApiError(await revoke(id), 400, 'invalid_request', 'key_id')
    }
    expect((await t.request('GET', KEYS, { key: org.adminKey })).status).toBe(200)
  })

  test('an admin key can revoke itself; it stops working immediately', async () => {
    expect((await revoke(org.adminKeyId)).status).toBe(204)
    await expectApiError(await t.request('GET', KEYS, { key: org.adminKey }), 401, 'unauthorized')
  })

  test('an expired key can still be revoked', async () => {
    const key = await createOk({ name: 'brief', expires_in: '10m' })
    t.clock.advance(11 * MINUTE)
    expect((await listed(key.id))!.status).toBe('expired')
    expect((await revoke(key.id)).status).toBe(204)
    const entry = await listed(key.id)
    expect(entry!.status).toBe('revoked')
    expect(entry!.expires_at).toBe('2026-01-15T12:10:00.000Z')
    expect(entry!.revoked_at).toBe('2026-01-15T12:11:00.000Z')
  })

  test('rotation: create a replacement, switch, revoke the old one', async () => {
    const old = await createOk({ name: 'svc', admin: true })
    const replacement = await createOk({ name: 'svc', admin: true }, old.token)
    expect((await revoke(old.id, replacement.token)).status).toBe(204)
    expect((await t.request('GET', KEYS, { key: old.token })).status).toBe(401)
    expect((await t.request('GET', KEYS, { key: replacement.token })).status).toBe(200)
    // Same name twice is allowed; the two are different keys.
    expect(replacement.id).not.toBe(old.id)
    expect(replacement.token).not.toBe(old.token)
  })
})

describe('expires_in', () => {
  test.each([
    ['10m', '2026-01-15T12:10:00.000Z'],
    ['7d', '2026-01-22T12:00:00.000Z'],
    ['30d', '2026-02-14T12:00:00.000Z'],
    ['90d', '2026-04-15T12:00:00.000Z'],
    ['180d', '2026-07-14T12:00:00.000Z'],
    ['365d', '2027-01-15T12:00:00.000Z'],
    ['2026-03-01', '2026-03-01T00:00:00.000Z'],
    ['2026-01-16', '2026-01-16T00:00:00.000Z'],
    ['2028-02-29', '2028-02-29T00:00:00.000Z'],
    ['2026-06-30T18:45:00Z', '2026-06-30T18:45:00.000Z'],
    ['2026-06-30t18:45:00z', '2026-06-30T18:45:00.000Z'],
    ['2026-06-30T18:45:00+02:00', '2026-06-30T16:45:00.000Z'],
    ['2026-06-30T18:45:00-05:30', '2026-07-01T00:15:00.000Z'],
    ['2026-06-30T18:45:00+00:00', '2026-06-30T18:45:00.000Z'],
    ['2026-06-30T18:45:00.5Z', '2026-06-30T18:45:00.500Z'],
    ['2026-06-30T18:45:00.123456789Z', '2026-06-30T18:45:00.123Z'],
    ['2026-06-30T18:45:00.1234567891Z', '2026-06-30T18:45:00.123Z'], // RFC 3339 sets no digit limit
    [`2026-06-30T18:45:00.${'9'.repeat(40)}Z`, '2026-06-30T18:45:00.999Z'],
    ['2026-06-30T23:59:60Z', '2026-07-01T00:00:00.000Z'], // a leap second: the next second, as in POSIX time
    ['2026-12-31T23:59:60.25Z', '2027-01-01T00:00:00.250Z'],
    ['2026-06-30T18:45:00.250+01:00', '2026-06-30T17:45:00.250Z'],
    ['2026-01-15T12:00:00.001Z', '2026-01-15T12:00:00.001Z'],
  ])('%p → expires_at %s, in the response and the list', async (expiresIn, expiresAt) => {
    const key = await createOk({ name: `exp ${expiresIn}`, expires_in: expiresIn })
    expect(key.expires_at).toBe(expiresAt)
    expect(key.status).toBe('active')
    expect((await listed(key.id))!.expires_at).toBe(expiresAt)
  })

  test('a relative expiry counts from the key\'s own creation instant, however the clock moves meanwhile (QA)', async () => {
    // Before: the expiry and the creation read the clock apart, so `7d` ended 1 ms short of 7 days.
    const read = t.clock.now.bind(t.clock)
    t.clock.now = () => {
      const now = read()
      t.clock.advance(1)
      return now
    }
    const key = await createOk({ name: 'ticking', expires_in: '7d' })
    expect(Date.parse(key.expires_at) - Date.parse(key.created_at)).toBe(7 * DAY)
  })

  test('"never" and absent both mean no expires_at', async () => {
    const never = await createOk({ name: 'never', expires_in: 'never' })
    const absent = await createOk({ name: 'absent' })
    for (const key of [never, absent]) {
      expect(key).not.toHaveProperty('expires_at')
      expect(await listed(key.id)).not.toHaveProperty('expires_at')
    }
    // Still active a decade later.
    t.clock.advance(3650 * DAY)
    expect((await listed(never.id))!.status).toBe('active')
  })

  test.each([
    '2026-01-15', // today 00:00Z, already past at 12:00Z
    '2026-01-14',
    '2020-01-01',
    '2026-01-15T12:00:00Z', // exactly now is not in the future
    '2026-01-15T11:59:59.999Z',
    '2026-01-15T13:00:00+02:00', // 11:00Z
  ])('past instant %p → 400 expires_in', async expiresIn => {
    const error = await createRejected({ name: 'past', expires_in: expiresIn }, 'expires_in')
    expect(error.message).toContain('past')
  })

  test.each([
    '2027-02-30',
    '2027-02-29',
    '2026-13-01',
    '2026-04-31',
    '2027-00-10',
    '2027-01-01T24:00:00Z',
    '2027-01-01T23:60:00Z',
    '2027-01-01T23:59:60Z', // second 60 only ends a UTC month
    '2027-06-30T12:59:60Z',
    '2027-01-01T00:00:00+25:00',
    '2027-01-01T00:00:00', // no offset
    '2027-01-01 00:00:00Z',
    '1d',
    '10M',
    '7D',
    ' 7d',
    'Never',
    '',
    'forever',
    '1798761600',
    'x'.repeat(65),
  ])('impossible or unknown %p → 400 expires_in', async expiresIn => {
    await createRejected({ name: 'bad', expires_in: expiresIn }, 'expires_in')
  })

  test.each([[7], [null], [true], [{ days: 7 }], [['7d']]])('non-string %j → 400 expires_in', async expiresIn => {
    await createRejected({ name: 'bad', expires_in: expiresIn }, 'expires_in')
  })

  test('a 10m key is expired in the list after 10 minutes and its token gets 401', async () => {
    const key = await createOk({ name: 'ten', admin: true, expires_in: '10m' })
    t.clock.advance(10 * MINUTE - 1)
    expect((await t.request('GET', KEYS, { key: key.token })).status).toBe(200)
    expect((await listed(key.id))!.status).toBe('active')
    t.clock.advance(1)
    const error = await expectApiError(await t.request('GET', KEYS, { key: key.token }), 401, 'unauthorized')
    expect(error.message).toContain('expired')
    const entry = await listed(key.id)
    expect(entry!.status).toBe('expired')
    expect(entry!.expires_at).toBe('2026-01-15T12:10:00.000Z')
    expect(entry).not.toHaveProperty('revoked_at')
  })

  test('a date expiry takes effect at 00:00:00Z of that day', async () => {
    const key = await createOk({ name: 'dated', admin: true, expires_in: '2026-01-16' })
    t.clock.set(Date.UTC(2026, 0, 15, 23, 59, 59, 999))
    expect((await t.request('GET', KEYS, { key: key.token })).status).toBe(200)
    t.clock.set(Date.UTC(2026, 0, 16))
    expect((await t.request('GET', KEYS, { key: key.token })).status).toBe(401)
  })

  test('a new key inherits neither the caller’s expiry nor its spend cap', async () => {
    const { secret: caller } = await t.deps.keys.create({
      orgId: org.orgId,
      userId: org.ownerUserId,
      name: 'temporary admin',
      admin: true,
      expiresAtMs: t.clock.now() + 60 * MINUTE,
      spendCap: { period: 'overall', nanos: 1_000_000n },
    })
    const child = await createOk({ name: 'child', admin: true }, caller)
    expect(child).not.toHaveProperty('expires_at')
    expect(child).not.toHaveProperty('spend_cap_period')
    expect(child).not.toHaveProperty('spend_cap_nanos')
    const capped = await createOk({ name: 'own cap', spend_cap_period: 'daily', spend_cap_nanos: '7', expires_in: '7d' }, caller)
    expect(capped.spend_cap_period).toBe('daily')
    expect(capped.spend_cap_nanos).toBe('7')
    expect(capped.expires_at).toBe('2026-01-22T12:00:00.000Z')

    t.clock.advance(2 * 60 * MINUTE)
    expect((await t.request('GET', KEYS, { key: caller })).status).toBe(401)
    expect((await t.request('GET', KEYS, { key: child.token })).status).toBe(200)
    expect((await listed(child.id, child.token))!.status).toBe('active')
  })
})

describe('spend caps', () => {
  test.each(['daily', 'monthly', 'overall'])('%s with nanos is stored and listed exactly', async period => {
    const key = await createOk({ name: period, spend_cap_period: period, spend_cap_nanos: '1000000000' })
    expect(key.spend_cap_period).toBe(period)
    expect(key.spend_cap_nanos).toBe('1000000000')
    const entry = await listed(key.id)
    expect(entry!.spend_cap_period).toBe(period)
    expect(entry!.spend_cap_nanos).toBe('1000000000')
  })

  test.each(['1', '9007199254740993', '9223372036854775807'])('%p nanos round-trips without float loss', async nanos => {
    const key = await createOk({ name: 'cap', spend_cap_period: 'overall', spend_cap_nanos: nanos })
    expect(key.spend_cap_nanos).toBe(nanos)
    expect((await listed(key.id))!.spend_cap_nanos).toBe(nanos)
  })

  test('period without nanos → 400 naming spend_cap_nanos; nanos without period → 400 naming spend_cap_period', async () => {
    const onlyPeriod = await createRejected({ name: 'x', spend_cap_period: 'daily' }, 'spend_cap_nanos')
    expect(onlyPeriod.message).toContain('together')
    const onlyNanos = await createRejected({ name: 'x', spend_cap_nanos: '100' }, 'spend_cap_period')
    expect(onlyNanos.message).toContain('together')
  })

  test.each([
    ['0'],
    ['-1'],
    ['1.5'],
    ['1e9'],
    [' 12'],
    ['12 '],
    ['012'],
    ['+5'],
    ['0x10'],
    [''],
    ['abc'],
    ['1,000'],
    ['١٢'],
    ['9223372036854775808'], // int64 max + 1
    ['99999999999999999999'],
    [1000000000],
    [0],
    [null],
    [true],
  ])('spend_cap_nanos %p → 400 naming spend_cap_nanos', async nanos => {
    const error = await createRejected({ name: 'x', spend_cap_period: 'daily', spend_cap_nanos: nanos }, 'spend_cap_nanos')
    expect(error.message).toContain('spend_cap_nanos')
  })

  test.each(['weekly', 'Daily', 'DAILY', 'yearly', '', 'day', 7, null])('spend_cap_period %p → 400 naming spend_cap_period', async period => {
    await createRejected({ name: 'x', spend_cap_period: period, spend_cap_nanos: '100' }, 'spend_cap_period')
  })
})

describe('hostile input', () => {
  test.each([
    [{ name: 1 }, 'name'],
    [{ name: null }, 'name'],
    [{ name: true }, 'name'],
    [{ name: ['a'] }, 'name'],
    [{ name: { value: 'a' } }, 'name'],
    [{}, 'name'],
    [{ admin: true }, 'name'],
    [{ name: 'x', admin: 'yes' }, 'admin'],
    [{ name: 'x', admin: 'true' }, 'admin'],
    [{ name: 'x', admin: 1 }, 'admin'],
    [{ name: 'x', admin: null }, 'admin'],
  ])('wrong type %j → 400 naming %s', async (body, param) => {
    await createRejected(body, param)
  })

  test('names: 200 characters are fine, 201 are not', async () => {
    const key = await createOk({ name: 'n'.repeat(200) })
    expect(key.name).toBe('n'.repeat(200))
    await createRejected({ name: 'n'.repeat(201) }, 'name')
    await createRejected({ name: '名'.repeat(201) }, 'name')
    expect((await createOk({ name: '名'.repeat(200) })).name).toBe('名'.repeat(200))
  })

  test('the 200-character limit applies to the trimmed name', async () => {
    expect((await createOk({ name: ` ${'n'.repeat(200)} ` })).name).toBe('n'.repeat(200))
    expect((await createOk({ name: `\t${'m'.repeat(200)}${' '.repeat(300)}\n` })).name).toBe('m'.repeat(200))
    const error = await createRejected({ name: ` ${'n'.repeat(201)} ` }, 'name')
    expect(error.message).toBe('name must be at most 200 characters')
  })

  test('characters are code points: 200 emoji (400 UTF-16 units) are fine, 201 are not', async () => {
    expect((await createOk({ name: '🔑'.repeat(200) })).name).toBe('🔑'.repeat(200))
    expect((await createOk({ name: `${'𝒦'.repeat(199)}a` })).name).toBe(`${'𝒦'.repeat(199)}a`)
    const error = await createRejected({ name: '🔑'.repeat(201) }, 'name')
    expect(error.message).toBe('name must be at most 200 characters')
  })

  test('a raw name past the schema bound (1000 UTF-16 units) is refused by the schema, whatever trimming would leave', async () => {
    const error = await createRejected({ name: `a${' '.repeat(1000)}` }, 'name')
    expect(error.message).toBe('name must be a nonblank string of at most 200 characters')
  })

  test('a 1 MB name is refused before it is buffered (413), never a 500', async () => {
    await expectCreateRejected(() => create({ name: 'n'.repeat(1 << 20) }), 413, 'payload_too_large')
    await expectCreateRejected(() => create(`{"name":"${'\u00e9'.repeat(1 << 19)}"}`), 413, 'payload_too_large')
  })

  test.each([
    ['emoji', '🔑 deploy key 🚀'],
    ['CJK', '生产环境密钥'],
    ['ZWJ sequence and skin tone', '👩‍👩‍👧‍👦 family 👍🏽'],
    ['combining (NFD, not normalized)', 'Cafe\u0301'],
    ['precomposed (NFC)', 'Café'],
    ['right-to-left', 'مفتاح الإنتاج'],
    ['astral math', '𝒦𝑒𝓎 ∑'],
    ['quotes and markup', `"it's" <b>&amp;</b> \\ /`],
  ])('%s name round-trips exactly', async (_label, name) => {
    const key = await createOk({ name })
    expect(key.name).toBe(name)
    expect((await listed(key.id))!.name).toBe(name)
  })

  test('JSON \\u escapes decode to the same name', async () => {
    const key = await createOk({ name: '🔑' })
    const response = await create('{"name":"\\ud83d\\udd11"}')
    expect(response.status).toBe(201)
    expect((await json(response)).key.name).toBe(key.name)
  })

  test.each([
    ['NUL', 'a\u0000b'],
    ['bell', 'a\u0007b'],
    ['tab', 'a\tb'],
    ['newline', 'first\nsecond'],
    ['carriage return', 'a\rb'],
    ['ANSI escape', 'key \u001b[31mred\u001b[0m'],
    ['DEL', 'a\u007fb'],
    ['C1 NEL', 'a\u0085b'],
    ['C1 CSI', 'a\u009b31mb'],
  ])('%s in a name → 400 name', async (_label, name) => {
    const error = await createRejected({ name }, 'name')
    expect(error.message).toContain('control')
  })

  test('an unpaired surrogate cannot round-trip through storage → 400 name', async () => {
    await expectCreateRejected(() => create('{"name":"a\\ud800b"}'), 400, 'invalid_request', 'name')
    await expectCreateRejected(() => create('{"name":"\\udfff"}'), 400, 'invalid_request', 'name')
  })

  test.each(['', ' ', '   ', '\t', '\n\n', ' \t\r\n ', '\u00a0', '\u3000', '\u2028'])('blank name %p → 400 name', async name => {
    await createRejected({ name }, 'name')
  })

  test('surrounding whitespace is trimmed', async () => {
    const key = await createOk({ name: '  padded\n' })
    expect(key.name).toBe('padded')
    expect((await listed(key.id))!.name).toBe('padded')
  })

  // A JSON value that is not an object fails the object schema at its first required field.
  test.each([
    ['null', 'null', 'name'],
    ['an array', '[]', 'name'],
    ['an array of the right object', '[{"name":"x"}]', 'name'],
    ['a string', '"name"', 'name'],
    ['a number', '42', 'name'],
    ['false', 'false', 'name'],
    ['deeply nested arrays', `${'['.repeat(4000)}${']'.repeat(4000)}`, undefined],
    ['an empty body', '', undefined],
  ])('a body that is %s → 400', async (_label, body, param) => {
    await expectCreateRejected(() => create(body), 400, 'invalid_request', param)
  })

  test.each([
    ['malformed', '{"name":'],
    ['trailing comma', '{"name":"x",}'],
    ['single quotes', "{'name':'x'}"],
    ['a comment', '{"name":"x" /* admin */}'],
    ['two documents', '{"name":"x"}{"name":"y"}'],
    ['NaN', '{"name":"x","admin":NaN}'],
  ])('%s JSON → 400 without param', async (_label, body) => {
    const error = await expectCreateRejected(() => create(body), 400, 'invalid_request')
    expect(error.message).toContain('JSON')
  })

  test.each(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonp', 'application/xml', 'text/json'])(
    'content-type %p → 400',
    async type => {
      const error = await expectCreateRejected(() => create('{"name":"x"}', org.adminKey, { 'content-type': type }), 400, 'invalid_request')
      expect(error.message).toContain('Content-Type')
    },
  )

  test.each(['application/json', 'application/json; charset=utf-8', 'Application/JSON', 'application/vnd.api+json', 'application/merge-patch+json'])(
    'content-type %p is JSON',
    async type => {
      const response = await create('{"name":"typed"}', org.adminKey, { 'content-type': type })
      expect(response.status).toBe(201)
    },
  )

  test.each([
    ['org_id', { name: 'x', org_id: '00000000-0000-7000-8000-000000000000' }],
    ['organization', { name: 'x', organization: 'other' }],
    ['scopes', { name: 'x', scopes: ['all'] }],
    ['user_id', { name: 'x', user_id: 'u' }],
    ['token', { name: 'x', token: 'z_sk_mine' }],
    ['status', { name: 'x', status: 'active' }],
    ['expires_at', { name: 'x', expires_at: '2027-01-01T00:00:00Z' }],
    ['constructor', { name: 'x', constructor: {} }],
    ['Name', { name: 'x', Name: 'y' }],
  ])('unknown field %s → 400 naming it', async (field, body) => {
    const error = await createRejected(body, field)
    expect(error.message).toContain(field)
  })

  describe('body over the 16 KiB route limit', () => {
    /** A valid create body padded with JSON whitespace to exactly `size` bytes. */
    const padded = (size: number, name = 'padded') => {
      const base = JSON.stringify({ name })
      return `${base.slice(0, -1)}${' '.repeat(size - base.length)}}`
    }
    const chunked = (text: string, chunkSize = 1000) => {
      const bytes = new TextEncoder().encode(text)
      return new ReadableStream<Uint8Array>({
        start(controller) {
          for (let offset = 0; offset < bytes.length; offset += chunkSize) controller.enqueue(bytes.slice(offset, offset + chunkSize))
          controller.close()
        },
      })
    }
    const sendStream = (body: ReadableStream<Uint8Array>) => {
      const request = new Request(`http://localhost${KEYS}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' },
        body,
        duplex: 'half',
      } as RequestInit)
      expect(request.headers.get('content-length')).toBeNull()
      return t.app.handle(request)
    }

    // An in-process Request built from a string has no content-length header; set it as a client would.
    const sized = (text: string) => create(text, org.adminKey, { 'content-length': String(new TextEncoder().encode(text).length) })

    test('with content-length: exactly 16384 bytes is accepted, 16385 is 413', async () => {
      expect(new TextEncoder().encode(padded(16384)).length).toBe(16384)
      expect((await sized(padded(16384))).status).toBe(201)
      const error = await expectCreateRejected(() => sized(padded(16385)), 413, 'payload_too_large')
      expect(error.message).toContain('16384')
      await expectCreateRejected(() => sized(padded(1 << 20)), 413, 'payload_too_large')
    })

    test('a declared content-length over the limit is refused without reading the body', async () => {
      await expectCreateRejected(() => create('{"name":"small"}', org.adminKey, { 'content-length': '16385' }), 413, 'payload_too_large')
    })

    test('the limit counts bytes, not characters', async () => {
      // 5500 three-byte characters: about a third of 16 KiB in characters, 16500 bytes on the wire.
      const body = `{"name":"${'名'.repeat(5500)}"}`
      await expectCreateRejected(() => sized(body), 413, 'payload_too_large')
      await expectCreateRejected(() => sendStream(chunked(body)), 413, 'payload_too_large')
    })

    test('chunked (no content-length): exactly 16384 bytes is accepted, one more is 413', async () => {
      expect((await sendStream(chunked(padded(16384)))).status).toBe(201)
      await expectCreateRejected(() => sendStream(chunked(padded(16385))), 413, 'payload_too_large')
      await expectCreateRejected(() => sendStream(chunked(padded(1 << 20), 64 * 1024)), 413, 'payload_too_large')
    })

    test('an endless chunked body is cut off, not buffered', async () => {
      let pulled = 0
      const endless = new ReadableStream<Uint8Array>({
        pull(controller) {
          pulled++
          controller.enqueue(new Uint8Array(4096).fill(0x20))
        },
      })
      await expectCreateRejected(() => sendStream(endless), 413, 'payload_too_large')
      expect(pulled).toBeLessThan(16)
    })

    test('over a real socket, chunked and with content-length', async () => {
      const server = Bun.serve({ port: 0, fetch: t.app.fetch })
      try {
        const url = `${server.url.origin}${KEYS}`
        const headers = { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' }
        const streamed = await fetch(url, { method: 'POST', headers, body: chunked(padded(1 << 20), 8192), duplex: 'half' } as RequestInit)
        await expectApiError(streamed, 413, 'payload_too_large')
        const sized = await fetch(url, { method: 'POST', headers, body: padded(20_000) })
        await expectApiError(sized, 413, 'payload_too_large')
        const fine = await fetch(url, { method: 'POST', headers, body: chunked(padded(16384), 100), duplex: 'half' } as RequestInit)
        expect(fine.status).toBe(201)
      } finally {
        server.stop(true)
      }
      expect(await list()).toHaveLength(2)
    })
  })
})

describe('request ids', () => {
  test('every response carries x-request-id, and errors repeat it in the body', async () => {
    const key = await createOk({ name: 'rid' })
    const plain = await createOk({ name: 'plain' })
    const responses: Response[] = [
      await create({ name: 'ok' }),
      await t.request('GET', KEYS, { key: org.adminKey }),
      await revoke(key.id),
      await create({ name: '' }),
      await t.request('GET', KEYS),
      await t.request('GET', KEYS, { key: plain.token }),
      await revoke(key.id),
      await create('x'.repeat(20_000)),
      await t.request('GET', '/api/v1/nope'),
      await t.request('GET', '/v1/nope'),
    ]
    expect(responses.map(response => response.status)).toEqual([201, 200, 204, 400, 401, 403, 404, 413, 404, 404])
    const ids = responses.map(response => response.headers.get('x-request-id'))
    for (const id of ids) expect(id).toMatch(/^req_[0-9a-f]{32}$/)
    expect(new Set(ids).size).toBe(ids.length)
    for (const response of responses.slice(3, 9)) expect((await json(response)).error.request_id).toBe(response.headers.get('x-request-id')!)
  })

  test('a well-formed incoming x-request-id is kept; a malformed one, or one holding a credential, is replaced', async () => {
    const kept = await create({ name: '' }, org.adminKey, { 'x-request-id': 'trace-01.abc:XYZ_9' })
    expect(kept.headers.get('x-request-id')).toBe('trace-01.abc:XYZ_9')
    expect((await json(kept)).error.request_id).toBe('trace-01.abc:XYZ_9')
    // A credential as the id would be stored on ledger entries and sent upstream in the clear.
    for (const bad of ['has space', 'x'.repeat(129), 'semi;colon', '<script>', '', org.adminKey, `trace.svc_mcp_${'a'.repeat(43)}`]) {
      const response = await t.request('GET', KEYS, { headers: { 'x-request-id': bad } })
      expect(response.status).toBe(401)
      const id = response.headers.get('x-request-id')!
      expect(id).toMatch(/^req_[0-9a-f]{32}$/)
      expect((await json(response)).error.request_id).toBe(id)
    }
  })
})

describe('organization isolation', () => {
  test("an admin sees only their own organization's keys", async () => {
    const other = await t.createOrg('other')
    const mine = await createOk({ name: 'mine' })
    const theirs = await createOk({ name: 'theirs' }, other.adminKey)
    const myIds = (await list()).map(entry => entry.id)
    const theirIds = (await list(other.adminKey)).map(entry => entry.id)
    expect(myIds.sort()).toEqual([org.adminKeyId, mine.id].sort())
    expect(theirIds.sort()).toEqual([other.adminKeyId, theirs.id].sort())
  })

  test("revoking another organization's key is 404 and that key keeps working", async () => {
    const other = await t.createOrg('other')
    const theirs = await createOk({ name: 'theirs', admin: true }, other.adminKey)
    await expectApiError(await revoke(theirs.id), 404, 'not_found', 'key_id')
    await expectApiError(await revoke(other.adminKeyId), 404, 'not_found', 'key_id')
    expect((await t.request('GET', KEYS, { key: theirs.token })).status).toBe(200)
    expect((await t.request('GET', KEYS, { key: other.adminKey })).status).toBe(200)
    const entry = await listed(theirs.id, other.adminKey)
    expect(entry!.status).toBe('active')
    expect(entry).not.toHaveProperty('revoked_at')
    // The 404 is the same as for a key that does not exist: nothing tells the two apart.
    const missing = await expectApiError(await revoke(crypto.randomUUID()), 404, 'not_found', 'key_id')
    const foreign = await expectApiError(await revoke(theirs.id), 404, 'not_found', 'key_id')
    expect(foreign.message).toBe(missing.message)
  })

  test('the organization comes from the credential, not from the body or a mismatched header', async () => {
    const other = await t.createOrg('other')
    await createRejected({ name: 'x', org_id: other.orgId }, 'org_id')
    const mismatched = await create({ name: 'x' }, org.adminKey, { 'x-org-id': other.orgId })
    await expectApiError(mismatched, 403, 'forbidden')
    const matched = await createOk({ name: 'matched' })
    expect((await list(other.adminKey)).some(entry => entry.id === matched.id)).toBe(false)
    expect(await list(other.adminKey)).toHaveLength(1)
  })
})

describe('admin authority follows the current role', () => {
  test('a demoted owner loses admin at once; re-promoted, gets it back', async () => {
    const owner = await t.createMember(org, 'owner', { admin: true })
    expect((await t.request('GET', KEYS, { key: owner.key })).status).toBe(200)
    await t.deps.orgs.setRole({ orgId: org.orgId, userId: owner.userId, role: 'member' })
    await expectApiError(await t.request('GET', KEYS, { key: owner.key }), 403, 'forbidden')
    await expectCreateRejected(() => create({ name: 'x' }, owner.key), 403, 'forbidden')
    await expectApiError(await revoke(org.adminKeyId, owner.key), 403, 'forbidden')
    await t.deps.orgs.setRole({ orgId: org.orgId, userId: owner.userId, role: 'owner' })
    expect((await t.request('GET', KEYS, { key: owner.key })).status).toBe(200)
    // Demoting to admin keeps authority.
    await t.deps.orgs.setRole({ orgId: org.orgId, userId: owner.userId, role: 'admin' })
    expect((await t.request('GET', KEYS, { key: owner.key })).status).toBe(200)
  })

  test('admin keys created through the API follow their creator’s role', async () => {
    const admin = await t.createMember(org, 'admin', { admin: true })
    const child = await createOk({ name: 'child', admin: true }, admin.key)
    expect((await t.request('GET', KEYS, { key: child.token })).status).toBe(200)
    await t.deps.orgs.setRole({ orgId: org.orgId, userId: admin.userId, role: 'member' })
    await expectApiError(await t.request('GET', KEYS, { key: child.token }), 403, 'forbidden')
    // The owner's keys are unaffected.
    expect((await t.request('GET', KEYS, { key: org.adminKey })).status).toBe(200)
  })
})

describe('unknown routes', () => {
  test('/api/v1 gets the api envelope', async () => {
    for (const [method, path] of [
      ['GET', '/api/v1/nope'],
      ['POST', '/api/v1/nope'],
      ['DELETE', `${KEYS}/${org.adminKeyId}/extra`],
    ] as const) {
      const error = await expectApiError(await t.request(method, path, { key: org.adminKey }), 404, 'not_found')
      expect(error.message).toContain(path)
    }
  })

  test('/v1 gets the OpenAI envelope', async () => {
    const response = await t.request('GET', '/v1/nope')
    expect(response.status).toBe(404)
    expect(response.headers.get('x-request-id')).toBeTruthy()
    const body = await json(response)
    expect(body).toEqual({ error: { message: 'no route for GET /v1/nope', type: 'invalid_request_error', param: null, code: 'not_found' } })
  })

  describe('the official openai SDK parses our envelopes', () => {
    let server: ReturnType<typeof Bun.serve>
    beforeEach(() => {
      server = Bun.serve({ port: 0, fetch: t.app.fetch })
    })
    afterEach(() => {
      server.stop(true)
    })

    test('a 404 on /v1 is a NotFoundError with our code and request id', async () => {
      const client = new OpenAI({ apiKey: org.adminKey, baseURL: `${server.url.origin}/v1`, maxRetries: 0 })
      const error = await client.files.list().then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(error).toBeInstanceOf(OpenAI.NotFoundError)
      const apiError = error as InstanceType<typeof OpenAI.APIError>
      expect(apiError.status).toBe(404)
      expect(apiError.code).toBe('not_found')
      expect(apiError.type).toBe('invalid_request_error')
      expect(apiError.param).toBeNull()
      expect(apiError.requestID).toMatch(/^req_[0-9a-f]{32}$/)
      expect(apiError.message).toContain('no route for GET /v1/files')
    })

    test('a bad credential is an AuthenticationError; an invalid field is a BadRequestError naming it', async () => {
      const base = `${server.url.origin}/api/v1`
      const bad = new OpenAI({ apiKey: 'z_sk_not-a-real-key', baseURL: base, maxRetries: 0 })
      const unauthorized = await bad.get('/api-keys').then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(unauthorized).toBeInstanceOf(OpenAI.AuthenticationError)
      expect((unauthorized as InstanceType<typeof OpenAI.APIError>).status).toBe(401)
      expect((unauthorized as InstanceType<typeof OpenAI.APIError>).code).toBe('unauthorized')

      const client = new OpenAI({ apiKey: org.adminKey, baseURL: base, maxRetries: 0 })
      const invalid = await client.post('/api-keys', { body: { name: 'x', spend_cap_period: 'daily', spend_cap_nanos: '1.5' } }).then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(invalid).toBeInstanceOf(OpenAI.BadRequestError)
      expect((invalid as InstanceType<typeof OpenAI.APIError>).code).toBe('invalid_request')
      expect((invalid as InstanceType<typeof OpenAI.APIError>).param).toBe('spend_cap_nanos')

      // And the happy path decodes too.
      const created = (await client.post('/api-keys', { body: { name: 'via sdk' } })) as { key: { token: string; name: string } }
      expect(created.key.name).toBe('via sdk')
      expect(created.key.token).toStartWith('z_sk_')
    })
  })
})
