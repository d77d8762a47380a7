import type { InValue } from '@libsql/client'
import type { Config, Plan } from '../config/config'

/** Plans from config: monthly allowances and Fusion access (ARCHITECTURE.md §7.3). */
export class Plans {
  private readonly grantCase: { sql: string; args: InValue[] }

  constructor(private readonly config: Config) {
    const plans = [...config.plans.values()]
    // Evaluated inside the lease transaction, so a plan switched by another process counts at once.
    this.grantCase = {
      sql: `COALESCE((SELECT CASE plan_id ${plans.map(() => 'WHEN ? THEN ?').join(' ')} ELSE 0 END FROM orgs WHERE id = ?), 0)`,
      args: plans.flatMap(plan => [plan.id, plan.monthlyAllowanceNanos]),
    }
  }

  get(planId: string): Plan | undefined {
    return this.config.plans.get(planId)
  }

  /** SQL expression (and its arguments) for the monthly allowance of an organization's plan. */
  allowanceSql(orgId: string): { sql: string; args: InValue[] } {
    return { sql: this.grantCase.sql, args: [...this.grantCase.args, orgId] }
  }
}
