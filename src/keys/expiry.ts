import { ApiError } from '../http/errors'

const RELATIVE: Record<string, number> = {
  '10m': 10 * 60_000,
  '7d': 7 * 86_400_000,
  '30d': 30 * 86_400_000,
  '90d': 90 * 86_400_000,
  '180d': 180 * 86_400_000,
  '365d': 365 * 86_400_000,
}

/** The accepted `expires_in` forms, for messages and the OpenAPI description. */
export const EXPIRES_IN_FORMS = `never, ${Object.keys(RELATIVE).join(', ')}, a UTC date (YYYY-MM-DD, meaning 00:00:00Z that day) or an RFC 3339 timestamp`

// expires_at is shown as an RFC 3339 timestamp, whose year has four digits: an instant past this
// one would print as "+010000-…", which strict RFC 3339 parsers refuse.
const LATEST_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999)

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/
// RFC 3339 puts no limit on fraction digits (time-secfrac = "." 1*DIGIT); the schema's length cap bounds them.
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|([+-])(\d{2}):(\d{2}))$/

/**
 * Turns an `expires_in` value into an absolute expiry in epoch ms (null = never).
 * Throws invalid_request for an unknown form, an impossible calendar date, or an instant
 * that is not in the future or past year 9999.
 */
export function parseExpiresIn(value: string | undefined, nowMs: number): number | null {
  if (value === undefined || value === 'never') return null
  // Own keys only: `toString` names Object.prototype's function, not a duration.
  const relative = Object.hasOwn(RELATIVE, value) ? RELATIVE[value] : undefined
  let at: number
  if (relative !== undefined) {
    at = nowMs + relative
  } else {
    const parsed = parseDate(value) ?? parseTimestamp(value)
    if (parsed === undefined) throw new ApiError('invalid_request', `expires_in must be one of: ${EXPIRES_IN_FORMS}`, 'expires_in')
    at = parsed
  }
  if (at <= nowMs) throw new ApiError('invalid_request', `expires_in is in the past: ${new Date(at).toISOString()}`, 'expires_in')
  if (at > LATEST_MS) throw new ApiError('invalid_request', 'expires_in is past 9999-12-31T23:59:59.999Z, the latest instant an RFC 3339 timestamp can express; use "never" for no expiry', 'expires_in')
  return at
}

function utc(year: number, month: number, day: number, hour = 0, minute = 0, second = 0): number | undefined {
  const ms = Date.UTC(year, month - 1, day, hour, minute, second)
  const check = new Date(ms)
  // Date.UTC rolls 2026-02-30 over to March; a round trip catches impossible dates.
  if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day) return undefined
  if (hour > 23 || minute > 59 || second > 59) return undefined
  return ms
}

function parseDate(value: string): number | undefined {
  const match = DATE.exec(value)
  if (!match) return undefined
  return utc(Number(match[1]), Number(match[2]), Number(match[3]))
}

function parseTimestamp(value: string): number | undefined {
  const match = TIMESTAMP.exec(value)
  if (!match) return undefined
  const [, year, month, day, hour, minute, second, fraction, zone, sign, offsetHours, offsetMinutes] = match
  // RFC 3339 §5.7: second 60 is a leap second. Epoch ms (like POSIX time) has none, so it is read as
  // the second after 59, as POSIX's seconds-since-the-epoch formula does: 23:59:60Z is 00:00:00Z.
  const leap = second === '60'
  const base = utc(Number(year), Number(month), Number(day), Number(hour), Number(minute), leap ? 59 : Number(second))
  if (base === undefined) return undefined
  let offset = 0
  if (zone !== 'Z' && zone !== 'z') {
    if (Number(offsetHours) > 23 || Number(offsetMinutes) > 59) return undefined
    offset = (Number(offsetHours) * 60 + Number(offsetMinutes)) * 60_000 * (sign === '-' ? -1 : 1)
  }
  const at = base + (leap ? 1000 : 0) - offset
  // Strict, as RFC 3339 §5.7 is: a leap second ends a month (so far June or December), in UTC
  // whatever the offset. Any month end is allowed without a leap-second table, which would go
  // stale; 60 anywhere else (12:30:60Z, or 23:59:60Z mid-month) is refused like minute 60.
  if (leap && !startsUtcMonth(at)) return undefined
  // Kept to the millisecond: digits past the third are truncated, from the text (no float rounding).
  const millis = fraction ? Number(fraction.slice(0, 3).padEnd(3, '0')) : 0
  return at + millis
}

/** Whether `ms` is 00:00:00.000Z on the first day of a month: the instant right after a leap second. */
function startsUtcMonth(ms: number): boolean {
  return ms % 86_400_000 === 0 && new Date(ms).getUTCDate() === 1
}
