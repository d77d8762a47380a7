import { existsSync, mkdirSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { Client } from '@libsql/client'
import { createClient as createLocalClient } from '@libsql/client/sqlite3'
// This entry differs from drizzle-orm/libsql only in the client it would create from a URL; given
// a client (any of libsql's), it is the same drizzle. The other entry imports the full client.
import { drizzle } from 'drizzle-orm/libsql/sqlite3'
import type { LibSQLDatabase } from 'drizzle-orm/libsql/driver-core'
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
  close(): void
}

/**
 * Opens a libSQL database: a local `file:` path (WAL mode, directory created), `:memory:`,
 * or a `libsql://` / `http(s)://` server. Integers come back as bigints so nanos stay exact.
 */
export async function openDatabase(url: string, authToken?: string, busyTimeoutMs = BUSY_TIMEOUT_MS): Promise<Database> {
  const path = localPathOf(url)
  const localFile = path !== undefined
  if (localFile) prepareFile(path)
  // A local database needs only the sqlite3 client: the full entry point also loads the HTTP and
  // WebSocket clients (hrana, ~60 modules) for a server URL.
  const createClient = REMOTE.test(url) ? (await import('@libsql/client')).createClient : createLocalClient
  // `timeout` is the busy timeout for every pooled connection (a PRAGMA would reach only one).
  const client = createClient({ url, authToken, intMode: 'bigint', timeout: busyTimeoutMs })
  if (localFile) reopenAfterBusy(client)
  // WAL is stored in the file, so setting it once through any connection is enough. The first
  // statement opens the file: a failure here is the file's (not a database, no permission).
  if (url.startsWith('file:')) {
    try {
      await client.execute('PRAGMA journal_mode=WAL')
    } catch (error) {
      client.close()
      throw localFile ? new DatabaseFileError(`${path}: ${(error as Error).message}`, { cause: error }) : error
    }
  }
  const db = drizzle(client, { schema })
  return { client, db, url, close: () => client.close() }
}

/** How long a statement waits for another connection's write lock (SQLite's busy timeout). */
const BUSY_TIMEOUT_MS = 5000

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
 * A local database file that cannot be opened; the message names the path and why. The CLI
 * prints it naming DATABASE_URL (src/commands.ts failureLine).
 */
export class DatabaseFileError extends Error {}

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
  await migrate(database.db, { migrationsFolder: migrationsFolder() })
}

/** Drops credentials from a database URL before it is logged or printed. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//[redacted]@').replace(/([?&]authToken=)[^&]*/i, '$1[redacted]')
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
