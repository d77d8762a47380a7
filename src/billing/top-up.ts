import { ApiError } from '../http/errors'
import { newId } from '../lib/ids'
import { characterCount } from '../lib/characters'
import { formatUsd, MAX_NANOS, type Nanos } from '../lib/money'
import type { Logger } from '../observability/logger'
import { addPrepaid, claimEntry, claimedEntry, insertEntries, type EntryRow } from './ledger-ops'
import { claimForRetries, submitWithRetries } from './ledger-retries'
import type { LedgerWriter } from './ledger-writer'
import { idempotentOp } from './settle-guarded'

export interface TopUpInput {
  orgId: string
  amount: Nanos
  /** The payment's reference: a repeat with the same one is booked once. */
  reference?: string
  note?: string
}

/** Longest top-up `note` and `reference` (characters): each is stored on the ledger entry. */
export const TOP_UP_NOTE_MAX = 500
export const TOP_UP_REFERENCE_MAX = 200

/** The top-up's text fields within their limits; an ApiError naming the field otherwise. */
export function checkTopUpText(input: Pick<TopUpInput, 'note' | 'reference'>): void {
  if (input.note !== undefined && characterCount(input.note) > TOP_UP_NOTE_MAX) throw new ApiError('invalid_request', `note must be at most ${TOP_UP_NOTE_MAX} characters`, 'note')
  if (input.reference !== undefined && characterCount(input.reference) > TOP_UP_REFERENCE_MAX) {
    throw new ApiError('invalid_request', `reference must be at most ${TOP_UP_REFERENCE_MAX} characters`, 'reference')
  }
}

/**
 * Books a prepaid top-up (an entry and the balance, in one op); true when it was applied, false
 * when `reference` had already booked this same payment.
 */
export async function bookTopUp(writer: LedgerWriter, logger: Logger, input: TopUpInput, now: number): Promise<boolean> {
  if (input.amount <= 0n) throw new ApiError('invalid_request', 'a top-up must be a positive amount', 'amount')
  checkTopUpText(input)
  const row: EntryRow = {
    opId: newId(), idempotencyKey: null, orgId: input.orgId, keyId: null, kind: 'top_up',
    source: 'top_up', amountNanos: input.amount, periodStartMs: null, capWindowStartMs: null, purpose: null, requestId: null,
    note: input.note ?? null, createdAtMs: now,
  }
  const idempotencyKey = input.reference ? `top_up:${input.reference}` : claimForRetries(writer)
  // A claimed top-up is retried like a settlement (its claim books it once); an unclaimed one is
  // only ever on a local database, where a failed write did not commit and the caller may retry.
  let result: { applied: boolean; booked?: Record<string, unknown> }
  try {
    result =
      idempotencyKey === null
        ? await writer.submit({ kind: 'plain', statements: [insertEntries([row]), addPrepaid(input.orgId, { credited: input.amount })], interpret: () => ({ applied: true }) })
        : await submitWithRetries(writer, logger,
            idempotentOp(
              idempotencyKey,
              claim => [
                claimEntry({ ...row, opId: claim.opId, idempotencyKey }),
                addPrepaid(input.orgId, { credited: input.amount }, claim),
                claimedEntry(idempotencyKey),
              ],
              (outcome, results) => ({ applied: outcome !== 'duplicate', booked: results[2]!.rows[0] }),
            ),
            { op: 'top_up', org_id: input.orgId },
          )
  } catch (error) {
    // addPrepaid's guard: the sum would pass a 64-bit integer, which SQLite would store as a
    // float (inexact money). The op failed whole; nothing was booked.
    if (/NOT NULL constraint failed: balances\.prepaid_nanos/.test(String(error))) {
      throw new ApiError('invalid_request', `this top-up would take the organization's prepaid balance past ${formatUsd(MAX_NANOS)} USD, the most the ledger can hold`, 'amount')
    }
    throw error
  }
  if (!result.applied) sameTopUp(input, result.booked)
  return result.applied
}

/**
 * A top-up reference repeated with another organization or amount is not the same payment
 * retried: answering "already credited" would let the second payment go unbooked unnoticed.
 */
function sameTopUp(input: TopUpInput, booked: Record<string, unknown> | undefined): void {
  if (booked === undefined) return
  const orgId = String(booked.org_id)
  const amount = BigInt(booked.amount_nanos as bigint)
  if (orgId === input.orgId && amount === input.amount) return
  throw new ApiError('invalid_request', `reference ${input.reference} was already used for a top-up of ${formatUsd(amount)} USD to ${orgId}; give this top-up its own reference`, 'reference')
}
