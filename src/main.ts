import { createApp } from './app'
import { isInMemoryUrl } from './db/file-url'
import type { Config } from './config/config'
import { migrateDatabase } from './db/client'
import { createDeps, type Deps } from './deps'
import { MiB } from './http/body-limit'
import { IDLE_TIMEOUT_S } from './http/idle-timeout'
import { showOnceOrRevoke } from './keys/show-once'
import { releaseSignals } from './lib/held-signals'
import { stdOutput, type Output } from './lib/std-output'
import { startAdminServer } from './observability/admin-server'
import { displayUrl } from './observability/logger'
import { bootstrapIfEmpty, type BootstrapResult } from './orgs/bootstrap'

/** The steps of a boot, in order (ServeOptions.onBootStep names them). */
export type BootStep = 'migrate' | 'listen' | 'sweeper' | 'admin' | 'bootstrap'

/** Seams of `serve` for tests. */
export interface ServeOptions {
  /** Where the first boot's admin key is printed (standard output, else error; checked). */
  output?: Output
  /** Called as each boot step begins, inside it (tests deliver a signal mid-boot here). */
  onBootStep?: (step: BootStep) => Promise<void> | void
}

/**
 * `svc serve`: migrate, bootstrap an empty database, listen on PORT (and on the admin port when
 * `metrics.port` is set). SIGTERM/SIGINT drain gracefully (see `drainAndExit`); one that comes
 * during the boot (or before it: src/cli.ts holds it) ends it at its next step, and resolves
 * without listening.
 */
export async function serve(config: Config, options: ServeOptions = {}): Promise<void> {
  const deps = await createDeps(config)
  // Allowed (a throwaway gateway for a demo or a smoke test announces its own admin key), but
  // said: nothing survives a restart, and no operator command can reach this database.
  if (isInMemoryUrl(config.databaseUrl)) {
    deps.logger.warn('DATABASE_URL names an in-memory database: every organization, key and credit is lost when this process stops, and svc operator commands cannot reach it', { database: displayUrl(config.databaseUrl) })
  }
  if (deps.identity.fallback !== undefined) deps.logger.warn(deps.identity.fallback, { instance_id: deps.identity.instanceId })
  // Signals are handled from the start (a stop during migration or bootstrap is a drain too).
  // A second signal during the drain (Ctrl-C twice, an impatient orchestrator) ends the wait:
  // the calls still running are cut at once, settled and closed as at the deadline.
  const boot = new BootSteps(options.onBootStep)
  let server: Server | undefined
  let admin: Server | undefined
  let hurry: (() => void) | undefined
  const onSignal = (signal: string) => {
    if (hurry) return hurry()
    const now = new Promise<void>(resolve => (hurry = resolve))
    void drainAndExit(deps, () => ({ server, admin }), signal, now, boot)
  }
  process.on('SIGTERM', () => onSignal('SIGTERM'))
  process.on('SIGINT', () => onSignal('SIGINT'))
  // One that came earlier, while the modules loaded or the config was read (src/cli.ts).
  const early = releaseSignals()
  if (early !== undefined) onSignal(early)
  if (!(await boot.step('migrate', () => migrateDatabase(deps.database)))) return
  // Expired OAuth codes and tokens: purged at boot, then hourly.
  const purge = () => void deps.oauth.purgeExpired().catch(error => deps.logger.warn('oauth purge failed', { error: String(error) }))
  purge()
  const purgeTimer = setInterval(purge, 3_600_000)
  purgeTimer.unref()
  const listening = await boot.step('listen', () => {
    const app = createApp(deps).listen({
      port: config.port,
      // Global ceiling just above the largest route limit (64 MiB chat); routes cap lower in their parse hooks.
      // Bun answers a body declared past it with a bare 413, before the app (no request id, no log
      // line: README, Metrics and logs); it stays, as the bound on any body read whole.
      maxRequestBodySize: 65 * MiB,
      // Idle connections are closed after this; a request awaiting a long answer lifts it (http/idle-timeout.ts).
      idleTimeout: IDLE_TIMEOUT_S,
      // Elysia turns SO_REUSEPORT on: a second gateway (an old instance still running during an
      // upgrade) would then share the port silently instead of failing with EADDRINUSE.
      reusePort: false,
    })
    server = app.server ?? undefined
  })
  if (!listening) return
  const port = server?.port ?? config.port
  // Only once listening: a second copy that cannot bind (started with the same environment by
  // mistake) exits before its boot returns any lease (QA: it returned the live instance's).
  if (!(await boot.step('sweeper', () => deps.sweeper.start()))) return
  const adminStarted = await boot.step('admin', () => {
    if (config.metrics.port !== undefined) admin = startAdminServer(deps, config.metrics.port, config.metrics.host)
  })
  if (!adminStarted) return
  // Only once listening: a first boot that cannot bind must not create the admin key it would
  // then never print (the next boot finds the organization and announces nothing).
  const bootstrapped = await boot.step('bootstrap', async () => {
    const created = config.bootstrap.enabled ? await bootstrapIfEmpty(deps) : null
    if (created) await announceBootstrap(deps, created, port, options.output ?? stdOutput)
  })
  if (!bootstrapped) return
  deps.logger.info('listening', { port, admin_port: admin?.port, database: displayUrl(config.databaseUrl), config: config.source })
}

/**
 * Runs the boot's steps one at a time, and stops it between two: a shutdown signal during the
 * boot (QA: one during the first migration was followed by `listening` and the admin key, and
 * the drain closed the database under the boot) lets the step in progress end (a migration or
 * the bootstrap batch is not cut in the middle), then no further step starts.
 */
class BootSteps {
  private stopping = false
  private current: Promise<void> = Promise.resolve()
  /** The step under way, if any (named when a drain gives up on it). */
  inProgress: BootStep | undefined

  constructor(private readonly onStep: ServeOptions['onBootStep']) {}

  /** Runs `work` unless the boot was stopped; whether the boot goes on after it. */
  async step(name: BootStep, work: () => unknown): Promise<boolean> {
    if (this.stopping) return false
    const running = (async () => {
      await this.onStep?.(name)
      await work()
    })()
    // A failed step fails the boot (serve throws); the drain waits only for it to end.
    this.current = running.catch(() => {})
    this.inProgress = name
    try {
      await running
    } finally {
      this.inProgress = undefined
    }
    return !this.stopping
  }

  /** No step starts from now on; resolves once the step in progress has ended. */
  stop(): Promise<void> {
    this.stopping = true
    return this.current
  }
}

/**
 * Prints the first boot's admin key, inside a command that can be pasted as is; on standard
 * error if standard output does not take it (the boot goes on), revoked if neither does (the
 * boot fails: the next boot finds the organization and announces nothing).
 */
async function announceBootstrap(deps: Deps, boot: BootstrapResult, port: number, output: Output): Promise<void> {
  const lines = [
    `Created organization ${boot.orgId} and its admin API key, shown only this once. Try it:`,
    `  curl -s http://localhost:${port}/api/v1/billing/balance -H "Authorization: Bearer ${boot.secret}"`,
  ]
  await showOnceOrRevoke(output, lines, {
    what: "the first boot's admin key",
    keyId: boot.keyId,
    revoke: () => deps.keys.revoke(boot.orgId, boot.keyId),
    remedy: `Create one with: svc keys create --org ${boot.orgId} --user ${boot.ownerUserId} --name admin --admin`,
  })
}

type Server = ReturnType<typeof Bun.serve>

/**
 * Graceful shutdown (ARCHITECTURE.md §7.5): /readyz turns unready and new billed calls are
 * refused at once; the listener closes (new connections are refused); in-flight requests and
 * streams run to completion up to `shutdown.drain_timeout_s`. Past it, every billed call still
 * running is cut: a stream ends with the dialect's in-band `unavailable` error after its
 * produced output is settled, a collected answer with 503 and nothing charged. Then the ledger
 * writer is flushed, this boot's leases are returned, the database is closed, and the process
 * exits 0 (1 if closing failed, or if a boot step had to be given up on). `hurry` (a second
 * signal) cuts at once instead of at the deadline. `boot` is stopped here: a signal during the
 * boot ends it at its next step.
 */
async function drainAndExit(
  deps: Deps,
  listeners: () => { server?: Server; admin?: Server },
  signal: string,
  hurry: Promise<void>,
  boot: BootSteps,
): Promise<never> {
  const { logger, lifecycle } = deps
  const deadlineMs = deps.config.shutdown.drainTimeoutMs
  lifecycle.drain()
  logger.info('shutting down', { signal, in_flight: lifecycle.inFlight, deadline_ms: deadlineMs })
  // The deadline counts from the signal, over a boot step still under way as over the requests.
  const cut = Promise.race([delay(deadlineMs), hurry])
  let code = 0
  // A signal during the boot: its step in progress ends before anything closes, and the
  // listeners are read after it (the listen step may just have opened one). A step that has not
  // ended by the deadline or a second signal is given up on (QA: a libSQL server that accepts the
  // connection but never answers held the migration, and the process, until SIGKILL: libSQL's
  // HTTP client has no timeout). What that step did is unknown, so the exit code says so.
  const step = boot.inProgress
  const booted = await Promise.race([boot.stop().then(() => true), cut.then(() => false)])
  if (!booted) {
    logger.error('shutdown: a boot step did not end by the drain deadline or a second signal; exiting without it', { step })
    code = 1
  }
  const { server, admin } = listeners()
  // stop(false) closes the listener at once and resolves when every open response has ended.
  const stopped = server ? server.stop(false) : Promise.resolve()
  const drained = await Promise.race([stopped.then(() => true), cut.then(() => false)])
  if (!drained) {
    logger.warn('drain deadline passed or a second signal came; cutting the requests still running', { in_flight: lifecycle.inFlight })
    lifecycle.abortAll()
    // Cut calls settle and send their last frame as soon as their client reads; a client that
    // does not read within the grace is disconnected, which settles its stream through its
    // cancel path.
    const ended = await Promise.race([stopped.then(() => true), delay(CUT_GRACE_MS).then(() => false)])
    if (!ended) {
      await server?.stop(true)
      await Promise.race([lifecycle.idle(), delay(CUT_GRACE_MS)])
    }
  }
  // Every response has ended, but a call whose client left mid-answer ends on the lifecycle's
  // next tick, which releases its hold: wait for it, so its lease goes back and it is logged.
  await Promise.race([lifecycle.idle(), delay(CUT_GRACE_MS)])
  try {
    // A database that never answered the boot's step may not answer the closing writes either.
    await (booted ? deps.close() : Promise.race([deps.close(), delay(CUT_GRACE_MS)]))
  } catch (error) {
    logger.error('shutdown: closing failed', { error: String(error) })
    code = 1
  }
  await admin?.stop(true)
  logger.info('stopped', { signal, exit_code: code })
  process.exit(code)
}

// After the deadline, how long cut calls get to settle and send their last frame.
const CUT_GRACE_MS = 2000

const delay = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms))
