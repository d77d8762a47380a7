// How the ledger retries a write that failed, and the claims that make a retry safe where a
// failed write may have committed (a libSQL server: the COMMIT went through, its reply was lost).
import { newId } from '../lib/ids'
import type { Logger } from '../observability/logger'
import type { LedgerWriter, PlainOp, SettleOp, SettleResult } from './ledger-writer'

/** Tries per write: the first and two retries, 100 ms and 400 ms later. */
export const WRITE_TRIES = 3

/**
 * A claim key for a write the ledger or the writer may retry, when a failed write may have
 * committed (BatchExecutor.ambiguousCommits): the retry then finds its own earlier claim and
 * books nothing twice (settle-guarded.ts). Null on a local file, where claimless writes keep the
 * cheaper, aggregated path.
 */
export function claimForRetries(writer: LedgerWriter): string | null {
  return writer.ambiguousCommits ? `op:${newId()}` : null
}

/**
 * Submits an op, trying again after a failed write (with a growing pause); throws the last
 * failure. Safe for an op with a claim, and for any op on a local database, whose failed writes
 * never committed.
 */
export function submitWithRetries(writer: LedgerWriter, logger: Logger, op: SettleOp | PlainOp<SettleResult>, context: Record<string, unknown>): Promise<SettleResult>
export function submitWithRetries<T>(writer: LedgerWriter, logger: Logger, op: PlainOp<T>, context: Record<string, unknown>): Promise<T>
export async function submitWithRetries(writer: LedgerWriter, logger: Logger, op: SettleOp | PlainOp<unknown>, context: Record<string, unknown>): Promise<unknown> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await writer.submit(op)
    } catch (error) {
      logger.warn('ledger commit failed', { ...context, attempt, error: String(error) })
      if (attempt >= WRITE_TRIES) throw error
      await new Promise(resolve => setTimeout(resolve, 100 * attempt * attempt))
    }
  }
}
