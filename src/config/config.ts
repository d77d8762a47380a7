import type { Nanos } from '../lib/money'

export type LogLevel = 'debug' | 'info' | 'warn' | 'error'

/** A subscription plan from config. */
export interface Plan {
  readonly id: string
  readonly monthlyAllowanceNanos: Nanos
  readonly fusion: boolean
}

/** A token bucket rule. */
export interface BucketRule {
  readonly burst: number
  readonly perSecond: number
}

/** Rate limits per instance (ARCHITECTURE.md §11: with N instances, configure 1/N each). */
export interface LimitsConfig {
  readonly inference: { readonly key: BucketRule; readonly org: BucketRule }
  readonly management: { readonly key: BucketRule; readonly org: BucketRule }
  readonly orgInferenceConcurrency: number
}

/** The whole, validated, frozen configuration. Built once at boot by loadConfig. */
export interface Config {
  readonly port: number
  readonly databaseUrl: string
  readonly databaseAuthToken: string | undefined
  readonly logLevel: LogLevel
  /** SVC_INSTANCE_ID: a stable name for this instance's ledger leases (else kept beside a local database). */
  readonly instanceId: string | undefined
  readonly bootstrap: { readonly enabled: boolean; readonly orgName: string; readonly ownerEmail: string }
  readonly plans: ReadonlyMap<string, Plan>
  /** First plan with Fusion access, else the first plan: the bootstrap org's plan and the CLI default. */
  readonly defaultPlanId: string
  readonly limits: LimitsConfig
  readonly ledger: { readonly bootstrapCreditNanos: Nanos; readonly instanceStaleAfterMs: number }
  readonly auth: { readonly cacheTtlMs: number; readonly cacheMaxEntries: number }
  /** Where the file config came from: a path, or "embedded default". */
  readonly source: string
}
