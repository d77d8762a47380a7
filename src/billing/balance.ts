import type { Client } from '@libsql/client'
import { utcMonth, type Clock } from '../lib/clock'
import type { Nanos } from '../lib/money'
import type { Plans } from './plans'

/** An organization's balance as spec §2.2 shows it. */
export interface BalanceView {
  availableNanos: Nanos
  /** Omitted (undefined) when the top-up projection could not be computed consistently. */
  topUp: { remainingNanos: Nanos; spentNanos: Nanos } | undefined
  /** The current period's plan allowance left, for `svc orgs show`. */
  allowanceLeftNanos: Nanos
  prepaidNanos: Nanos
  planId: string | undefined
}

/**
 * Reads a balance in one read transaction. Available = the current month's allowance left plus
 * prepaid (money leased to instances is still the organization's). The top-up projection is
 * derived from ledger entries and must agree with the running balance row, else it is reported
 * unavailable rather than guessed. Database errors propagate: callers answer 503, never zero.
 */
export async function readBalance(client: Client, plans: Plans, clock: Clock, orgId: string): Promise<BalanceView> {
  const period = utcMonth(clock.now()).startMs
  const [org, balance, allowance, sums] = await client.batch(
    [
      { sql: 'SELECT plan_id FROM orgs WHERE id = ?', args: [orgId] },
      { sql: 'SELECT prepaid_nanos FROM balances WHERE org_id = ?', args: [orgId] },
      { sql: 'SELECT granted_nanos, used_nanos FROM allowances WHERE org_id = ? AND period_start_ms = ?', args: [orgId, period] },
      {
        sql: `SELECT COALESCE(SUM(CASE WHEN kind IN ('top_up', 'adjust') THEN amount_nanos ELSE 0 END), 0) AS credited,
                     COALESCE(SUM(CASE WHEN kind = 'settle' AND source = 'top_up' THEN amount_nanos ELSE 0 END), 0) AS spent
              FROM ledger_entries WHERE org_id = ? AND source = 'top_up'`,
        args: [orgId],
      },
    ],
    'read',
  )
  const planId = org!.rows[0]?.plan_id as string | undefined
  const prepaidNanos = toBigInt(balance!.rows[0]?.prepaid_nanos)
  const allowanceRow = allowance!.rows[0]
  // No row yet this month: the plan's allowance is untouched (the row is created on first use).
  const allowanceLeftNanos = allowanceRow
    ? toBigInt(allowanceRow.granted_nanos) - toBigInt(allowanceRow.used_nanos)
    : (planId ? plans.get(planId)?.monthlyAllowanceNanos : undefined) ?? 0n
  const credited = toBigInt(sums!.rows[0]?.credited)
  const spent = toBigInt(sums!.rows[0]?.spent)
  const remaining = credited - spent
  return {
    availableNanos: positive(allowanceLeftNanos) + prepaidNanos,
    topUp: remaining === prepaidNanos && spent >= 0n ? { remainingNanos: remaining, spentNanos: spent } : undefined,
    allowanceLeftNanos,
    prepaidNanos,
    planId,
  }
}

function toBigInt(value: unknown): bigint {
  if (value === undefined || value === null) return 0n
  return typeof value === 'bigint' ? value : BigInt(value as number)
}

const positive = (value: Nanos): Nanos => (value > 0n ? value : 0n)
