import { readBalance, type BalanceView } from './billing/balance'
import { createExecutor, type BatchExecutor } from './billing/executor'
import { loadIdentity } from './billing/identity'
import { Ledger, type Identity } from './billing/ledger'
import { LedgerWriter } from './billing/ledger-writer'
import { Metering } from './billing/metering'
import { Plans } from './billing/plans'
import { Sweeper } from './billing/sweeper'
import { Catalog } from './catalog/catalog'
import { AnthropicProvider } from './providers/anthropic/provider'
import { DemoProvider } from './providers/demo/provider'
import { OpenAICompatibleProvider } from './providers/openai-compatible/provider'
import { createProviders, type ProviderFactories } from './providers/registry'
import { Router } from './providers/router'
import type { Config } from './config/config'
import { openDatabase, type Database } from './db/client'
import { KeyService } from './keys/service'
import { systemClock, type Clock } from './lib/clock'
import { Limits } from './limits/admission'
import { createLogger, type Logger } from './observability/logger'
import { OrgService } from './orgs/service'
import { AddressAllowance } from './web/address-policy'
import { BraveBackend } from './web/brave'
import { WebFetcher, type Transport } from './web/fetcher'
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
  readonly identity: Identity
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
  /** Web retrieval: the SSRF-safe fetcher, the search backend, billing per page and search. */
  readonly web: WebService
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
  /** DNS for the web fetcher (tests map public-looking names to local test servers). */
  resolver?: Resolver
  /** The fetcher's HTTP client (tests wrap it to log every outbound connection). */
  webTransport?: Transport
  /** Extra CA (PEM) the fetcher trusts: tests' self-signed certificates only. */
  webTlsCa?: string
}

/** The real adapters, one per provider type (the attested family arrives with the TEE work). */
const PROVIDER_FACTORIES: ProviderFactories = {
  demo: config => new DemoProvider(config),
  'openai-compatible': config => new OpenAICompatibleProvider(config),
  anthropic: config => new AnthropicProvider(config),
}

export async function createDeps(config: Config, overrides: DepsOverrides = {}): Promise<Deps> {
  const clock = overrides.clock ?? systemClock
  const logger = overrides.logger ?? createLogger(config.logLevel)
  const database = overrides.database ?? (await openDatabase(config.databaseUrl, config.databaseAuthToken))
  const orgs = new OrgService(database.db, clock, new Set(config.plans.keys()))
  const keys = new KeyService(database.db, clock, logger, { ttlMs: config.auth.cacheTtlMs, maxEntries: config.auth.cacheMaxEntries })
  // A demoted user's keys lose admin authority at once in this process.
  orgs.onRoleChange(userId => keys.evictUser(userId))
  const plans = new Plans(config)
  const identity = overrides.identity ?? loadIdentity(config.instanceId, database.url)
  const executor = overrides.executor ?? createExecutor(database.url, database.client)
  const writer = new LedgerWriter(executor)
  const ledger = new Ledger(writer, plans, clock, identity, logger, keyId => keys.evictKey(keyId))
  const sweeper = new Sweeper(writer, ledger, identity, clock, logger, config.ledger.instanceStaleAfterMs)
  const limits = new Limits(config.limits, clock)
  const metering = new Metering(ledger, limits)
  const fetcher = new WebFetcher(overrides.resolver ?? new SystemResolver(), config.web.fetch, {
    allowance: new AddressAllowance(config.web.fetch.unsafeTestAllowCidrs),
    transport: overrides.webTransport,
    tlsCa: overrides.webTlsCa,
  })
  if (config.web.fetch.unsafeTestAllowCidrs.length > 0) {
    logger.warn('web.fetch.unsafe_test_allow_cidrs is set: the fetcher treats these ranges as public. Never use this outside tests.', { cidrs: config.web.fetch.unsafeTestAllowCidrs.join(',') })
  }
  const web = new WebService(config.web, config.prices, fetcher, searchBackend(config), metering, logger)
  return {
    config, clock, logger, database, orgs, keys, plans, identity, writer, ledger, sweeper, limits, metering, catalog: new Catalog(config),
    web,
    router: new Router(createProviders(config, overrides.providerFactories ?? PROVIDER_FACTORIES), clock),
    balance: orgId => readBalance(database.client, plans, clock, orgId),
    async close() {
      await sweeper.stop()
      await keys.idle()
      executor.close()
      database.close()
    },
  }
}

function searchBackend(config: Config): SearchBackend | null {
  const search = config.web.search
  if (search === null) return null
  return search.backend === 'brave' ? new BraveBackend(search.baseUrl, search.apiKey, search.timeoutMs) : new SearxngBackend(search.baseUrl, search.timeoutMs)
}
