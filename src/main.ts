import { createApp } from './app'
import type { Config } from './config/config'
import { migrateDatabase } from './db/client'
import { createDeps } from './deps'
import { MiB } from './http/body-limit'
import { bootstrapIfEmpty } from './orgs/bootstrap'

/**
 * `svc serve`: migrate, bootstrap an empty database, listen on PORT. SIGTERM/SIGINT stop
 * accepting connections, let in-flight requests finish, then close the database.
 */
export async function serve(config: Config, print: (line: string) => void = line => console.log(line)): Promise<void> {
  const deps = await createDeps(config)
  await migrateDatabase(deps.database)
  await deps.sweeper.start()
  const boot = config.bootstrap.enabled ? await bootstrapIfEmpty(deps) : null
  // Expired OAuth codes and tokens: purged at boot, then hourly.
  const purge = () => void deps.oauth.purgeExpired().catch(error => deps.logger.warn('oauth purge failed', { error: String(error) }))
  purge()
  const purgeTimer = setInterval(purge, 3_600_000)
  purgeTimer.unref()
  const app = createApp(deps).listen({
    port: config.port,
    // Global ceiling just above the largest route limit (64 MiB chat); routes cap lower in their parse hooks.
    maxRequestBodySize: 65 * MiB,
  })
  const port = app.server?.port ?? config.port
  if (boot) announceBootstrap(boot.secret, boot.orgId, port, print)
  deps.logger.info('listening', { port, database: redactUrl(config.databaseUrl), config: config.source })

  let stopping = false
  const shutdown = async (signal: string) => {
    if (stopping) return
    stopping = true
    deps.logger.info('shutting down', { signal })
    clearInterval(purgeTimer)
    await app.server?.stop(false)
    await deps.close()
    process.exit(0)
  }
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
  process.on('SIGINT', () => void shutdown('SIGINT'))
}

function announceBootstrap(secret: string, orgId: string, port: number, print: (line: string) => void): void {
  // The key appears once, inside a command that can be pasted as is.
  print(`Created organization ${orgId} and its admin API key, shown only this once. Try it:`)
  print(`  curl -s http://localhost:${port}/api/v1/billing/balance -H "Authorization: Bearer ${secret}"`)
}

/** Drops credentials from a database URL before logging it. */
function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//[redacted]@').replace(/([?&]authToken=)[^&]*/i, '$1[redacted]')
}
