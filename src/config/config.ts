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

/** Where web searches go: one backend, or none (the search route then answers 503). */
export type SearchConfig =
  | { readonly backend: 'searxng'; readonly baseUrl: string; readonly timeoutMs: number }
  | { readonly backend: 'brave'; readonly baseUrl: string; readonly apiKey: string; readonly timeoutMs: number }

/** Web retrieval (POST /api/v1/web/fetch and /search, hosted web tools in chat). */
export interface WebConfig {
  readonly fetch: {
    /** URLs per standalone call and per chat turn (1–3). */
    readonly maxUrls: number
    readonly timeoutMs: number
    /** Per hop: connect and response headers. */
    readonly connectTimeoutMs: number
    readonly maxBytes: number
    readonly maxRedirects: number
    readonly maxContentChars: number
    /** TEST ONLY: resolved addresses in these CIDRs count as public (README warns). Empty in production. */
    readonly unsafeTestAllowCidrs: readonly string[]
  }
  readonly search: SearchConfig | null
}

/** Flat prices of non-token work, in nanos per unit. */
export interface UnitPrices {
  /** One page retrieved (standalone or hosted in chat). */
  readonly webFetch: Nanos
  /** One search run. */
  readonly webSearch: Nanos
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
  /** Upstream providers, in config order (ids unique). */
  readonly providers: readonly ProviderConfig[]
  /** Logical models, in config order (ids unique); the catalog's source. */
  readonly models: readonly ModelConfig[]
  readonly web: WebConfig
  readonly prices: UnitPrices
  /** `svc chat`: the gateway to talk to (SVC_URL, default this instance's port) and the key (SVC_API_KEY). */
  readonly client: { readonly url: string; readonly apiKey: string | undefined }
  /** Where the file config came from: a path, or "embedded default". */
  readonly source: string
}
