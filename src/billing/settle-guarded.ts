import { newId } from '../lib/ids'
import type { Statement, StatementResult } from './executor'
import {
  addAllowanceUsed, addKeySpend, addPrepaid, claimEntry, claimHolder, drawLease, expireExhaustedKey, insertEntryIfClaimed, recomputeLeased,
  type Claim, type EntryRow,
} from './ledger-ops'
import type { PlainOp, SettleOp, SettleResult } from './ledger-writer'

/** How an idempotent op's claim came out: this attempt's, an earlier attempt's of the same op, or another op's. */
export type ClaimOutcome = 'claimed' | 'claimed_earlier' | 'duplicate'

/**
 * An op that charges at most once per idempotency key: its first statement claims the key
 * (claimEntry), every later one is guarded by that claim. Each attempt to run it (the writer's
 * one-op retry of a failed batch, the ledger's settlement retries; submit the same op each time)
 * builds its statements afresh under a new op id. A failure can come after the COMMIT went
 * through (a remote server's reply lost): a retry under the same op id would find the earlier
 * claim, take it for its own, and book everything but the claim again. With a fresh op id the
 * retry books nothing, and the claim's holder, read back last, tells an earlier attempt of this
 * op ('claimed_earlier': charged once, not a duplicate) from another request ('duplicate').
 */
export function idempotentOp<T>(
  idempotencyKey: string,
  build: (claim: Claim) => Statement[],
  interpret: (outcome: ClaimOutcome, results: StatementResult[]) => T,
): PlainOp<T> {
  const attempts = new Set<string>()
  return {
    kind: 'plain',
    statements: () => {
      const claim = { idempotencyKey, opId: newId() }
      attempts.add(claim.opId)
      return [...build(claim), claimHolder(idempotencyKey)]
    },
    interpret: results => {
      const holder = results[results.length - 1]!.rows[0]?.op_id
      const outcome = results[0]!.changes === 1 ? 'claimed' : attempts.has(String(holder)) ? 'claimed_earlier' : 'duplicate'
      return interpret(outcome, results.slice(0, -1))
    },
  }
}

/**
 * A settlement with a billing key (Fusion's Idempotency-Key, retried settlements): not
 * aggregated, because whether it charges at all is decided by one arbitrated insert of its
 * first entry. Every other statement is guarded by that claim, so a replay — in this process
 * or another — inserts and changes nothing. The entries' op ids are replaced per attempt.
 */
export function settleStatementsGuarded(op: SettleOp): PlainOp<SettleResult> {
  const first = op.entries[0]!
  const orgId = first.orgId
  let expiryIndex = -1
  return idempotentOp(
    first.idempotencyKey!,
    claim => {
      const entries: EntryRow[] = op.entries.map(entry => ({ ...entry, opId: claim.opId }))
      const statements = [claimEntry(entries[0]!), ...entries.slice(1).map(entry => insertEntryIfClaimed(entry, claim))]
      const prepaid = op.entries.filter(entry => entry.source === 'top_up').reduce((sum, entry) => sum + entry.amountNanos, 0n)
      if (prepaid !== 0n) statements.push(addPrepaid(orgId, { spent: prepaid }, claim))
      if (op.allowance) statements.push(addAllowanceUsed(orgId, op.allowance.periodStartMs, op.allowance.amount, claim))
      if (op.keySpend) statements.push(addKeySpend(op.keySpend.keyId, op.keySpend.windowStartMs, op.keySpend.amount, claim))
      for (const draw of op.leaseDraws) statements.push(drawLease(draw.lease.id, draw.amount, op.nowMs, claim), recomputeLeased(draw.lease))
      expiryIndex = op.keySpend?.overallCap ? statements.push(expireExhaustedKey(op.keySpend.keyId)) - 1 : -1
      return statements
    },
    // After an earlier attempt's lost reply, the key it may have expired is found by the next
    // lease top-up's key check instead (keyExpired is only a cache hint).
    (outcome, results) => ({
      duplicate: outcome === 'duplicate',
      keyExpired: expiryIndex >= 0 && (results[expiryIndex]?.changes ?? 0) > 0,
    }),
  )
}
