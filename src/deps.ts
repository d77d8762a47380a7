import { readBalance, type BalanceView } from './billing/balance'
import { readBilledOutside } from './billing/billed-keys'
import { createExecutor, type BatchExecutor } from './billing/executor'
import { loadIdentity, type ProcessIdentity } from './billing/identity'
import { Ledger, type Identity } from './billing/ledger'
import { LedgerHealth } from './billing/ledger-health'
import { LedgerWriter } from './billing/ledger-writer'
import { Metering } from './billing/metering'
import { Plans } from './billing/plans'
import { Sweeper } from './billing/sweeper'
import { AttestationService } from './attestation/service'
import { Catalog } from './catalog/catalog'
import type { FusionDeps } from './fusion/service'
import type { PipelineDeps } from './inference/pipeline'
import { extractionApiError } from './documents/errors'
import { WorkerExtractorPool } from './documents/pool'
import { ExtractionError, type ExtractorPool } from './documents/types'
import { AnthropicProvider } from './providers/anthropic/provider'
import { AttestedProvider } from './providers/attested/provider'
import { DemoProvider } from './providers/demo/provider'
import { OpenAICompatibleProvider } from './providers/openai-compatible/provider'
import { createProviders, type ProviderFactories } from './providers/registry'
import type { Provider } from './providers/types'
import { Router } from './providers/router'
import type { Config } from './config/config'
import { openDatabase, type Database, type OpenOptions } from './db/client'
import { KeyService } from './keys/service'
import { abortable } from './lib/abortable'
import { systemClock, type Clock } from './lib/clock'
import { Limits } from './limits/admission'
import { GatewayMetrics } from './observability/gateway-metrics'
import { faultAt } from './lib/fault-point'
import { InFlightCalls } from './mcp/in-flight-calls'
import { ApiError } from './http/errors'
import { Lifecycle } from './observability/lifecycle'
import { createLogger, type Logger } from './observability/logger'
import { OAuthServer } from './oauth/server'
import { RequestLog } from './observability/request-log'
import { OrgService } from './orgs/service'
import { AddressAllowance } from './web/address-policy'
import { BraveBackend } from './web/brave'
import { WebFetcher, type Transport } from './web/fetcher'
import type { PdfReader } from './web/read-page'
import { SystemResolver, type Resolver } from './web/resolver'
import type { SearchBackend } from './web/search'
import { SearxngBackend } from './web/searxng'
import { WebService } from './web/service'

/** Everything the app and the CLI need, built once at boot and passed in (never imported as singletons). */
export interface Deps {
  readonly config: Config
  readonly clock: Clock
  readonly logger: Logger
  readonly database: Database
  readonly orgs: OrgService
  readonly keys: KeyService
  readonly plans: Plans
  /** `fallback`: why this process runs under a fresh instance id (serve warns; operator commands beside a live server always do). */
  readonly identity: Identity & { readonly fallback?: string }
  readonly writer: LedgerWriter
  readonly ledger: Ledger
  readonly sweeper: Sweeper
  readonly limits: Limits
  /** Admission for billed calls: concurrency slot + ledger hold, ended exactly once. */
  readonly metering: Metering
  /** Model ids and levels → callable routes, built once from config. */
  readonly catalog: Catalog
  /** Picks a backend per call, with fallback and cool-down. */
  readonly router: Router
  /** What the chat pipeline needs (metering, router, logger, clock): shared by chat, Fusion and MCP. */
  readonly pipeline: PipelineDeps
  /** The Fusion service's dependencies: `runFusion(deps.fusion, …)` (HTTP route and MCP tool). */
  readonly fusion: FusionDeps
  /** Document text extraction on a pool of Bun Workers (started on first use). */
  readonly extractor: ExtractorPool
  /** The OAuth 2.1 authorization server (svc_cli_ and svc_mcp_ tokens). */
  readonly oauth: OAuthServer
  /** The configured providers by config id (attestation and the Encrypted relay reach attested ones directly). */
  readonly providers: ReadonlyMap<string, Provider>
  /** Evidence from attested backends: GET /api/v1/attestation and the Encrypted key pinning. */
  readonly attestation: AttestationService
  /** Web retrieval: the SSRF-safe fetcher, the search backend, billing per page and search. */
  readonly web: WebService
  /** Prometheus metrics; other modules register gauges with `metrics.registry.gauge(name, help, read)`. */
  readonly metrics: GatewayMetrics
  /** One log line and metrics update per request. */
  readonly requestLog: RequestLog
  /** Draining state and billed calls in flight (graceful shutdown). */
  readonly lifecycle: Lifecycle
  /** MCP tools/call requests in flight, by caller and JSON-RPC id: what notifications/cancelled stops. */
  readonly mcpCalls: InFlightCalls
  /** The read path of the balance (never fabricates zero: errors propagate). */
  balance(orgId: string): Promise<BalanceView>
  close(): Promise<void>
}

/** Seams tests (and the CLI) replace. */
export interface DepsOverrides {
  /** Provider constructors by type (tests point them at fake upstreams or scripts). */
  providerFactories?: ProviderFactories
  clock?: Clock
  logger?: Logger
  database?: Database
  executor?: BatchExecutor
  identity?: Identity
  /** The document extractor (tests pass a pool with a scripted worker or hand-driven timers). */
  extractor?: ExtractorPool
  /** DNS for the web fetcher (tests map public-looking names to local test servers). */
  resolver?: Resolver
  /** The fetcher's HTTP client (tests wrap it to log every outbound connection). */
  webTransport?: Transport
  /** Extra CA (PEM) the fetcher trusts: tests' self-signed certificates only. */
  webTlsCa?: string
}

/** The real adapters, one per provider type. */
const PROVIDER_FACTORIES: ProviderFactories = {
  demo: config => new DemoProvider(config),
  'openai-compatible': config => new OpenAICompatibleProvider(config, config.chatCompletions),
  anthropic: config => new AnthropicProvider(config),
  attested: config => new AttestedProvider(config),
}

/** The database DATABASE_URL names, with its token and reply timeout. */
export function openConfiguredDatabase(config: Config, options: Pick<OpenOptions, 'requireSchema'> = {}): Promise<Database> {
  return openDatabase(config.databaseUrl, config.databaseAuthToken, { replyTimeoutMs: config.databaseTimeoutMs, ...options })
}

export async function createDeps(config: Config, overrides: DepsOverrides = {}): Promise<Deps> {
  const clock = overrides.clock ?? systemClock
  const logger = overrides.logger ?? createLogger(config.logLevel)
  const database = overrides.database ?? (await openConfiguredDatabase(config))
  const orgs = new OrgService(database.db, clock, new Set(config.plans.keys()))
  const executor = overrides.executor ?? createExecutor(database.url, database.client)
  const fault = faultAt(config.faultPoint)
  const writer = new LedgerWriter(executor, fault && (() => fault('in_settle')))
  const keys = new KeyService(database.db, writer, clock, logger, { ttlMs: config.auth.cacheTtlMs, maxEntries: config.auth.cacheMaxEntries })
  const cache = { ttlMs: config.auth.cacheTtlMs, maxEntries: config.auth.cacheMaxEntries }
  const oauth = new OAuthServer(database.db, clock, config.oauth, keys, cache)
  keys.useTokenVerifier(oauth.tokens)
  // A demoted user's keys and CLI tokens lose admin authority at once in this process.
  orgs.onRoleChange(userId => {
    keys.evictUser(userId)
    oauth.tokens.evictUser(userId)
  })
  const plans = new Plans(config)
  const identity: Identity & Partial<Pick<ProcessIdentity, 'release' | 'fallback'>> = overrides.identity ?? loadIdentity(config.instanceId, database.url)
  // A key found expired or inactive by the ledger stops working at once here, with its OAuth tokens.
  const ledger = new Ledger(writer, plans, clock, identity, logger, keyId => keys.evictKey(keyId))
  const sweeper = new Sweeper(writer, ledger, identity, clock, logger, config.ledger.instanceStaleAfterMs)
  const health = new LedgerHealth(clock, logger)
  health.probe = () => sweeper.heartbeat()
  ledger.health = health
  writer.onFailure = error => health.failed(error)
  const limits = new Limits(config.limits, clock)
  const lifecycle = new Lifecycle()
  // Leases swept from under this instance's holds (it was taken for dead): its calls in flight
  // are cut, so they charge what they produced by now against money another instance may spend.
  ledger.onLeaseLost = () =>
    lifecycle.abortInFlight(new ApiError('unavailable', 'this gateway instance lost its ledger leases (it did not answer for ledger.instance_stale_after_s); what was produced is charged, retry the request'))
  const metrics = new GatewayMetrics()
  const metering = new Metering(ledger, limits, lifecycle, metrics)
  const catalog = new Catalog(config)
  const providers = createProviders(config, overrides.providerFactories ?? PROVIDER_FACTORIES)
  const router = new Router(providers, clock)
  const documents = config.documents
  const extractor = overrides.extractor ?? new WorkerExtractorPool({
    size: documents.workers, queueSize: documents.queueSize, timeoutMs: documents.timeoutMs, memoryBudgetBytes: documents.memoryBudgetBytes,
    limits: { maxTextBytes: documents.maxTextBytes, zip: documents.zip, pdf: documents.pdf },
    onWorkerError: message => logger.warn('document extractor failed', { error: message }),
  })
  const fetcher = new WebFetcher(overrides.resolver ?? new SystemResolver(), config.web.fetch, {
    allowance: new AddressAllowance(config.web.fetch.unsafeTestAllowCidrs),
    transport: overrides.webTransport,
    tlsCa: overrides.webTlsCa,
    readPdf: pdfReader(extractor, documents.queueSize, clock),
    logger,
  })
  if (config.web.fetch.unsafeTestAllowCidrs.length > 0) {
    logger.warn('web.fetch.unsafe_test_allow_cidrs is set: the fetcher treats these ranges as public. Never use this outside tests.', { cidrs: config.web.fetch.unsafeTestAllowCidrs.join(',') })
  }
  const web = new WebService(config.web, config.prices, fetcher, searchBackend(config), metering, logger, lifecycle)
  for (const provider of providers.values()) if (provider instanceof AttestedProvider) provider.metrics = metrics
  registerStateGauges(metrics, writer, sweeper, ledger, limits, lifecycle, extractor)
  const pipeline: PipelineDeps = {
    metering, router, logger, clock, documents: { extractor, config: documents }, web, metrics, lifecycle, fault,
  }
  const fusion: FusionDeps = {
    pipeline, catalog, config: config.fusion,
    // Read per request: `svc plans set` changes Fusion access at once.
    async planOf(orgId) {
      const org = await orgs.getOrg(orgId)
      return { planId: org?.planId, fusion: org !== undefined && plans.get(org.planId)?.fusion === true }
    },
    billedOutside: (orgId, family, own) => readBilledOutside(writer, logger, orgId, family, own),
  }
  return {
    config, clock, logger, database, orgs, keys, plans, identity, writer, ledger, sweeper, limits, metering, extractor, catalog, router, pipeline, fusion,
    oauth, providers, attestation: new AttestationService(catalog, providers, router), web, metrics, lifecycle, requestLog: new RequestLog(logger, metrics),
    mcpCalls: new InFlightCalls(),
    // During a ledger outage the balance is 503 too: never a figure that may be stale or partial.
    balance: orgId => (health.unavailable ? Promise.reject(LedgerHealth.refusal()) : readBalance(database.client, plans, clock, orgId)),
    async close() {
      health.close()
      await sweeper.stop()
      // Its leases are back: another process may now take this database's stable instance id.
      identity.release?.()
      await extractor.close()
      await keys.idle()
      executor.close()
      database.close()
    },
  }
}

/**
 * Fetched PDF pages go through the extraction pool like uploads (never parsed on the event
 * loop). The page is billed as one fetched page, not as a document parse.
 */
function pdfReader(extractor: ExtractorPool, queueSize: number, clock: Clock): PdfReader {
  return async (bytes, signal) => {
    try {
      // A job already in a worker does not stop on the signal: a call that is cut stops waiting.
      const extraction = await abortable(extractor.extract({ bytes, signal }), signal)
      if (extraction.documentType !== 'pdf') return { ok: false, kind: 'rejected', message: 'the page is labelled application/pdf but is not a PDF' }
      return { ok: true, text: extraction.text }
    } catch (error) {
      if (!(error instanceof ExtractionError)) throw error
      // Unreadable documents are the page's problem; a full, slow or stopping pool is the
      // gateway's, answered as for an upload (429 with Retry-After, 503).
      if (error.reason === 'invalid') return { ok: false, kind: 'rejected', message: error.message }
      const refusal = extractionApiError(error, { queueSize, nowMs: clock.now() })
      return { ok: false, kind: 'gateway', message: refusal.message, error: refusal }
    }
  }
}

function searchBackend(config: Config): SearchBackend | null {
  const search = config.web.search
  if (search === null) return null
  return search.backend === 'brave' ? new BraveBackend(search.baseUrl, search.apiKey, search.timeoutMs) : new SearxngBackend(search.baseUrl, search.timeoutMs)
}

/** Gauges read at scrape time from the modules that own the state. */
function registerStateGauges(metrics: GatewayMetrics, writer: LedgerWriter, sweeper: Sweeper, ledger: Ledger, limits: Limits, lifecycle: Lifecycle, extractor: ExtractorPool): void {
  const gauge = metrics.registry.gauge.bind(metrics.registry)
  const health = ledger.health
  writer.onCommit = elapsedMs => {
    metrics.ledgerCommitSeconds.observe(elapsedMs / 1000)
    health?.succeeded()
  }
  gauge('svc_ledger_database_up', '1 while the ledger database takes writes, 0 during an outage.', () => (health?.unavailable ? 0 : 1))
  gauge('svc_ledger_queue_depth', 'Ledger ops waiting for the writer.', () => writer.queueDepth)
  gauge('svc_ledger_batches_total', 'Ledger batches committed.', () => writer.stats.batches, 'counter')
  gauge('svc_ledger_ops_total', 'Ledger ops committed.', () => writer.stats.ops, 'counter')
  gauge('svc_ledger_failed_batches_total', 'Ledger batches that failed to commit.', () => writer.stats.failedBatches, 'counter')
  gauge('svc_ledger_leases_returned_total', 'Leases returned by this instance\'s sweeper (dead boots, stale instances, its own rows left by lost grant replies).', () => sweeper.returned, 'counter')
  gauge('svc_ledger_held_nanos', 'USD nanos held in memory by reservations in flight.', () => {
    let held = 0n
    for (const pool of ledger.pools.all()) held += pool.held
    return Number(held)
  })
  gauge('svc_inference_slots_in_use', 'Inference concurrency slots taken, over all organizations.', () => limits.concurrency.totalInUse)
  gauge('svc_billed_calls_in_flight', 'Billed calls in flight (chat, document parses, web calls): what a drain waits for.', () => lifecycle.inFlight)
  gauge('svc_draining', '1 while the instance drains for shutdown.', () => (lifecycle.draining ? 1 : 0))
  gauge('svc_process_resident_memory_bytes', 'Resident set size.', () => process.memoryUsage.rss())
  // The extractor pool's own counts, read at scrape time (workers start on demand, so 0 until the first parse).
  gauge('svc_extractor_workers', 'Document extractor workers running.', () => extractor.stats().workers)
  gauge('svc_extractor_busy', 'Document extractor workers running a job.', () => extractor.stats().busy)
  gauge('svc_extractor_queued', 'Document extraction jobs waiting for a worker.', () => extractor.stats().queued)
}
