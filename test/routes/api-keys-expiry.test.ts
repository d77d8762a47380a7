import { describe, expect, test } from 'bun:test'
import { DAY, KEYS, keysApi, MINUTE } from '../support/api-keys'
import { eachTestWithOrg, type TestApp, type TestOrg } from '../support/harness'

// Key expiry through HTTP (spec §4.1, §4.2): expires_in as a duration, a date or an instant, on
// the fake clock.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))
const { createOk, listed, expectApiError, createRejected } = keysApi(() => ({ t, org }))

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
