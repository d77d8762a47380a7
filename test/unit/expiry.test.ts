import { describe, expect, test } from 'bun:test'
import { ApiError } from '../../src/http/errors'
import { EXPIRES_IN_FORMS, parseExpiresIn } from '../../src/keys/expiry'

const NOW = Date.UTC(2026, 0, 15, 12, 0, 0) // 2026-01-15T12:00:00Z
const MINUTE = 60_000
const DAY = 86_400_000

/** Runs parseExpiresIn and returns the ApiError it throws (fails the test if it does not). */
function rejection(value: string, now = NOW): ApiError {
  try {
    parseExpiresIn(value, now)
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError)
    return error as ApiError
  }
  throw new Error(`expected ${JSON.stringify(value)} to be rejected`)
}

function expectRejected(value: string, now = NOW): ApiError {
  const error = rejection(value, now)
  expect(error.code).toBe('invalid_request')
  expect(error.status).toBe(400)
  expect(error.param).toBe('expires_in')
  return error
}

describe('parseExpiresIn: never', () => {
  test('absent and "never" mean no expiry', () => {
    expect(parseExpiresIn(undefined, NOW)).toBeNull()
    expect(parseExpiresIn('never', NOW)).toBeNull()
  })

  test('"never" is case-sensitive and exact', () => {
    for (const value of ['Never', 'NEVER', ' never', 'never ', 'none', '']) expectRejected(value)
  })
})

describe('parseExpiresIn: relative forms', () => {
  test("names of Object.prototype's members are no durations", () => {
    // Before: "toString" found Object.prototype.toString in the table of durations, and the
    // route answered 500 (found by the fuzz test).
    for (const value of ['toString', 'constructor', 'valueOf', '__proto__', 'hasOwnProperty']) expectRejected(value)
  })

  test.each([
    ['10m', 10 * MINUTE],
    ['7d', 7 * DAY],
    ['30d', 30 * DAY],
    ['90d', 90 * DAY],
    ['180d', 180 * DAY],
    ['365d', 365 * DAY],
  ])('%s is now + its duration', (value, duration) => {
    expect(parseExpiresIn(value, NOW)).toBe(NOW + duration)
    // Relative to whatever "now" is passed, not the wall clock.
    expect(parseExpiresIn(value, 0)).toBe(duration)
  })

  test('exact instants for the fixed clock', () => {
    expect(new Date(parseExpiresIn('10m', NOW)!).toISOString()).toBe('2026-01-15T12:10:00.000Z')
    expect(new Date(parseExpiresIn('365d', NOW)!).toISOString()).toBe('2027-01-15T12:00:00.000Z')
  })

  test('only the listed durations are accepted', () => {
    for (const value of ['1d', '1m', '10M', '7D', '10min', '7 d', '7days', '0d', '-7d', '+7d', '1y', '3600', '10m ', ' 7d', 'P7D', '07d']) {
      expectRejected(value)
    }
  })
})

describe('parseExpiresIn: UTC dates', () => {
  test('YYYY-MM-DD means 00:00:00Z of that day', () => {
    expect(parseExpiresIn('2026-03-01', NOW)).toBe(Date.UTC(2026, 2, 1))
    expect(parseExpiresIn('2026-01-16', NOW)).toBe(Date.UTC(2026, 0, 16))
    expect(parseExpiresIn('9999-12-31', NOW)).toBe(Date.UTC(9999, 11, 31))
  })

  test('leap days exist only in leap years', () => {
    expect(parseExpiresIn('2028-02-29', NOW)).toBe(Date.UTC(2028, 1, 29))
    expect(parseExpiresIn('2400-02-29', NOW)).toBe(Date.UTC(2400, 1, 29))
    expectRejected('2027-02-29')
    expectRejected('2100-02-29') // divisible by 100, not by 400
  })

  test('impossible calendar dates are rejected, not rolled over', () => {
    for (const value of ['2027-02-30', '2027-02-31', '2027-04-31', '2027-06-31', '2027-09-31', '2027-11-31', '2027-13-01', '2027-00-10', '2027-01-00', '2027-01-32', '2027-99-99']) {
      const error = expectRejected(value)
      expect(error.message).toContain('expires_in must be one of')
    }
  })

  test('today (already past midnight), yesterday and long ago are in the past', () => {
    for (const value of ['2026-01-15', '2026-01-14', '2020-01-01', '1970-01-01']) {
      const error = expectRejected(value)
      expect(error.message).toContain('in the past')
    }
  })

  test('two-digit-year shapes and other date spellings are rejected', () => {
    // Date.UTC maps years 0–99 to 1900–1999; the round trip must not accept that either.
    for (const value of ['0050-01-01', '27-01-01', '2027-1-01', '2027-01-1', '2027/01/01', '20270101', '2027-01-01Z', '+02027-01-01', '2027-W01-1']) {
      expectRejected(value)
    }
  })

  test('a date is exactly midnight the instant it starts, and accepted one ms before', () => {
    const midnight = Date.UTC(2026, 0, 16)
    expect(parseExpiresIn('2026-01-16', midnight - 1)).toBe(midnight)
    expectRejected('2026-01-16', midnight)
  })
})

describe('parseExpiresIn: RFC 3339 timestamps', () => {
  test.each([
    ['2026-02-01T10:20:30Z', Date.UTC(2026, 1, 1, 10, 20, 30)],
    ['2026-02-01t10:20:30z', Date.UTC(2026, 1, 1, 10, 20, 30)],
    ['2026-02-01T10:20:30+00:00', Date.UTC(2026, 1, 1, 10, 20, 30)],
    ['2026-02-01T10:20:30-00:00', Date.UTC(2026, 1, 1, 10, 20, 30)],
    ['2026-02-01T10:20:30+02:00', Date.UTC(2026, 1, 1, 8, 20, 30)],
    ['2026-02-01T10:20:30-05:30', Date.UTC(2026, 1, 1, 15, 50, 30)],
    ['2026-02-01T01:00:00+14:00', Date.UTC(2026, 0, 31, 11, 0, 0)], // crosses back a day
    ['2026-02-01T23:00:00-12:00', Date.UTC(2026, 1, 2, 11, 0, 0)], // crosses forward a day
    ['2026-12-31T23:59:59Z', Date.UTC(2026, 11, 31, 23, 59, 59)],
    ['2026-12-31T23:30:00-01:00', Date.UTC(2027, 0, 1, 0, 30, 0)], // crosses a year
  ])('%s', (value, expected) => {
    expect(parseExpiresIn(value, NOW)).toBe(expected)
  })

  test('fractional seconds: any number of digits, truncated to the millisecond', () => {
    const base = Date.UTC(2026, 1, 1, 10, 20, 30)
    expect(parseExpiresIn('2026-02-01T10:20:30.5Z', NOW)).toBe(base + 500)
    expect(parseExpiresIn('2026-02-01T10:20:30.05Z', NOW)).toBe(base + 50)
    expect(parseExpiresIn('2026-02-01T10:20:30.123Z', NOW)).toBe(base + 123)
    expect(parseExpiresIn('2026-02-01T10:20:30.1239Z', NOW)).toBe(base + 123)
    expect(parseExpiresIn('2026-02-01T10:20:30.999999999Z', NOW)).toBe(base + 999)
    expect(parseExpiresIn('2026-02-01T10:20:30.000000001Z', NOW)).toBe(base)
    expect(parseExpiresIn('2026-02-01T10:20:30.250+01:00', NOW)).toBe(base + 250 - 3_600_000)
 
    // RFC 3339's time-secfrac is "." 1*DIGIT: no upper bound. Past the third digit nothing counts,
    // not even nines that a float would round up into the next second.
    expect(parseExpiresIn('2027-01-01T00:00:00.1234567891Z', NOW)).toBe(Date.UTC(2027, 0, 1, 0, 0, 0, 123))
    expect(parseExpiresIn('2026-02-01T10:20:30.000000000000Z', NOW)).toBe(base)
    expect(parseExpiresIn(`2026-02-01T10:20:30.${'9'.repeat(40)}Z`, NOW)).toBe(base + 999)
    expect(parseExpiresIn(`2026-02-01T10:20:30.${'0'.repeat(3)}${'9'.repeat(30)}-00:30`, NOW)).toBe(base + 1_800_000)
  })

  test('every 1–3 digit fraction maps to the exact millisecond (no float drift)', () => {
    const base = Date.UTC(2026, 1, 1, 10, 20, 30)
    for (let ms = 0; ms < 1000; ms++) {
      const three = String(ms).padStart(3, '0')
      expect(parseExpiresIn(`2026-02-01T10:20:30.${three}Z`, NOW)).toBe(base + ms)
    }
    for (let tenths = 0; tenths < 10; tenths++) {
      expect(parseExpiresIn(`2026-02-01T10:20:30.${tenths}Z`, NOW)).toBe(base + tenths * 100)
    }
  })

  test('just after now is accepted; now and before are in the past', () => {
    expect(parseExpiresIn('2026-01-15T12:00:00.001Z', NOW)).toBe(NOW + 1)
    expectRejected('2026-01-15T12:00:00Z')
    expectRejected('2026-01-15T12:00:00.000Z')
    expectRejected('2026-01-15T11:59:59.999Z')
    // 13:00 at +02:00 is 11:00Z: in the past although the wall-clock digits are later.
    const error = expectRejected('2026-01-15T13:00:00+02:00')
    expect(error.message).toContain('2026-01-15T11:00:00.000Z')
    // 11:00 at -02:00 is 13:00Z: in the future.
    expect(parseExpiresIn('2026-01-15T11:00:00-02:00', NOW)).toBe(NOW + 3_600_000)
  })

  test('the last instant of year 9999 is the latest expiry: later ones could not be shown as RFC 3339', () => {
    expect(parseExpiresIn('9999-12-31T23:59:59.999Z', NOW)).toBe(Date.UTC(9999, 11, 31, 23, 59, 59, 999))
    expect(new Date(parseExpiresIn('9999-12-31', NOW)!).toISOString()).toBe('9999-12-31T00:00:00.000Z')
    // A negative offset carries 9999-12-31 local time into year 10000 UTC ("+010000-…" in ISO form).
    for (const value of ['9999-12-31T23:59:59-00:01', '9999-12-31T23:59:59-23:59', '9999-12-31T23:00:00-01:00']) {
      expect(expectRejected(value).message).toContain('9999-12-31T23:59:59.999Z')
    }
  })

  test('a leap second (second 60, RFC 3339 §5.7) is read as the next second, as POSIX time does', () => {
    expect(parseExpiresIn('2027-06-30T23:59:60Z', NOW)).toBe(Date.UTC(2027, 6, 1))
    expect(parseExpiresIn('2026-12-31T23:59:60Z', NOW)).toBe(Date.UTC(2027, 0, 1))
    expect(parseExpiresIn('2026-12-31t23:59:60z', NOW)).toBe(Date.UTC(2027, 0, 1))
    expect(parseExpiresIn('2027-06-30T23:59:60.5Z', NOW)).toBe(Date.UTC(2027, 6, 1, 0, 0, 0, 500))
    expect(parseExpiresIn('2027-06-30T23:59:60.999999999999Z', NOW)).toBe(Date.UTC(2027, 6, 1, 0, 0, 0, 999))
    // Any month's end: ITU-R TF.460 allows them all; so far only June and December were used.
    expect(parseExpiresIn('2027-03-31T23:59:60Z', NOW)).toBe(Date.UTC(2027, 3, 1))
    expect(parseExpiresIn('2028-02-29T23:59:60Z', NOW)).toBe(Date.UTC(2028, 2, 1))
    // Elsewhere than Z, the leap second is at the same instant, shifted by the offset.
    expect(parseExpiresIn('2027-07-01T01:59:60+02:00', NOW)).toBe(Date.UTC(2027, 6, 1))
    expect(parseExpiresIn('2027-06-30T18:29:60-05:30', NOW)).toBe(Date.UTC(2027, 6, 1))
  })

  test('second 60 anywhere but the last minute of a UTC month is refused', () => {
    for (const value of [
      '2027-01-01T23:59:60Z', // the end of a day, not of a month
      '2027-06-29T23:59:60Z',
      '2027-06-30T23:58:60Z',
      '2027-06-30T12:30:60Z',
      '2027-02-28T22:59:60Z',
      '2027-02-29T23:59:60Z', // no such day
      '2027-06-30T23:59:60+02:00', // 21:59:60Z
      '2027-07-01T00:59:60+02:00', // 22:59:60Z
      '2027-06-30T23:59:61Z',
    ]) {
      expect(expectRejected(value).message).toContain('expires_in must be one of')
    }
  })

  test('a leap second is still checked against now and year 9999', () => {
    expect(expectRejected('2025-12-31T23:59:60Z').message).toContain('in the past')
    expect(parseExpiresIn('2026-01-31T23:59:60Z', Date.UTC(2026, 1, 1) - 1)).toBe(Date.UTC(2026, 1, 1))
    expect(expectRejected('2026-01-31T23:59:60Z', Date.UTC(2026, 1, 1)).message).toContain('in the past')
    expect(expectRejected('9999-12-31T23:59:60Z').message).toContain('9999-12-31T23:59:59.999Z')
  })

  test('out-of-range clock fields are rejected', () => {
    for (const value of [
      '2027-01-01T24:00:00Z',
      '2027-01-01T23:60:00Z',
      '2027-01-01T99:99:99Z',
      '2027-02-30T00:00:00Z',
      '2027-01-01T00:00:00+24:00',
      '2027-01-01T00:00:00+01:60',
      '2027-01-01T00:00:00-99:00',
    ]) {
      expectRejected(value)
    }
  })

  test('malformed timestamps are rejected', () => {
    for (const value of [
      '2027-01-01T00:00:00', // no zone: ambiguous
      '2027-01-01 00:00:00Z', // space separator
      '2027-01-01T00:00Z', // no seconds
      '2027-01-01T0:00:00Z',
      '2027-01-01T00:00:00.Z',
      '2027-01-01T00:00:00.+01:00',
      '2027-01-01T00:00:00,5Z', // ISO 8601's decimal comma; RFC 3339 has only the point
      '2027-01-01T00:00:00.5.5Z',
      '2027-01-01T00:00:00.٥Z', // a non-ASCII digit
      '2027-01-01T00:00:00+0100',
      '2027-01-01T00:00:00+01',
      '2027-01-01T00:00:00UTC',
      '2027-01-01T00:00:00 Z',
      '2027-01-01T00:00:00Z ',
      ' 2027-01-01T00:00:00Z',
      '2027-01-01T00:00:00Z\n',
      '1798761600000', // epoch ms
      '1798761600',
      'Fri, 01 Jan 2027 00:00:00 GMT',
      'tomorrow',
      '２０２７-01-01', // full-width digits
    ]) {
      const error = expectRejected(value)
      expect(error.message).toContain('expires_in must be one of')
    }
  })
})

test('EXPIRES_IN_FORMS lists every accepted form', () => {
  for (const form of ['never', '10m', '7d', '30d', '90d', '180d', '365d', 'YYYY-MM-DD', 'RFC 3339']) {
    expect(EXPIRES_IN_FORMS).toContain(form)
  }
})
