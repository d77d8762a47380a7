import { readBalance, type BalanceView } from './billing/balance'
import { createExecutor, type BatchExecutor } from './billing/executor'
import { loadIdentity } from './billing/identity'
import { Ledger, type Identity } from './billing/ledger'
import { LedgerWriter } from './billing/ledger-writer'
import { Metering } from './billing/metering'
import { Plans } from './billing/plans'
import { Sweeper } from './billing/sweeper'
import { AttestationService } from './attestation/service'
import { Catalog } from './catalog/catalog'
import { AnthropicProvider } from './providers/anthropic/provider'
import { AttestedProvider } from './providers/attested/provider'
import { DemoProvider } from './providers/demo/provider'
import { OpenAICompatibleProvider } from './providers/openai-compatible/provider'
import { createProviders, type ProviderFactories } from './providers/registry'
import type { Provider } from './providers/types'
import { Router } from './providers/router'
import type { Config } from './config/config'
import { openDatabase, type Database } from './db/client'
import { KeyService } from './keys/service'
import { systemClock, type Clock } from './lib/clock'
import { Limits } from './limits/admission'
import { createLogger, type Logger } from './observability/logger'
import { OrgService } from './orgs/service'

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
  /** The configured providers by config id (attestation and the Encrypted relay reach attested ones directly). */
  readonly providers: ReadonlyMap<string, Provider>
  /** Evidence from attested backends: GET /api/v1/attestation and the Encrypted key pinning. */
  readonly attestation: AttestationService
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
}

/** The real adapters, one per provider type. */
const PROVIDER_FACTORIES: ProviderFactories = {
  demo: config => new DemoProvider(config),
  'openai-compatible': config => new OpenAICompatibleProvider(config),
  anthropic: config => new AnthropicProvider(config),
  attested: config => new AttestedProvider(config),
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
  const providers = createProviders(config, overrides.providerFactories ?? PROVIDER_FACTORIES)
  const catalog = new Catalog(config)
  return {
    config, clock, logger, database, orgs, keys, plans, identity, writer, ledger, sweeper, limits, metering, catalog,
    router: new Router(providers, clock),
    providers,
    attestation: new AttestationService(catalog, providers),
    balance: orgId => readBalance(database.client, plans, clock, orgId),
    async close() {
      await sweeper.stop()
      await keys.idle()
      executor.close()
      database.close()
    },
  }
}
