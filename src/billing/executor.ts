import type { Client, InValue } from '@libsql/client'
import Libsql from 'libsql'

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
  write(statements: readonly Statement[]): Promise<StatementResult[]>
  close(): void
}

/**
 * Local database files: the `libsql` engine's Database directly (the same native library
 * @libsql/client runs on, so one SQLite per process), with each distinct SQL text prepared
 * once and reused. @libsql/client prepares every statement on every call (~120 µs each), which
 * is what made per-request durable writes too slow (ARCHITECTURE.md §7.2).
 */
export class NativeExecutor implements BatchExecutor {
  private readonly database: Libsql.Database
  private readonly prepared = new Map<string, Libsql.Statement<unknown[]>>()
  private readonly begin: Libsql.Statement<unknown[]>
  private readonly commit: Libsql.Statement<unknown[]>
  private readonly rollback: Libsql.Statement<unknown[]>

  constructor(path: string) {
    // A busy timeout lets processes sharing one file queue for the write lock.
    this.database = new Libsql(path, { timeout: 5000 })
    this.database.defaultSafeIntegers(true)
    this.database.exec('PRAGMA journal_mode=WAL')
    // WAL + NORMAL: a commit survives a process kill; an OS crash may lose the last commits.
    this.database.exec('PRAGMA synchronous=NORMAL')
    this.begin = this.database.prepare('BEGIN IMMEDIATE')
    this.commit = this.database.prepare('COMMIT')
    this.rollback = this.database.prepare('ROLLBACK')
  }

  async write(statements: readonly Statement[]): Promise<StatementResult[]> {
    const results: StatementResult[] = []
    this.begin.run()
    try {
      for (const statement of statements) {
        const prepared = this.statement(statement.sql)
        if (prepared.reader) results.push({ changes: 0, rows: prepared.all(...statement.args) as Array<Record<string, unknown>> })
        else results.push({ changes: prepared.run(...statement.args).changes, rows: [] })
      }
      this.commit.run()
    } catch (error) {
      if (this.database.inTransaction) this.rollback.run()
      throw error
    }
    return results
  }

  close(): void {
    this.database.close()
  }

  private statement(sql: string): Libsql.Statement<unknown[]> {
    let prepared = this.prepared.get(sql)
    if (prepared === undefined) {
      prepared = this.database.prepare(sql)
      this.prepared.set(sql, prepared)
    }
    return prepared
  }
}

/**
 * Remote libSQL servers (where the cost moves to the server) and `:memory:` databases (which
 * exist only on the client's single connection): @libsql/client's atomic write batch.
 */
export class ClientExecutor implements BatchExecutor {
  constructor(private readonly client: Client) {}

  async write(statements: readonly Statement[]): Promise<StatementResult[]> {
    const results = await this.client.batch(
      statements.map(statement => ({ sql: statement.sql, args: [...statement.args] })),
      'write',
    )
    return results.map(result => ({ changes: result.rowsAffected, rows: result.rows as unknown as Array<Record<string, unknown>> }))
  }

  close(): void {}
}

/** The local file path of a `file:` URL, or undefined for `:memory:` and remote URLs. */
export function localPathOf(url: string): string | undefined {
  if (!url.startsWith('file:')) return undefined
  const path = url.startsWith('file://') ? decodeURIComponent(new URL(url).pathname) : url.slice('file:'.length).split('?')[0]!
  return path === '' || path === ':memory:' ? undefined : path
}

/** Picks the executor for a database URL. */
export function createExecutor(url: string, client: Client): BatchExecutor {
  const path = localPathOf(url)
  return path === undefined ? new ClientExecutor(client) : new NativeExecutor(path)
}
