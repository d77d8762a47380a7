import type { FaultPoint } from '../lib/fault-point'
import type { Backend, Capabilities, Price } from '../catalog/types'
import type { Nanos } from '../lib/money'
import type { SigningAlgo } from '../tee/keys'
import type { ProofFormat } from '../tee/proof-format'

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
  /**
   * Deadline for the response headers of a call answered as one JSON body (a non-streamed chat,
   * an Encrypted non-stream call): the upstream sends its headers only once the whole answer is
   * generated, so the connect deadline cannot apply.
   */
  readonly responseTimeoutMs: number
  /**
   * Type openai-compatible only: the output cap's field (`max_completion_tokens` by default on
   * api.openai.com, whose reasoning models refuse `max_tokens`; `max_tokens` elsewhere) and what
   * becomes of assistant reasoning in the history (ChatCompletionsOptions).
   */
  readonly chatCompletions?: { readonly maxTokensField: 'max_tokens' | 'max_completion_tokens'; readonly reasoningHistory: 'drop' | 'reasoning_content' }
  /** Type attested only: the configured proof_format and signing algorithms (first = pre-call attestation). */
  readonly attested?: { readonly proofFormat: ProofFormat; readonly signingAlgos: readonly SigningAlgo[] }
}

/**
 * A logical model from config, checked against the providers (every backend names a known
 * provider; a `private` model only uses `retention: none` providers; `:confidential` and
 * `:encrypted` bind attested providers only). The catalog turns it into callable routes.
 */
export interface ModelConfig {
  readonly id: string
  /** The level of the unsuffixed id. */
  readonly level: 'anonymous' | 'private'
  /** In config order; at least one. */
  readonly backends: readonly Backend[]
  /** `<id>:confidential`: attested backends. */
  readonly confidential?: readonly Backend[]
  /** `<id>:encrypted`: attested backends whose proof_format names an E2EE protocol. */
  readonly encrypted?: readonly Backend[]
  readonly routing: 'ordered' | 'round-robin'
  readonly price: Price
  readonly contextLength: number
  readonly maxOutputTokens: number
  readonly capabilities: Capabilities
}

/** Document extraction: pool size, queue, per-job guards and the parse price (ARCHITECTURE.md §6, Extraction). */
export interface DocumentsConfig {
  /** Worker count (config 0 or absent = CPU cores). */
  readonly workers: number
  readonly queueSize: number
  readonly timeoutMs: number
  readonly maxTextBytes: number
  readonly memoryBudgetBytes: number
  readonly zip: { readonly maxEntries: number; readonly maxInflatedBytes: number; readonly maxRatio: number }
  readonly pdf: { readonly maxPages: number; readonly maxObjects: number; readonly maxNesting: number }
  readonly pricePerParseNanos: Nanos
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
  /** How long a libSQL server gets to answer one request (DATABASE_TIMEOUT_S); migrations have no limit. */
  readonly databaseTimeoutMs: number
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
  /** Fusion (spec §4.5): the default judge (absent: requests must name one) and the per-part deadlines. */
  readonly fusion: { readonly judge: string | undefined; readonly participantTimeoutMs: number; readonly judgeTimeoutMs: number }
  readonly documents: DocumentsConfig
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
  /** OAuth 2.1 authorization server (src/oauth/): issuer and lifetimes. */
  readonly oauth: OAuthConfig
  /** Hosted MCP (src/mcp/): browser origins allowed besides the issuer's own. */
  readonly mcp: { readonly allowedOrigins: readonly string[] }
  readonly web: WebConfig
  readonly prices: UnitPrices
  /** Where the file config came from: a path, or "embedded default". */
  readonly source: string
}

/** OAuth lifetimes in milliseconds (the poll interval in seconds, as RFC 8628 sends it). */
export interface OAuthConfig {
  /** Fixed issuer URL without trailing slash; undefined: derived from each request's origin. */
  readonly issuer: string | undefined
  readonly accessTokenTtlMs: number
  readonly refreshTokenTtlMs: number
  readonly codeTtlMs: number
  readonly deviceCodeTtlMs: number
  readonly devicePollIntervalS: number
}
