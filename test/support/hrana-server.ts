import { Database, type Statement } from 'bun:sqlite'

// A libSQL server for tests: Hrana 2 over HTTP (JSON pipelines, `POST /v2/pipeline`), the protocol
// @libsql/client speaks to an `http://` URL, backed by bun:sqlite on a local file. Each stream (a
// baton) has its own connection, so transactions across requests behave as on sqld. `silence()`
// makes it accept requests and never answer them, as a server that hangs does. `loseReply()` runs a
// request (its COMMIT included) and never answers it, and `runLate()` runs one only after the
// client has given up on it: a write that commits while the client sees it fail (several may be
// held at once, each released on its own). `refuse()` answers matching requests 503 without running
// them, as a server that fails a write before it commits does.
//
// The version probe (`GET /v3-protobuf`) gets 404, so the client falls back to Hrana 2.

type Value = { type: 'null' } | { type: 'integer'; value: string } | { type: 'float'; value: number } | { type: 'text'; value: string } | { type: 'blob'; base64: string }
type Stmt = { sql?: string; sql_id?: number; args?: Value[]; named_args?: Array<{ name: string; value: Value }>; want_rows?: boolean }
type Cond = { type: 'ok' | 'error'; step: number } | { type: 'not'; cond: Cond } | { type: 'and' | 'or'; conds: Cond[] } | { type: 'is_autocommit' }
type Request =
  | { type: 'close' | 'get_autocommit' }
  | { type: 'execute'; stmt: Stmt }
  | { type: 'batch'; batch: { steps: Array<{ condition?: Cond; stmt: Stmt }> } }
  | { type: 'sequence' | 'describe'; sql?: string; sql_id?: number }
  | { type: 'store_sql'; sql_id: number; sql: string }
  | { type: 'close_sql'; sql_id: number }

class HranaStream {
  readonly sqls = new Map<number, string>()
  constructor(readonly db: Database) {}

  sqlOf(source: { sql?: string; sql_id?: number }): string {
    const sql = source.sql ?? this.sqls.get(source.sql_id!)
    if (sql === undefined) throw new Error(`SQL text ${source.sql_id} is not stored`)
    return sql
  }

  execute(stmt: Stmt) {
    const prepared: Statement = this.db.prepare(this.sqlOf(stmt))
    const args = stmt.named_args?.length ? Object.fromEntries(stmt.named_args.map(arg => [arg.name, fromValue(arg.value)])) : (stmt.args ?? []).map(fromValue)
    const names = prepared.columnNames
    const rows = names.length > 0 ? (prepared.values(...(Array.isArray(args) ? args : [args])) as unknown[][]) : (prepared.run(...(Array.isArray(args) ? args : [args])), [])
    const changes = this.db.prepare('SELECT changes(), last_insert_rowid()').values()[0] as [bigint, bigint]
    return {
      cols: names.map((name, index) => ({ name, decltype: prepared.declaredTypes[index] ?? null })),
      rows: stmt.want_rows === false ? [] : rows.map(row => row.map(toValue)),
      affected_row_count: Number(changes[0]),
      last_insert_rowid: String(changes[1]),
    }
  }

  batch(steps: Array<{ condition?: Cond; stmt: Stmt }>) {
    const results: Array<ReturnType<HranaStream['execute']> | null> = []
    const errors: Array<{ message: string } | null> = []
    const holds = (cond: Cond): boolean => {
      switch (cond.type) {
        case 'ok': return results[cond.step] != null
        case 'error': return errors[cond.step] != null
        case 'not': return !holds(cond.cond)
        case 'and': return cond.conds.every(holds)
        case 'or': return cond.conds.some(holds)
        case 'is_autocommit': return !this.db.inTransaction
      }
    }
    for (const step of steps) {
      if (step.condition && !holds(step.condition)) {
        results.push(null)
        errors.push(null)
        continue
      }
      try {
        results.push(this.execute(step.stmt))
        errors.push(null)
      } catch (error) {
        results.push(null)
        errors.push({ message: String((error as Error).message) })
      }
    }
    return { step_results: results, step_errors: errors }
  }

  handle(request: Request): object {
    switch (request.type) {
      case 'execute': return { type: 'execute', result: this.execute(request.stmt) }
      case 'batch': return { type: 'batch', result: this.batch(request.batch.steps) }
      case 'sequence': this.db.run(this.sqlOf(request)); return { type: 'sequence' }
      case 'store_sql': this.sqls.set(request.sql_id, request.sql); return { type: 'store_sql' }
      case 'close_sql': this.sqls.delete(request.sql_id); return { type: 'close_sql' }
      case 'get_autocommit': return { type: 'get_autocommit', is_autocommit: !this.db.inTransaction }
      case 'close': return { type: 'close' }
      default: throw new Error(`unsupported request ${(request as { type: string }).type}`)
    }
  }
}

function fromValue(value: Value): unknown {
  switch (value.type) {
    case 'null': return null
    case 'integer': return BigInt(value.value)
    case 'float': return value.value
    case 'text': return value.value
    case 'blob': return Buffer.from(value.base64, 'base64')
  }
}

function toValue(value: unknown): Value {
  if (value === null || value === undefined) return { type: 'null' }
  if (typeof value === 'bigint') return { type: 'integer', value: String(value) }
  if (typeof value === 'number') return Number.isInteger(value) ? { type: 'integer', value: String(value) } : { type: 'float', value }
  if (typeof value === 'string') return { type: 'text', value }
  return { type: 'blob', base64: Buffer.from(value as Uint8Array).toString('base64') }
}

/** A Hrana 2 server on `path` (a SQLite file), listening on a free port. */
export function hranaServer(path: string) {
  const streams = new Map<string, HranaStream>()
  let batons = 0
  let silent = false
  // The next request whose JSON body matches: run and never answered, or held unrun until released.
  let lose: ((body: string) => boolean) | undefined
  const lates: Array<{ matches: (body: string) => boolean; released: Promise<void>; ran: () => void }> = []
  let refuse: ((body: string) => boolean) | undefined
  const open = () => {
    const db = new Database(path, { safeIntegers: true })
    db.run('PRAGMA busy_timeout = 5000')
    return new HranaStream(db)
  }
  const server = Bun.serve({
    port: 0,
    async fetch(request) {
      if (silent) return new Promise<Response>(() => {})
      const url = new URL(request.url)
      if (request.method !== 'POST' || url.pathname !== '/v2/pipeline') return new Response('not found', { status: 404 })
      const text = await request.text()
      const body = JSON.parse(text) as { baton?: string | null; requests: Request[] }
      if (refuse?.(text) === true) return Response.json({ message: 'injected: refused, nothing run' }, { status: 503 })
      const lost = lose?.(text) === true
      if (lost) lose = undefined
      const at = lates.findIndex(entry => entry.matches(text))
      const held = at >= 0 ? lates.splice(at, 1)[0] : undefined
      if (held) await held.released
      const baton = body.baton ?? undefined
      const stream = baton === undefined ? open() : streams.get(baton)
      if (stream === undefined) return Response.json({ message: 'unknown baton' }, { status: 400 })
      if (baton !== undefined) streams.delete(baton)
      let closed = false
      const results = body.requests.map(request => {
        if (request.type === 'close') closed = true
        try {
          return { type: 'ok', response: stream.handle(request) }
        } catch (error) {
          return { type: 'error', error: { message: String((error as Error).message) } }
        }
      })
      let next: string | null = null
      if (closed) stream.db.close()
      else streams.set((next = `b${++batons}`), stream)
      held?.ran()
      // The client's reply timeout ends the request; then the answer goes nowhere.
      if (lost) await new Promise(resolve => request.signal.addEventListener('abort', resolve, { once: true }))
      return Response.json({ baton: next, base_url: null, results })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    /** From now on, requests are accepted and never answered. */
    silence() {
      silent = true
    },
    /** The next request whose JSON body `matches` runs (its COMMIT included) and is never answered. */
    loseReply(matches: (body: string) => boolean) {
      lose = matches
    },
    /**
     * The next request whose JSON body `matches` is held, not run and not answered, until `release()`;
     * then it runs (its COMMIT included). `release()` resolves once it has run. Each call holds one
     * more request; a request is held by the earliest call it matches.
     */
    runLate(matches: (body: string) => boolean) {
      let release!: () => void
      let ran!: () => void
      const done = new Promise<void>(resolve => (ran = resolve))
      lates.push({ matches, released: new Promise<void>(resolve => (release = resolve)), ran })
      return {
        release() {
          release()
          return done
        },
      }
    },
    /** While set, every request whose JSON body `matches` gets a 503 and runs nothing. */
    refuse(matches: ((body: string) => boolean) | undefined) {
      refuse = matches
    },
    stop() {
      server.stop(true)
      for (const stream of streams.values()) stream.db.close()
    },
  }
}
