import type { Config } from './config/config'
import { openDatabase, type Database } from './db/client'
import { KeyService } from './keys/service'
import { systemClock, type Clock } from './lib/clock'
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
  close(): Promise<void>
}

/** Seams tests (and the CLI) replace. */
export interface DepsOverrides {
  clock?: Clock
  logger?: Logger
  database?: Database
}

export async function createDeps(config: Config, overrides: DepsOverrides = {}): Promise<Deps> {
  const clock = overrides.clock ?? systemClock
  const logger = overrides.logger ?? createLogger(config.logLevel)
  const database = overrides.database ?? (await openDatabase(config.databaseUrl, config.databaseAuthToken))
  const orgs = new OrgService(database.db, clock, new Set(config.plans.keys()))
  const keys = new KeyService(database.db, clock, logger, { ttlMs: config.auth.cacheTtlMs, maxEntries: config.auth.cacheMaxEntries })
  // A demoted user's keys lose admin authority at once in this process.
  orgs.onRoleChange(userId => keys.evictUser(userId))
  return {
    config,
    clock,
    logger,
    database,
    orgs,
    keys,
    async close() {
      await keys.idle()
      database.close()
    },
  }
}
