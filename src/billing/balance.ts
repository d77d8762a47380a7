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
 * Reads a balance in one read transaction, from running totals only (no read grows with the
 * ledger). Available = the current month's allowance left plus prepaid (money leased to
 * instances is still the organization's). The top-up projection is what top-ups credited minus
 * what settlements spent of them; it must agree with the prepaid balance, else it is reported
 * unavailable rather than guessed (a row changed behind the ledger's back; `svc ledger verify`
 * compares all of them with the entries). Database errors propagate: callers answer 503, never zero.
 */
export async function readBalance(client: Client, plans: Plans, clock: Clock, orgId: string): Promise<BalanceView> {
  const period = utcMonth(clock.now()).startMs
  const [org, balance, allowance] = await client.batch(
    [
      { sql: 'SELECT plan_id FROM orgs WHERE id = ?', args: [orgId] },
      { sql: 'SELECT prepaid_nanos, top_up_credited_nanos, top_up_spent_nanos FROM balances WHERE org_id = ?', args: [orgId] },
      { sql: 'SELECT granted_nanos, used_nanos FROM allowances WHERE org_id = ? AND period_start_ms = ?', args: [orgId, period] },
    ],
    'read',
  )
  const planId = org!.rows[0]?.plan_id as string | undefined
  const row = balance!.rows[0]
  const prepaidNanos = toBigInt(row?.prepaid_nanos)
  const spent = toBigInt(row?.top_up_spent_nanos)
  const remaining = toBigInt(row?.top_up_credited_nanos) - spent
  const allowanceRow = allowance!.rows[0]
  // No row yet this month: the plan's allowance is untouched (the row is created on first use).
  const allowanceLeftNanos = allowanceRow
    ? toBigInt(allowanceRow.granted_nanos) - toBigInt(allowanceRow.used_nanos)
    : (planId ? plans.get(planId)?.monthlyAllowanceNanos : undefined) ?? 0n
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
