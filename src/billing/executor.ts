import type { Client, InValue } from '@libsql/client'
import Libsql from 'libsql'
import { localPathOf } from '../db/file-url'

/** One SQL statement with positional arguments. */
export interface Statement {
  readonly sql: string
  readonly args: readonly InValue[]
}

/** What a statement did: rows changed, and rows returned (SELECT or RETURNING). */
export interface StatementResult {
  readonly changes: number
  readonly rows: ReadonlyArray<Record<string, unknown>>
}

/**
 * Runs a list of statements as one write transaction (BEGIN IMMEDIATE … COMMIT), all or
 * nothing. Only the ledger writer uses it, one batch at a time.
 */
export interface BatchExecutor {
  /**
   * `beforeCommit`: a crash-test seam (SVC_FAULT_POINT=in_settle) run inside the transaction,
   * after its statements and before its COMMIT, where an executor can reach that point.
   */
  write(statements: readonly Statement[], beforeCommit?: () => void): Promise<StatementResult[]>
  close(): void
  /**
   * A failed write may have committed: against a libSQL server the COMMIT can go through and its
   * reply be lost. The ledger then gives every write it may retry a claim (ledger.ts,
   * `claimForRetries`), so that a retry books nothing twice. A local file's write fails only
   * before its COMMIT.
   */
  readonly ambiguousCommits?: boolean
}

/**
 * Local database files: the `libsql` engine's Database directly (the same native library
 * @libsql/client runs on, so one SQLite per process), with each distinct SQL text prepared
 * once and reused. @libsql/client prepares every statement on every call (~120 µs each), which
 * is what made per-request durable writes too slow (ARCHITECTURE.md §7.2).
 *
 * A batch runs synchronously (BEGIN IMMEDIATE … COMMIT on the event loop: a write transaction
 * must never stay open across turns, or another connection of this process would busy-wait on
 * it), so everything it costs blocks the loop. WAL checkpoints are therefore taken off it; see
 * WalCheckpointer.
 */
export class NativeExecutor implements BatchExecutor {
  private readonly database: Libsql.Database
  private readonly prepared = new Map<string, PreparedStatement>()
  private readonly begin: Libsql.Statement<unknown[]>
  private readonly commit: Libsql.Statement<unknown[]>
  private readonly rollback: Libsql.Statement<unknown[]>
  private readonly checkpointer: WalCheckpointer | null
  /**
   * A batch waited the whole busyWaitMs for another process's lock and failed, and no batch has
   * committed since: the next ones try once instead of waiting again. Batches run one at a time,
   * so while a lock was held each queued behind the others' full waits (heartbeats and probes
   * included), and a settlement already answered by its upstream waited as long as the lock was
   * held (QA: 70 s), past its three tries; now its tries fail fast and it ends in error, as
   * ARCHITECTURE §7.5 says.
   */
  private locked = false

  /** `busyWaitMs`: how long a batch waits for another process's write lock (tests shorten it). */
  constructor(
    path: string,
    private readonly busyWaitMs = BUSY_WAIT_MS,
  ) {
    // No busy timeout: SQLite's busy-wait is synchronous, so waiting there for another process's
    // write lock froze the event loop (every route, every stream) for up to the timeout, again on
    // each batch and health probe. write() waits for the lock between turns instead.
    this.database = new Libsql(path, { timeout: 0 })
    this.database.defaultSafeIntegers(true)
    this.database.exec('PRAGMA journal_mode=WAL')
    // WAL + NORMAL: a commit survives a process kill; an OS crash may lose the last commits.
    this.database.exec('PRAGMA synchronous=NORMAL')
    this.begin = this.database.prepare('BEGIN IMMEDIATE')
    this.commit = this.database.prepare('COMMIT')
    this.rollback = this.database.prepare('ROLLBACK')
    this.checkpointer = WalCheckpointer.open(path, this.database)
  }

  async write(statements: readonly Statement[], beforeCommit?: () => void): Promise<StatementResult[]> {
    // Every few commits (see WalCheckpointer): wait, off the event loop, for a checkpoint of the
    // whole WAL, so that this transaction restarts the WAL from its beginning.
    if (this.checkpointer?.restartDue) await this.checkpointer.catchUp()
    // Processes sharing the file queue for its write lock: a batch that finds it taken (SQLITE_BUSY,
    // before anything was written, or rolled back) tries again after a pause, up to busyWaitMs,
    // the busy timeout SQLite was given before.
    const budget = this.locked ? 0 : this.busyWaitMs
    for (let waited = 0, pause = 1; ; waited += pause, pause = Math.min(pause * 2, 50)) {
      try {
        const results = this.transact(statements, beforeCommit)
        this.locked = false
        return results
      } catch (error) {
        // SQLITE_BUSY and its extended codes: SQLITE_BUSY_RECOVERY is another connection (the
        // checkpointer's, at boot) recovering the WAL. The transaction rolled back either way.
        const busy = String((error as { code?: unknown }).code ?? '').startsWith('SQLITE_BUSY')
        if (!busy || waited >= budget) {
          if (busy) this.locked = true
          throw error
        }
      }
      await Bun.sleep(pause)
    }
  }

  close(): void {
    this.checkpointer?.close()
    this.database.close()
  }

  /** The batch itself, synchronous from BEGIN to COMMIT. */
  private transact(statements: readonly Statement[], beforeCommit?: () => void): StatementResult[] {
    const results: StatementResult[] = []
    this.begin.run()
    try {
      for (const statement of statements) {
        const prepared = this.statement(statement.sql)
        // The args array goes to libsql as one argument: spread, libsql would copy it twice
        // (rest parameters, then .flat()) before binding; a multi-row INSERT has ~1,700 args.
        if (prepared.reader) results.push({ changes: 0, rows: prepared.statement.all(statement.args) as Array<Record<string, unknown>> })
        else results.push({ changes: prepared.statement.run(statement.args).changes, rows: NO_ROWS })
      }
      beforeCommit?.()
      this.commit.run()
    } catch (error) {
      if (this.database.inTransaction) this.rollback.run()
      throw error
    }
    this.checkpointer?.committed()
    return results
  }

  private statement(sql: string): PreparedStatement {
    let prepared = this.prepared.get(sql)
    if (prepared === undefined) {
      const statement = this.database.prepare(sql)
      // `reader` is a native call; it cannot change for a prepared statement, so ask once.
      prepared = { statement, reader: statement.reader }
      this.prepared.set(sql, prepared)
    }
    return prepared
  }
}

interface PreparedStatement {
  readonly statement: Libsql.Statement<unknown[]>
  readonly reader: boolean
}

/** How long a batch waits, between event-loop turns, for another process to release the write lock. */
export const BUSY_WAIT_MS = 5000

// Shared by every write-only result; frozen because callers receive it.
const NO_ROWS: ReadonlyArray<Record<string, unknown>> = Object.freeze([])

/** What this file uses of `libsql/promise`: the same engine, with statements run on native threads. */
interface AsyncDatabase {
  prepare(sql: string): Promise<{ all(): Promise<Array<Record<string, unknown>>> }>
  exec(sql: string): Promise<unknown>
  close(): void
}

// Aim for a WAL of about this many frames (4 KiB pages) between restarts: ~1.6 MiB, well under
// SQLite's autocheckpoint of 1000 frames, which the other connections of the process
// (@libsql/client's pool) still use. If the WAL went past it, their next write would checkpoint
// the whole WAL synchronously, on the event loop.
const TARGET_WAL_FRAMES = 400
// Bounds on the number of commits between checkpoints, which adapts to hit the target.
const MIN_COMMITS_BETWEEN = 4
const MAX_COMMITS_BETWEEN = 64
// The concurrent checkpoint starts this many commits before a catch-up (~2 ms ahead on the
// target), so that the catch-up is left with only those commits' frames to copy.
const LEAD_COMMITS = 4

/**
 * WAL checkpoints off the event loop. By default SQLite checkpoints inside the COMMIT that takes
 * the WAL past 1000 frames: it copies every page in the WAL back into the database file and
 * fsyncs both files, synchronously, which on the 2-core target took 4–20 ms once every ~40
 * batches and was the p99 of batch commit time (bench/README.md).
 *
 * Here the writer's connection never checkpoints (`wal_autocheckpoint=0`). A second connection
 * from `libsql/promise`, whose statements run on libsql's native threads, runs
 * `PRAGMA wal_checkpoint(PASSIVE)` (which never blocks or waits for a writer):
 * - a few commits before a restart is due, while the writer goes on committing;
 * - then once more, the catch-up, which the writer awaits before its next transaction (the
 *   event loop stays free; settlements queue up meanwhile and commit in the next batch). With no
 *   commit in between, every frame is then in the database file, so that next transaction
 *   restarts the WAL from its beginning and the WAL stays ~TARGET_WAL_FRAMES long.
 * - The restart itself happens on the background connection too, in the catch-up: a WAL restart
 *   writes a new WAL header and fsyncs it (SQLite does so at every synchronous level but OFF),
 *   which on the writer's connection blocked the event loop for that transaction, ~1.2–1.5 ms on
 *   the 2-core VM against ~0.35 ms for other batches: one batch in ~50, so it set the p99 of the
 *   writer's transactions (bench/README.md, twenty-fifth session).
 * Measured and rejected: only overlapping checkpoints (the WAL can then never restart and grew
 * by GBs), and checkpointing every commit or two (many more fsyncs; p99 got worse).
 *
 * Where `libsql/promise` cannot be loaded (the compiled binary, until build.ts embeds it; see
 * bench/README.md), or if the background connection ever fails, the writer's connection keeps or
 * goes back to SQLite's own autocheckpoint: the previous behaviour.
 */
class WalCheckpointer {
  private commitsSince = 0
  private commitsBetween = 16
  private closed = false
  private running: Promise<void> | null = null
  private readonly checkpoint: Promise<{ all(): Promise<Array<Record<string, unknown>>> }>
  private readonly userVersion: Promise<{ all(): Promise<Array<Record<string, unknown>>> }>

  private constructor(
    private readonly connection: AsyncDatabase,
    private readonly writerDatabase: Libsql.Database,
  ) {
    this.checkpoint = connection.prepare('PRAGMA wal_checkpoint(PASSIVE)')
    this.userVersion = connection.prepare('PRAGMA user_version')
    // Handled where they are awaited (run, restart); this only keeps a rejection from going unobserved.
    this.checkpoint.catch(() => {})
    this.userVersion.catch(() => {})
  }

  /** A checkpointer for the database file at `path`, or null where `libsql/promise` is unavailable. */
  static open(path: string, writerDatabase: Libsql.Database): WalCheckpointer | null {
    let connection: AsyncDatabase
    try {
      const AsyncLibsql = require('libsql/promise') as new (path: string, options: { timeout: number }) => AsyncDatabase
      connection = new AsyncLibsql(path, { timeout: 5000 })
    } catch {
      return null
    }
    writerDatabase.exec('PRAGMA wal_autocheckpoint=0')
    return new WalCheckpointer(connection, writerDatabase)
  }

  /** Enough commits since the last restart: the next write should let a checkpoint finish first. */
  get restartDue(): boolean {
    return this.commitsSince >= this.commitsBetween && !this.closed
  }

  /** After each commit of the writer. */
  committed(): void {
    this.commitsSince += 1
    // A few commits before the restart is due, checkpoint while the writer goes on committing:
    // the catch-up then has only those last commits' frames left to copy.
    if (this.running === null && this.commitsSince === this.commitsBetween - LEAD_COMMITS) void this.run(false)
  }

  /** Checkpoints the whole WAL; the caller commits nothing until this settles. Never rejects. */
  async catchUp(): Promise<void> {
    if (this.running) await this.running
    this.commitsSince = 0
    await this.run(true)
  }

  private run(final: boolean): Promise<void> {
    if (this.closed) return Promise.resolve()
    this.running = this.checkpoint
      .then(statement => statement.all())
      .then(
        rows => {
          if (!final) return
          // `log`: frames in the WAL, all written since its last restart. Steer the commit count
          // toward the target size (a failed restart, where a reader in another process still
          // used old frames, shows up as a long WAL and makes checkpoints more frequent).
          const frames = Number(rows[0]?.log ?? 0)
          const scaled = frames > 0 ? Math.round((this.commitsBetween * TARGET_WAL_FRAMES) / frames) : MAX_COMMITS_BETWEEN
          this.commitsBetween = Math.min(MAX_COMMITS_BETWEEN, Math.max(MIN_COMMITS_BETWEEN, scaled))
          // Every frame is in the database file: the next write restarts the WAL. Make it this
          // connection's, off the event loop.
          if (frames > 0 && Number(rows[0]?.checkpointed) === frames) return this.restart()
        },
        () => this.fail(),
      )
      .finally(() => {
        this.running = null
      })
    return this.running
  }

  /**
   * A write of one page (the header's user_version, set to the value it has): the first write
   * after a whole checkpoint restarts the WAL. If it fails (another process holds the write
   * lock), the writer's next transaction restarts the WAL itself, as it did before.
   */
  private async restart(): Promise<void> {
    try {
      const rows = await (await this.userVersion).all()
      await this.connection.exec(`PRAGMA user_version = ${Number(rows[0]?.user_version ?? 0)}`)
    } catch {
      // Nothing lost: see above.
    }
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    // Closing under a running checkpoint would pull the connection from under its thread.
    if (this.running) void this.running.then(() => this.connection.close())
    else this.connection.close()
  }

  /** The background connection failed: hand checkpoints back to SQLite on the writer's connection. */
  private fail(): void {
    if (this.closed) return
    this.closed = true
    try {
      this.writerDatabase.exec('PRAGMA wal_autocheckpoint=1000')
      this.connection.close()
    } catch {
      // The writer's own statements will report a broken database.
    }
  }
}

/**
 * Remote libSQL servers (where the cost moves to the server) and `:memory:` databases (which
 * exist only on the client's single connection): @libsql/client's atomic write batch.
 */
export class ClientExecutor implements BatchExecutor {
  constructor(
    private readonly client: Client,
    /** True for a server URL; an in-memory database's writes cannot be lost after they commit. */
    readonly ambiguousCommits = false,
  ) {}

  async write(statements: readonly Statement[], beforeCommit?: () => void): Promise<StatementResult[]> {
    // The client's batch is one request: its seam runs before it is sent (a process killed inside
    // a server transaction leaves nothing either, as its connection closes uncommitted).
    beforeCommit?.()
    const results = await this.client.batch(
      statements.map(statement => ({ sql: statement.sql, args: [...statement.args] })),
      'write',
    )
    return results.map(result => ({ changes: result.rowsAffected, rows: result.rows as unknown as Array<Record<string, unknown>> }))
  }

  close(): void {}
}

/** Picks the executor for a database URL. */
export function createExecutor(url: string, client: Client): BatchExecutor {
  const path = localPathOf(url)
  if (path !== undefined) return new NativeExecutor(path)
  return new ClientExecutor(client, url !== ':memory:' && !url.startsWith('file:'))
}
