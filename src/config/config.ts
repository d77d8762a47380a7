import type { FaultPoint } from '../lib/fault-point'
import type { Backend, Capabilities, Price } from '../catalog/types'
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

/** An upstream provider from config (secrets resolved from the env var the file names). */
export interface ProviderConfig {
  readonly id: string
  readonly type: 'openai-compatible' | 'anthropic' | 'demo' | 'attested'
  /** Base URL including any version path, e.g. `https://api.openai.com/v1`; the demo provider has none. */
  readonly baseUrl: string | undefined
  /** The API key read from `api_key_env` at boot, if any. Never logged. */
  readonly apiKey: string | undefined
  /** `none`: the operator attests the backend keeps no prompts or outputs (required for the private level). */
  readonly retention: 'none' | 'unknown'
  /** Deadline for connecting and receiving the response headers. */
  readonly connectTimeoutMs: number
  /** Longest silence allowed between streamed bytes before the call fails with `timeout`. */
  readonly idleTimeoutMs: number
}

/**
 * A logical model from config, checked against the providers (every backend names a known
 * provider; a `private` model only uses `retention: none` providers). The catalog turns it
 * into callable routes. Only the level of the unsuffixed id exists for now: `:confidential`
 * and `:encrypted` are refused at boot until the attested provider exists.
 */
export interface ModelConfig {
  readonly id: string
  /** The level of the unsuffixed id. */
  readonly level: 'anonymous' | 'private'
  /** In config order; at least one. */
  readonly backends: readonly Backend[]
  readonly routing: 'ordered' | 'round-robin'
  readonly price: Price
  readonly contextLength: number
  readonly maxOutputTokens: number
  readonly capabilities: Capabilities
}

/** The whole, validated, frozen configuration. Built once at boot by loadConfig. */
export interface Config {
  readonly port: number
  readonly databaseUrl: string
  readonly databaseAuthToken: string | undefined
  readonly logLevel: LogLevel
  /** SVC_INSTANCE_ID: a stable name for this instance's ledger leases (else kept beside a local database). */
  readonly instanceId: string | undefined
  /** SVC_FAULT_POINT: crash tests only; the process kills itself at that pipeline step (lib/fault-point.ts). */
  readonly faultPoint: FaultPoint | undefined
  readonly bootstrap: { readonly enabled: boolean; readonly orgName: string; readonly ownerEmail: string }
  readonly plans: ReadonlyMap<string, Plan>
  /** First plan with Fusion access, else the first plan: the bootstrap org's plan and the CLI default. */
  readonly defaultPlanId: string
  readonly limits: LimitsConfig
  readonly ledger: { readonly bootstrapCreditNanos: Nanos; readonly instanceStaleAfterMs: number }
  readonly auth: { readonly cacheTtlMs: number; readonly cacheMaxEntries: number }
  /**
   * GET /metrics: `token` (read from `metrics.token_env`) is the bearer it requires; with `port`
   * it is served only on that admin port. With neither, /metrics is off (404).
   */
  readonly metrics: { readonly token: string | undefined; readonly port: number | undefined; readonly host: string }
  /** Graceful shutdown: how long in-flight requests and streams may finish before they are cut. */
  readonly shutdown: { readonly drainTimeoutMs: number }
  /** Upstream providers, in config order (ids unique). */
  readonly providers: readonly ProviderConfig[]
  /** Logical models, in config order (ids unique); the catalog's source. */
  readonly models: readonly ModelConfig[]
  /** `svc chat`: the gateway to talk to (SVC_URL, default this instance's port) and the key (SVC_API_KEY). */
  readonly client: { readonly url: string; readonly apiKey: string | undefined }
  /** Where the file config came from: a path, or "embedded default". */
  readonly source: string
}
