import { Type } from '@sinclair/typebox'
import { t, type Static } from 'elysia'
import { plainPattern } from '../http/validation-message'

// Elysia's `t.Integer` also accepts numeric strings (it is meant for query params), which
// would let `"100"` through as a string: config integers use TypeBox 0.34's own.
const Integer = Type.Integer

/** An http(s) origin: scheme and host (and port), nothing after. */
const Origin = plainPattern('^https?://[^/?#\\s]+$', 'an http(s) origin without a path, query or fragment, e.g. https://gateway.example.com')

/** A USD amount written as a quoted decimal string with at most 9 decimals ("20", "0.40"). */
const Usd = t.String({ ...plainPattern('^(0|[1-9][0-9]*)(\\.[0-9]{1,9})?$', 'a decimal USD amount with at most 9 decimals, e.g. "20" or "0.40"'), description: 'USD decimal string, at most 9 decimals' })

const Plan = t.Object(
  {
    monthly_allowance: Usd,
    fusion: t.Boolean(),
  },
  { additionalProperties: false },
)

/**
 * A token bucket: up to `burst` requests at once, refilled at `per_second`. The buckets count
 * in steps of 1e-6 token/s (src/limits/token-bucket.ts), so a slower rate is refused here rather
 * than silently run 1e-6.
 */
const Bucket = t.Object(
  {
    burst: Integer({ minimum: 1, maximum: 1_000_000 }),
    per_second: t.Number({ minimum: 0.000001, maximum: 1_000_000 }),
  },
  { additionalProperties: false },
)

const BucketPair = t.Object({ key: Bucket, org: Bucket }, { additionalProperties: false })

/** A config id: lower-case letters, digits, `.`, `_`, `-` (provider ids). */
const ProviderId = t.String(plainPattern('^[a-z0-9][a-z0-9._-]{0,63}$', '1 to 64 lower-case letters, digits, dots, underscores or dashes, starting with a letter or digit'))

/** An environment variable name (secrets are referenced by name, never written inline). */
const EnvName = t.String(plainPattern('^[A-Za-z_][A-Za-z0-9_]{0,127}$', 'an environment variable name: 1 to 128 letters, digits or underscores, not starting with a digit'))

/** An upstream provider (ARCHITECTURE.md §3.2). Cross-field rules (base_url per type, keys) are in providers.ts. */
const ProviderEntry = t.Object(
  {
    id: ProviderId,
    type: t.Union([t.Literal('openai-compatible'), t.Literal('anthropic'), t.Literal('demo'), t.Literal('attested')]),
    base_url: t.Optional(t.String({ minLength: 1, maxLength: 2000 })),
    api_key_env: t.Optional(EnvName),
    // `none`: the operator states the backend keeps no prompts or outputs (needed to serve `private`).
    retention: t.Optional(t.Union([t.Literal('none'), t.Literal('unknown')])),
    connect_timeout_ms: t.Optional(Integer({ minimum: 100, maximum: 600_000 })),
    idle_timeout_ms: t.Optional(Integer({ minimum: 1000, maximum: 3_600_000 })),
    // The headers deadline of calls answered as one JSON body (non-streamed chat): the whole generation.
    response_timeout_ms: t.Optional(Integer({ minimum: 1000, maximum: 3_600_000 })),
    // openai-compatible only (providers.ts): the field of the output cap, and whether assistant
    // reasoning goes back upstream (ChatCompletionsOptions).
    max_tokens_field: t.Optional(t.Union([t.Literal('max_tokens'), t.Literal('max_completion_tokens')])),
    reasoning_history: t.Optional(t.Union([t.Literal('drop'), t.Literal('reasoning_content')])),
    // attested only: the evidence layout and E2EE protocol (TEE-PROTOCOL.md B1), and the
    // signing algorithms the backend serves (the first is used for pre-call attestation).
    proof_format: t.Optional(t.String({ minLength: 1, maxLength: 200 })),
    signing_algos: t.Optional(t.Array(t.Union([t.Literal('ed25519'), t.Literal('ecdsa')]), { minItems: 1, maxItems: 2, uniqueItems: true })),
  },
  { additionalProperties: false },
)

/** One binding of a model level to a provider's own model name. */
const BackendEntry = t.Object(
  {
    provider: ProviderId,
    // The upstream's name: may hold `/` and `:` (`meta-llama/Llama-3.3-70B-Instruct`, `llama3.2:3b`).
    model: t.String(plainPattern('^\\S{1,256}$', '1 to 256 characters without spaces')),
    weight: t.Optional(Integer({ minimum: 1, maximum: 1000 })),
    uncensored: t.Optional(t.Boolean()),
    // Anthropic backends only (models.ts): the thinking form the upstream model accepts.
    thinking: t.Optional(t.Union([t.Literal('budget'), t.Literal('adaptive')])),
  },
  { additionalProperties: false },
)

const Backends = t.Array(BackendEntry, { minItems: 1, maxItems: 64 })

/** A logical model (ARCHITECTURE.md §3.2). Its id never holds `:`, which introduces a level suffix. */
const ModelEntry = t.Object(
  {
    id: t.String(plainPattern('^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$', '1 to 128 letters, digits, dots, underscores, slashes or dashes, starting with a letter or digit (a level suffix such as :confidential is not part of the id)')),
    // The level of the unsuffixed id.
    level: t.Optional(t.Union([t.Literal('anonymous'), t.Literal('private')])),
    backends: Backends,
    // `model:confidential` and `model:encrypted`: bound to attested providers only (models.ts).
    confidential: t.Optional(Backends),
    encrypted: t.Optional(Backends),
    routing: t.Optional(t.Union([t.Literal('ordered'), t.Literal('round-robin')])),
    price: t.Object(
      {
        input_per_mtok: Usd,
        output_per_mtok: Usd,
        cached_input_per_mtok: t.Optional(Usd),
        // Prompt-cache writes (Anthropic backends); absent, 1.25× and 2× the input price (pricing.ts).
        cache_write_input_per_mtok: t.Optional(Usd),
        cache_write_1h_input_per_mtok: t.Optional(Usd),
        reasoning_per_mtok: t.Optional(Usd),
      },
      { additionalProperties: false },
    ),
    context_length: Integer({ minimum: 1, maximum: 100_000_000 }),
    max_output_tokens: Integer({ minimum: 1, maximum: 100_000_000 }),
    capabilities: t.Optional(
      t.Object(
        {
          tools: t.Optional(t.Boolean()),
          reasoning: t.Optional(t.Boolean()),
          vision: t.Optional(t.Boolean()),
          file_input: t.Optional(t.Boolean()),
          supports_web_fetch: t.Optional(t.Boolean()),
          supports_web_search: t.Optional(t.Boolean()),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
)

/** Where POST /api/v1/web/search goes (ARCHITECTURE.md §3.2); absent or `none`: the route answers 503. */
const WebSearch = t.Union([
  t.Object(
    {
      backend: t.Literal('searxng'),
      // The instance's root, e.g. http://searxng:8080 (its settings must enable the json format).
      base_url: t.String({ minLength: 1, maxLength: 2000 }),
      timeout_ms: t.Optional(Integer({ minimum: 100, maximum: 60_000 })),
    },
    { additionalProperties: false },
  ),
  t.Object(
    {
      backend: t.Literal('brave'),
      api_key_env: EnvName,
      // Default https://api.search.brave.com/res/v1 (tests point it at a fake).
      base_url: t.Optional(t.String({ minLength: 1, maxLength: 2000 })),
      timeout_ms: t.Optional(Integer({ minimum: 100, maximum: 60_000 })),
    },
    { additionalProperties: false },
  ),
  t.Object({ backend: t.Literal('none') }, { additionalProperties: false }),
])

/** Web retrieval: fetch limits and the search backend. */
const Web = t.Object(
  {
    fetch: t.Optional(
      t.Object(
        {
          // URLs per POST /api/v1/web/fetch call and per chat turn (spec §8: at most 3).
          max_urls: t.Optional(Integer({ minimum: 1, maximum: 3 })),
          // One page, all hops and the body included.
          timeout_ms: t.Optional(Integer({ minimum: 100, maximum: 60_000 })),
          // Per hop: connecting and receiving the response headers.
          connect_timeout_ms: t.Optional(Integer({ minimum: 100, maximum: 60_000 })),
          // Response bytes read per page (after decompression); longer pages are cut.
          max_bytes: t.Optional(Integer({ minimum: 1024, maximum: 20_000_000 })),
          max_redirects: t.Optional(Integer({ minimum: 0, maximum: 5 })),
          // Characters of extracted text kept per page.
          max_content_chars: t.Optional(Integer({ minimum: 100, maximum: 2_000_000 })),
          // TEST ONLY: resolved addresses in these CIDRs count as public. Never in production.
          unsafe_test_allow_cidrs: t.Optional(t.Array(t.String({ minLength: 1, maxLength: 64 }), { maxItems: 16 })),
        },
        { additionalProperties: false },
      ),
    ),
    search: t.Optional(WebSearch),
  },
  { additionalProperties: false },
)

/**
 * The YAML file named by SVC_CONFIG (or the embedded default). Unknown keys are errors:
 * a typo must stop the boot rather than silently change behaviour.
 */
export const FileConfigSchema = t.Object(
  {
    // additionalProperties: false makes a key outside the id pattern an error (else it is not checked at all).
    providers: t.Optional(t.Array(ProviderEntry, { maxItems: 256 })),
    models: t.Optional(t.Array(ModelEntry, { maxItems: 4096 })),
    plans: t.Record(t.String(plainPattern('^[a-z0-9][a-z0-9_-]{0,63}$', '1 to 64 lower-case letters, digits, underscores or dashes, starting with a letter or digit')), Plan, { minProperties: 1, additionalProperties: false }),
    bootstrap: t.Optional(
      t.Object(
        {
          org_name: t.Optional(t.String({ minLength: 1, maxLength: 200 })),
          owner_email: t.Optional(t.String({ minLength: 3, maxLength: 320 })),
        },
        { additionalProperties: false },
      ),
    ),
    limits: t.Optional(
      t.Object(
        {
          inference: t.Optional(BucketPair),
          management: t.Optional(BucketPair),
          org_inference_concurrency: t.Optional(Integer({ minimum: 1, maximum: 100_000 })),
        },
        { additionalProperties: false },
      ),
    ),
    ledger: t.Optional(
      t.Object(
        {
          // Prepaid credit granted to the organization created at first boot.
          bootstrap_credit: t.Optional(Usd),
          // Seconds without a heartbeat after which another instance's leases are returned.
          // The lower bound (a few heartbeats) is checked in load.ts, which names it.
          instance_stale_after_s: t.Optional(Integer({ minimum: 1, maximum: 3600 })),
        },
        { additionalProperties: false },
      ),
    ),
    fusion: t.Optional(
      t.Object(
        {
          // The model that writes the synthesis when a request names none (a model id as clients write it).
          judge: t.Optional(t.String({ minLength: 1, maxLength: 256 })),
          // Each participant's deadline, and the judge's; a participant past it fails alone.
          participant_timeout_ms: t.Optional(Integer({ minimum: 1000, maximum: 3_600_000 })),
          judge_timeout_ms: t.Optional(Integer({ minimum: 1000, maximum: 3_600_000 })),
        },
        { additionalProperties: false },
      ),
    ),
    metrics: t.Optional(
      t.Object(
        {
          // GET /metrics needs `Authorization: Bearer <the value of this variable>`.
          token_env: t.Optional(EnvName),
          // Serve /metrics (and /healthz, /readyz) on this separate admin port instead of the public one.
          port: t.Optional(Integer({ minimum: 0, maximum: 65535 })),
          // Address the admin port binds (default 127.0.0.1): an IPv4 or IPv6 address (a zone
          // allowed) or a host name, never a URL.
          host: t.Optional(t.String(plainPattern('^[A-Za-z0-9._:%-]{1,255}$', 'an IP address or a host name (letters, digits, dots, colons, dashes, a %zone; at most 255), not a URL'))),
        },
        { additionalProperties: false },
      ),
    ),
    oauth: t.Optional(
      t.Object(
        {
          // The authorization server's issuer URL (https://gateway.example.com). Unset: the origin each request arrived at.
          issuer: t.Optional(t.String({ ...Origin, maxLength: 500 })),
          access_token_ttl_s: t.Optional(Integer({ minimum: 60, maximum: 86_400 })),
          refresh_token_ttl_s: t.Optional(Integer({ minimum: 300, maximum: 31_536_000 })),
          code_ttl_s: t.Optional(Integer({ minimum: 10, maximum: 600 })),
          device_code_ttl_s: t.Optional(Integer({ minimum: 60, maximum: 3600 })),
          device_poll_interval_s: t.Optional(Integer({ minimum: 1, maximum: 60 })),
        },
        { additionalProperties: false },
      ),
    ),
    shutdown: t.Optional(
      t.Object(
        {
          // On SIGTERM/SIGINT, how long in-flight requests and streams may run before they are cut.
          drain_timeout_s: t.Optional(t.Number({ minimum: 0, maximum: 3600 })),
        },
        { additionalProperties: false },
      ),
    ),
    // Document extraction (src/documents/): the worker pool, its guards and the parse price.
    documents: t.Optional(
      t.Object(
        {
          // Worker count; 0 = one per CPU core.
          workers: t.Optional(Integer({ minimum: 0, maximum: 256 })),
          // Jobs waiting for a worker beyond this are refused with 429 rate_limited.
          queue_size: t.Optional(Integer({ minimum: 0, maximum: 100_000 })),
          timeout_ms: t.Optional(Integer({ minimum: 100, maximum: 600_000 })),
          // The extracted text past this is refused (never silently cut).
          max_text_bytes: t.Optional(Integer({ minimum: 1024, maximum: 256 * 1024 * 1024 })),
          // Process RSS (the main thread's includes the workers') past which the watchdog kills a job's worker (README: Pool and guards).
          memory_budget_mb: t.Optional(Integer({ minimum: 64, maximum: 1_048_576 })),
          zip_max_entries: t.Optional(Integer({ minimum: 1, maximum: 1_000_000 })),
          zip_max_inflated_bytes: t.Optional(Integer({ minimum: 1024, maximum: 4 * 1024 * 1024 * 1024 })),
          zip_max_ratio: t.Optional(Integer({ minimum: 1, maximum: 100_000 })),
          pdf_max_pages: t.Optional(Integer({ minimum: 1, maximum: 100_000 })),
          pdf_max_objects: t.Optional(Integer({ minimum: 1, maximum: 100_000_000 })),
          pdf_max_nesting: t.Optional(Integer({ minimum: 1, maximum: 100_000 })),
          // One document-parse unit (the standalone route and each file part inside chat).
          price_per_parse: t.Optional(Usd),
        },
        { additionalProperties: false },
      ),
    ),
    mcp: t.Optional(
      t.Object(
        {
          // Browser origins allowed to call /mcp besides the issuer's own (DNS-rebinding defence).
          allowed_origins: t.Optional(t.Array(t.String({ ...Origin, maxLength: 500 }), { maxItems: 100 })),
        },
        { additionalProperties: false },
      ),
    ),
    web: t.Optional(Web),
    // Flat prices of non-token work, USD per unit: one fetched page, one search.
    prices: t.Optional(
      t.Object({ web_fetch: t.Optional(Usd), web_search: t.Optional(Usd) }, { additionalProperties: false }),
    ),
    auth: t.Optional(
      t.Object(
        {
          // How long a verified credential is trusted without re-reading it (other processes' revocations).
          cache_ttl_ms: t.Optional(Integer({ minimum: 0, maximum: 2000 })),
          cache_max_entries: t.Optional(Integer({ minimum: 1, maximum: 1_000_000 })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
)

export type FileConfig = Static<typeof FileConfigSchema>
export type FileProvider = Static<typeof ProviderEntry>
export type FileModel = Static<typeof ModelEntry>
export type FileBackend = Static<typeof BackendEntry>
export type FileWeb = Static<typeof Web>
