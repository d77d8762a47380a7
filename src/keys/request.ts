import type { SpendCapPeriod } from '../db/schema'
import { ApiError } from '../http/errors'
import { parseNanos } from '../lib/money'
import { parseExpiresIn } from './expiry'
import { characterCount } from '../lib/characters'

/** Key options as the API and the CLI accept them. */
export interface KeyOptionsInput {
  name: string
  admin?: boolean
  expires_in?: string
  spend_cap_period?: SpendCapPeriod
  spend_cap_nanos?: string
}

/** A key name's limit, in characters (Unicode code points) after surrounding whitespace is trimmed. */
export const KEY_NAME_MAX_CHARACTERS = 200

export interface KeyOptions {
  name: string
  admin: boolean
  expiresAtMs: number | null
  spendCap: { period: SpendCapPeriod; nanos: bigint } | null
}

/**
 * Validates the cross-field rules the schema cannot express: a nonblank trimmed name,
 * expiry forms and their being in the future, and cap period and amount only together.
 */
export function parseKeyOptions(input: KeyOptionsInput, nowMs: number): KeyOptions {
  const name = input.name.trim()
  // Blank includes invisible: a name of only format characters (zero-width space, word joiner,
  // BOM, soft hyphen, Hangul filler: Default_Ignorable_Code_Point) shows as empty in every listing.
  if (/^[\s\p{Default_Ignorable_Code_Point}]*$/u.test(name)) throw new ApiError('invalid_request', 'name must not be blank (whitespace or invisible characters only)', 'name')
  // Characters, not UTF-16 code units: an emoji counts once, as a person reading the name counts it.
  if (characterCount(name) > KEY_NAME_MAX_CHARACTERS) throw new ApiError('invalid_request', `name must be at most ${KEY_NAME_MAX_CHARACTERS} characters`, 'name')
  // C0, DEL and C1 (U+0080–U+009F, e.g. the 8-bit CSI U+009B) are all terminal controls.
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) throw new ApiError('invalid_request', 'name must not contain control characters', 'name')
  // An unpaired surrogate cannot be stored as UTF-8: the database would hand back U+FFFD.
  if (!name.isWellFormed()) throw new ApiError('invalid_request', 'name must be valid Unicode text (no unpaired surrogates)', 'name')
  const expiresAtMs = parseExpiresIn(input.expires_in, nowMs)
  const hasPeriod = input.spend_cap_period !== undefined
  const hasAmount = input.spend_cap_nanos !== undefined
  if (hasPeriod !== hasAmount) {
    const missing = hasPeriod ? 'spend_cap_nanos' : 'spend_cap_period'
    throw new ApiError('invalid_request', 'spend_cap_period and spend_cap_nanos must be given together', missing)
  }
  let spendCap: KeyOptions['spendCap'] = null
  if (hasPeriod && hasAmount) {
    const nanos = parseNanos(input.spend_cap_nanos!)
    if (nanos === null || nanos <= 0n) {
      throw new ApiError('invalid_request', 'spend_cap_nanos must be a positive decimal integer string of USD nanos', 'spend_cap_nanos')
    }
    if (!['daily', 'monthly', 'overall'].includes(input.spend_cap_period!)) {
      throw new ApiError('invalid_request', 'spend_cap_period must be daily, monthly or overall', 'spend_cap_period')
    }
    spendCap = { period: input.spend_cap_period!, nanos }
  }
  return { name, admin: input.admin ?? false, expiresAtMs, spendCap }
}
