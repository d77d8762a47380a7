import { utcMonth, type Clock } from '../lib/clock'
import { ApiError } from '../http/errors'
import type { LedgerWriter } from './ledger-writer'
import type { Plans } from './plans'

/**
 * Switches an organization's plan through the ledger writer (ARCHITECTURE.md §3.3): Fusion
 * access follows at once; an upgrade raises the current month's allowance to the new plan's;
 * a downgrade keeps the current month as granted and applies from the next one.
 */
export async function switchPlan(writer: LedgerWriter, plans: Plans, clock: Clock, orgId: string, planId: string): Promise<void> {
  const plan = plans.get(planId)
  if (!plan) throw new ApiError('invalid_request', `unknown plan "${planId}"`, 'plan')
  const period = utcMonth(clock.now()).startMs
  const grant = plans.allowanceSql(orgId)
  const changed = await writer.submit({
    kind: 'plain',
    statements: [
      // Pin the current month at the old plan's allowance before the plan changes…
      {
        sql: `INSERT INTO allowances (org_id, period_start_ms, granted_nanos, used_nanos, leased_nanos)
              SELECT ?, ?, ${grant.sql}, 0, 0 WHERE EXISTS (SELECT 1 FROM orgs WHERE id = ?)
              ON CONFLICT(org_id, period_start_ms) DO NOTHING`,
        args: [orgId, period, ...grant.args, orgId],
      },
      { sql: 'UPDATE orgs SET plan_id = ? WHERE id = ?', args: [planId, orgId] },
      // …then raise it if the new plan grants more (an upgrade).
      {
        sql: 'UPDATE allowances SET granted_nanos = MAX(granted_nanos, ?) WHERE org_id = ? AND period_start_ms = ?',
        args: [plan.monthlyAllowanceNanos, orgId, period],
      },
    ],
    interpret: results => results[1]!.changes === 1,
  })
  if (!changed) throw new ApiError('not_found', `no organization ${orgId}`, 'org')
}
