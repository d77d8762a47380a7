import { existsSync, mkdirSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { Client } from '@libsql/client'
import { createClient as createLocalClient } from '@libsql/client/sqlite3'
// This entry differs from drizzle-orm/libsql only in the client it would create from a URL; given
// a client (any of libsql's), it is the same drizzle. The other entry imports the full client.
import { drizzle } from 'drizzle-orm/libsql/sqlite3'
import type { LibSQLDatabase } from 'drizzle-orm/libsql/driver-core'
import { sql } from 'drizzle-orm'
import { DrizzleQueryError } from 'drizzle-orm/errors'
import { migrate } from 'drizzle-orm/libsql/migrator'
import { localPathOf } from './file-url'
import { schema } from './schema'

export type Db = LibSQLDatabase<typeof schema>

/** URL schemes served by a libSQL server; everything else (file:, :memory:) is a local file. */
const REMOTE = /^(libsql|https?|wss?):/i

/** One libSQL database: the raw client (for batches and PRAGMAs) and drizzle over it. */
export interface Database {
  readonly client: Client
  readonly db: Db
  readonly url: string
  /** Runs `work` with no limit on a libSQL server's reply time (migrations: a long index build is not a hang). */
  unlimited<T>(work: () => Promise<T>): Promise<T>
  close(): void
}

export interface OpenOptions {
  /** How long a statement waits for another connection's write lock (SQLite's busy timeout). */
  busyTimeoutMs?: number
  /** How long a libSQL server gets to answer one HTTP request. */
  replyTimeoutMs?: number
  /**
   * Refuse a database that has no gateway schema yet, before anything is written to it (WAL
   * included): an empty file, or another application's database that a DATABASE_URL names by
   * mistake. Only migrate and serve make a database the gateway's; one merely behind is migrated.
   */
  requireSchema?: boolean
}

/**
 * Opens a libSQL database: a local `file:` path (WAL mode, directory created), `:memory:`,
 * or a `libsql://` / `http(s)://` server. Integers come back as bigints so nanos stay exact.
 */
export async function openDatabase(url: string, authToken?: string, options: OpenOptions = {}): Promise<Database> {
  const { busyTimeoutMs = BUSY_TIMEOUT_MS, replyTimeoutMs = REPLY_TIMEOUT_MS, requireSchema = false } = options
  const path = localPathOf(url)
  const localFile = path !== undefined
  if (localFile) prepareFile(path)
  // A local database needs only the sqlite3 client: the full entry point also loads the HTTP and
  // WebSocket clients (hrana, ~60 modules) for a server URL.
  const createClient = REMOTE.test(url) ? (await import('@libsql/client')).createClient : createLocalClient
  // `timeout` is the busy timeout for every pooled connection (a PRAGMA would reach only one).
  const limit = { unlimited: 0 }
  const fetch = REMOTE.test(url) ? timedFetch(replyTimeoutMs, limit) : undefined
  const client = createClient({ url, authToken, intMode: 'bigint', timeout: busyTimeoutMs, fetch })
  if (localFile) reopenAfterBusy(client)
  const db = drizzle(client, { schema })
  try {
    if (requireSchema) await checkSchema(db, path)
    // WAL is stored in the file, so setting it once through any connection is enough.
    if (url.startsWith('file:')) await client.execute('PRAGMA journal_mode=WAL')
  } catch (error) {
    client.close()
    // The first statement opens the file: a failure here is the file's (not a database, no permission).
    if (!localFile || error instanceof DatabaseFileError) throw error
    const cause = error instanceof DrizzleQueryError ? error.cause : error
    throw new DatabaseFileError(`${path}: ${(cause as Error).message}`, { cause })
  }
  const unlimited = async <T>(work: () => Promise<T>): Promise<T> => {
    limit.unlimited += 1
    try {
      return await work()
    } finally {
      limit.unlimited -= 1
    }
  }
  return { client, db, url, unlimited, close: () => client.close() }
}

const BUSY_TIMEOUT_MS = 5000
export const REPLY_TIMEOUT_MS = 10_000

/**
 * libSQL's HTTP client has no timeout: a server that accepts a request and never answers (QA)
 * held every billed call, /readyz and the shutdown with it. A request not answered in time fails
 * as an outage (503, /readyz `unreachable`); a write whose reply is lost this way may still have
 * committed, which the ledger's claims already cover (ledger-retries.ts).
 */
function timedFetch(timeoutMs: number, limit: { unlimited: number }) {
  return async (request: Request): Promise<Response> => {
    if (limit.unlimited > 0) return fetch(request)
    try {
      return await fetch(request, { signal: AbortSignal.timeout(timeoutMs) })
    } catch (error) {
      if ((error as Error)?.name !== 'TimeoutError') throw error
      throw new DatabaseUnanswered(`database unreachable: the libSQL server did not answer within ${timeoutMs / 1000} s`, { cause: error })
    }
  }
}

/**
 * A libSQL server did not answer a request within DATABASE_TIMEOUT_S. Unlike a refused or reset
 * connection, which fails at once, every further request to a server in that state waits as long
 * (the shutdown's lease returns stop at the first: Sweeper.stop).
 */
export class DatabaseUnanswered extends Error {}

/** The client methods that run statements on a pooled connection. */
const RUNS_STATEMENTS = ['execute', 'batch', 'migrate', 'transaction', 'executeMultiple'] as const

/**
 * After SQLITE_BUSY (another process held the write lock past the busy timeout), @libsql/client's
 * local connection is broken for good: the failed statement is never reset, so SQLite counts it
 * as still running. Every later transaction on that connection fails ("cannot commit transaction
 * - SQL statements in progress"), and every later autocommit write reports success but stays in
 * a transaction that never commits, holding the file's write lock: the writes are lost and every
 * other writer (the ledger's, other instances) is locked out until the process ends (measured
 * with @libsql/client 0.18). The pool is reopened instead, which closes that connection; the
 * statement that met the lock still fails (a 503 to its caller). Statements run synchronously
 * and no route holds a transaction across an await, so no other operation has a connection out.
 */
function reopenAfterBusy(client: Client): void {
  for (const name of RUNS_STATEMENTS) {
    const run = client[name] as (...args: unknown[]) => Promise<unknown>
    ;(client as unknown as Record<string, unknown>)[name] = async (...args: unknown[]) => {
      try {
        return await run.apply(client, args)
      } catch (error) {
        if (String((error as { code?: unknown })?.code ?? '').startsWith('SQLITE_BUSY')) await client.reconnect()
        throw error
      }
    }
  }
}

/**
 * A database that cannot be opened (a local file, or one without the gateway's schema); the
 * message names the path and why. The CLI prints it naming DATABASE_URL (src/commands.ts failureLine).
 */
export class DatabaseFileError extends Error {}

/** Where drizzle's migrator records the migrations applied: every gateway database has it. */
const MIGRATIONS_TABLE = '__drizzle_migrations'

/** Refuses a database without MIGRATIONS_TABLE (requireSchema); it reads only. */
async function checkSchema(db: Db, path: string | undefined): Promise<void> {
  // Through drizzle, so an unreachable server reads as any query's failure (commands.ts failureLine).
  const found = await db.all(sql`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ${MIGRATIONS_TABLE}`)
  if (found.length > 0) return
  throw new DatabaseFileError(`${path ?? 'it'} is not a gateway database (no ${MIGRATIONS_TABLE} table); svc migrate or svc serve creates the gateway's tables in it`)
}

/** Creates a local database's directory; a path that is a directory is refused by name (SQLite says only "unable to open"). */
function prepareFile(path: string): void {
  let directory: boolean
  try {
    directory = statSync(path, { throwIfNoEntry: false })?.isDirectory() === true
    if (!directory) mkdirSync(dirname(path), { recursive: true })
  } catch (error) {
    // A path through a file (ENOTDIR, EEXIST), no permission (EACCES).
    throw new DatabaseFileError(`${path}: ${(error as Error).message}`, { cause: error })
  }
  if (directory) throw new DatabaseFileError(`${path} is a directory, not a database file`)
}

/** The migrations folder: embedded next to the bundle in the compiled binary, else the repository's drizzle/. */
export function migrationsFolder(): string {
  const embedded = join(import.meta.dir, 'drizzle')
  if (existsSync(join(embedded, 'meta', '_journal.json'))) return embedded
  return join(import.meta.dir, '..', '..', 'drizzle')
}

/** Applies pending drizzle-kit migrations (idempotent; tracked in __drizzle_migrations). */
export async function migrateDatabase(database: Database): Promise<void> {
  // One timed statement first: a server that does not answer at all fails here, within
  // DATABASE_TIMEOUT_S (QA: CLI commands, which migrate first, hung on one), not in the migration.
  await database.db.run(sql`SELECT 1`) // through drizzle, so its failure reads as any query's (commands.ts failureLine)
  await database.unlimited(() => migrate(database.db, { migrationsFolder: migrationsFolder() }))
}

/** True when a trivial query succeeds: backs /readyz. */
export async function pingDatabase(database: Database): Promise<boolean> {
  try {
    await database.client.execute('SELECT 1')
    return true
  } catch {
    return false
  }
}

/**
 * An error that means the database is unreachable or refuses writes (read-only, locked, gone):
 * requests that hit it answer 503 `unavailable`, not 500. Constraint errors are bugs or races
 * of the data, not outages, and stay what they are.
 */
export function isDatabaseOutage(error: unknown): boolean {
  const code = String((error as { code?: unknown })?.code ?? '')
  const text = `${code} ${(error as { name?: unknown })?.name ?? ''} ${String(error)} ${String((error as { cause?: unknown })?.cause ?? '')}`
  if (/CONSTRAINT/.test(text)) return false
  return /SQLITE_|LibsqlError|ECONNREFUSED|ECONNRESET|fetch failed|database is locked|readonly database|unable to open database|disk I\/O error|database unreachable/i.test(text)
}
