import type { SpendCapPeriod } from '../db/schema'
import { ApiError } from '../http/errors'
import { MAX_NANOS, parseNanos } from '../lib/money'
import { parseExpiresIn } from './expiry'
import { characterCount, nameTextProblem } from '../lib/characters'

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
  /** The instant a relative expiry counts from: the key's creation, so `7d` is exactly 7 days after it. */
  createdAtMs: number
}

/**
 * Validates the cross-field rules the schema cannot express: a nonblank trimmed name,
 * expiry forms and their being in the future, and cap period and amount only together.
 */
export function parseKeyOptions(input: KeyOptionsInput, nowMs: number): KeyOptions {
  const name = input.name.trim()
  // Blank (or invisible only) first, as nameTextProblem words it: before the length.
  const textProblem = nameTextProblem(name)
  if (textProblem !== undefined) throw new ApiError('invalid_request', `name ${textProblem}`, 'name')
  // Characters, not UTF-16 code units: an emoji counts once, as a person reading the name counts it.
  if (characterCount(name) > KEY_NAME_MAX_CHARACTERS) throw new ApiError('invalid_request', `name must be at most ${KEY_NAME_MAX_CHARACTERS} characters`, 'name')
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
      // The schema's pattern lets 19 digits through; past MAX_NANOS the limit is what is wrong.
      const tooLarge = /^[1-9][0-9]{18}$/.test(input.spend_cap_nanos!)
      throw new ApiError('invalid_request', tooLarge ? `spend_cap_nanos must be at most ${MAX_NANOS} (the most the ledger can hold)` : 'spend_cap_nanos must be a positive decimal integer string of USD nanos', 'spend_cap_nanos')
    }
    if (!['daily', 'monthly', 'overall'].includes(input.spend_cap_period!)) {
      throw new ApiError('invalid_request', 'spend_cap_period must be daily, monthly or overall', 'spend_cap_period')
    }
    spendCap = { period: input.spend_cap_period!, nanos }
  }
  return { name, admin: input.admin ?? false, expiresAtMs, spendCap, createdAtMs: nowMs }
}
