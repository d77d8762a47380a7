import {
  addAllowanceUsed, addKeySpend, addPrepaid, claimEntry, drawLease, expireExhaustedKey, insertEntryIfClaimed, recomputeLeased,
} from './ledger-ops'
import type { PlainOp, SettleOp, SettleResult } from './ledger-writer'

/**
 * A settlement with a billing key (Fusion's Idempotency-Key, retried settlements): not
 * aggregated, because whether it charges at all is decided by one arbitrated insert of its
 * first entry. Every other statement is guarded by that claim, so a replay — in this process
 * or another — inserts and changes nothing.
 */
export function settleStatementsGuarded(op: SettleOp, opId: string): PlainOp<SettleResult> {
  const [first, ...rest] = op.entries
  const orgId = first!.orgId
  const statements = [claimEntry(first!), ...rest.map(insertEntryIfClaimed)]
  const prepaid = op.entries.filter(entry => entry.source === 'top_up').reduce((sum, entry) => sum + entry.amountNanos, 0n)
  if (prepaid !== 0n) statements.push(addPrepaid(orgId, -prepaid, opId))
  if (op.allowance) statements.push(addAllowanceUsed(orgId, op.allowance.periodStartMs, op.allowance.amount, opId))
  if (op.keySpend) statements.push(addKeySpend(op.keySpend.keyId, op.keySpend.windowStartMs, op.keySpend.amount, opId))
  for (const draw of op.leaseDraws) statements.push(drawLease(draw.lease.id, draw.amount, op.nowMs, opId), recomputeLeased(draw.lease))
  const expiryIndex = op.keySpend?.overallCap ? statements.push(expireExhaustedKey(op.keySpend.keyId)) - 1 : -1
  return {
    kind: 'plain',
    statements,
    interpret: results => ({
      duplicate: results[0]!.changes === 0,
      keyExpired: expiryIndex >= 0 && (results[expiryIndex]?.changes ?? 0) > 0,
    }),
  }
}
