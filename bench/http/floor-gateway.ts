/**
 * The floor under the chat targets (bench/http/floor.ts drives it): the least a gateway on
 * this stack can do for what the target's configuration asks (auth on, rate limits on, billing
 * on a local database file, a log line per request), and nothing else. It is not the gateway:
 * one hard-coded key and model, no errors beyond 400/401/429, no fallback, no metrics, no drain.
 *
 * LEVEL (env) chooses how much of it runs:
 * - `raw`: `Bun.serve`; SHA-256 of the bearer looked up in a Map, a key and an org token bucket,
 *   `JSON.parse` of the body with a hand check, the upstream called with `stream: false`, its
 *   answer parsed, the reply built with our id and model and sent as JSON, one log line. With
 *   `stream: true` the upstream's bytes pass through, the usage read from the last chunk.
 * - `elysia`: the same inside Elysia (`aot` on, the body checked by a `t.Object` schema).
 * - `ledger`: `elysia` plus durable billing: the estimate held in memory against a lease, the
 *   charge settled before the reply through a writer that commits every settlement of an
 *   event-loop turn in one transaction (one prepared multi-row INSERT and one UPDATE), with
 *   libsql's `Database` at WAL + synchronous=NORMAL, as NativeExecutor does. Optimistic where
 *   it can be: no WAL checkpoints at all during a run (the gateway takes them off the loop).
 *
 * UPSTREAM is the upstream's origin; DB the database file (ledger); LOG the log file; KEY the bearer secret.
 * Prints `{"port": N}` once listening.
 */
import Libsql from 'libsql'
import { Elysia, t } from 'elysia'

const level = process.env.LEVEL ?? 'raw'
const upstream = `${process.env.UPSTREAM!}/v1/chat/completions`
const sha256 = (text: string) => new Bun.CryptoHasher('sha256').update(text).digest('hex')
const keys = new Map([[sha256(process.env.KEY!), { keyId: crypto.randomUUID(), orgId: crypto.randomUUID() }]])

class Bucket {
  private tokens = 1_000_000
  private at = performance.now()
  take(): boolean {
    const now = performance.now()
    this.tokens = Math.min(1_000_000, this.tokens + ((now - this.at) / 1000) * 1_000_000)
    this.at = now
    if (this.tokens < 1) return false
    this.tokens -= 1
    return true
  }
}
const buckets = { key: new Bucket(), org: new Bucket() }

// Log lines go to a file in batches of 5 ms, as the gateway's do (its stdout is a file in the bench).
const logFile = Bun.file(process.env.LOG!).writer()
let pending: string[] = []
function log(line: string): void {
  if (pending.length === 0) setTimeout(() => (logFile.write(pending.join('')), logFile.flush(), (pending = [])), 5)
  pending.push(line)
}

/** Durable settlement: one transaction per event-loop turn for every settlement queued in it. */
class Writer {
  private readonly db = new Libsql(process.env.DB!)
  private readonly inserts = new Map<number, Libsql.Statement<unknown[]>>()
  private readonly lease: Libsql.Statement<unknown[]>
  private queue: Array<{ args: unknown[]; amount: number; done: () => void }> = []
  leased = 1e15

  constructor() {
    this.db.exec('PRAGMA journal_mode=WAL')
    this.db.exec('PRAGMA synchronous=NORMAL')
    this.db.exec('PRAGMA wal_autocheckpoint=0')
    this.db.exec(`CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY, op_id TEXT NOT NULL, org_id TEXT NOT NULL, key_id TEXT, source TEXT NOT NULL,
      amount INTEGER NOT NULL, period INTEGER, purpose TEXT, request_id TEXT, created_at INTEGER NOT NULL)`)
    this.db.exec('CREATE INDEX IF NOT EXISTS entries_org ON entries (org_id, source)')
    this.db.exec('CREATE TABLE IF NOT EXISTS leases (org_id TEXT PRIMARY KEY, leased INTEGER NOT NULL)')
    this.db.prepare('INSERT OR IGNORE INTO leases VALUES (?, 0)').run([...keys.values()][0]!.orgId)
    this.lease = this.db.prepare('UPDATE leases SET leased = leased - ? WHERE org_id = ?')
  }

  settle(principal: { keyId: string; orgId: string }, amount: number, requestId: string): Promise<void> {
    const { promise, resolve } = Promise.withResolvers<void>()
    if (this.queue.length === 0) setImmediate(() => this.flush())
    this.queue.push({ args: [Bun.randomUUIDv7(), principal.orgId, principal.keyId, 'top_up', amount, null, 'chat', requestId, Date.now()], amount, done: resolve })
    return promise
  }

  private flush(): void {
    const batch = this.queue
    this.queue = []
    let insert = this.inserts.get(batch.length)
    if (insert === undefined) {
      insert = this.db.prepare(`INSERT INTO entries (op_id, org_id, key_id, source, amount, period, purpose, request_id, created_at) VALUES ${Array(batch.length).fill('(?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`)
      this.inserts.set(batch.length, insert)
    }
    let total = 0
    this.db.exec('BEGIN IMMEDIATE')
    insert.run(batch.flatMap(item => ((total += item.amount), item.args)))
    this.lease.run(total, batch[0]!.args[1])
    this.db.exec('COMMIT')
    for (const item of batch) item.done()
  }
}
const writer = level === 'ledger' ? new Writer() : undefined

type Body = { model: string; messages: Array<{ role: string; content: string }>; max_tokens?: number; stream?: boolean }
type Principal = { keyId: string; orgId: string }
type Usage = { prompt_tokens: number; completion_tokens: number }
const fail = (status: number, message: string) => Response.json({ error: { message } }, { status })
// Held in memory against the lease (a reservation) until the charge is known.
const ESTIMATE = 1_000_000

async function chat(request: Request, body: Body): Promise<Response> {
  const started = performance.now()
  const principal = keys.get(sha256((request.headers.get('authorization') ?? '').slice(7)))
  if (principal === undefined) return fail(401, 'invalid key')
  if (!buckets.key.take() || !buckets.org.take()) return fail(429, 'rate limited')
  if (body.model !== 'bench-instant') return fail(400, 'unknown model')
  const requestId = `req_${Bun.randomUUIDv7()}`
  if (writer !== undefined) writer.leased -= ESTIMATE
  const stream = body.stream === true
  const answer = await fetch(upstream, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model: 'bench-upstream', messages: body.messages, max_tokens: body.max_tokens ?? 4096, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) }),
  })
  return stream ? streamed(answer, principal, requestId, started) : collected(answer, principal, requestId, started)
}

/** Settles the charge (durable before it resolves) and writes the request's log line. */
async function settle(principal: Principal, requestId: string, usage: Usage, started: number): Promise<void> {
  const charged = usage.prompt_tokens * 100 + usage.completion_tokens * 400
  if (writer !== undefined) {
    writer.leased += ESTIMATE
    await writer.settle(principal, charged, requestId)
  }
  log(`{"time":"${new Date().toISOString()}","level":"info","msg":"request","request_id":"${requestId}","org_id":"${principal.orgId}","status":200,` +
    `"model":"bench-instant","input_tokens":${usage.prompt_tokens},"output_tokens":${usage.completion_tokens},"charged_nanos":"${charged}","latency_ms":${(performance.now() - started).toFixed(2)}}\n`)
}

/**
 * The upstream's bytes passed through as they come, except the latest network chunk, which is held
 * back: the terminal frames (usage, `[DONE]`) are in the last one, and it leaves only once the
 * charge read from it is settled. (A usage frame split across two chunks is charged as zero here.)
 */
function streamed(answer: Response, principal: Principal, requestId: string, started: number): Response {
  const reader = answer.body!.getReader()
  let held: Uint8Array | undefined
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
        const previous = held
        held = chunk.value
        if (previous !== undefined) return controller.enqueue(previous)
      }
      const usage = /"prompt_tokens":(\d+),"completion_tokens":(\d+)/.exec(held ? new TextDecoder().decode(held) : '')
      await settle(principal, requestId, { prompt_tokens: Number(usage?.[1] ?? 0), completion_tokens: Number(usage?.[2] ?? 0) }, started)
      if (held !== undefined) controller.enqueue(held)
      controller.close()
    },
  })
  return new Response(body, { headers: { 'content-type': 'text/event-stream', 'x-request-id': requestId, 'x-ratelimit-remaining-requests': '999999' } })
}

async function collected(answer: Response, principal: Principal, requestId: string, started: number): Promise<Response> {
  const completion = (await answer.json()) as { choices: Array<{ message: { content: string }; finish_reason: string }>; usage: Usage }
  const usage = completion.usage
  await settle(principal, requestId, usage, started)
  const choice = completion.choices[0]!
  return Response.json(
    {
      id: `chatcmpl-${Bun.randomUUIDv7('base64url')}`, object: 'chat.completion', created: Math.floor(Date.now() / 1000), model: 'bench-instant',
      choices: [{ index: 0, message: { role: 'assistant', content: choice.message.content }, finish_reason: choice.finish_reason }],
      usage: { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    },
    { headers: { 'x-request-id': requestId, 'x-ratelimit-remaining-requests': '999999' } },
  )
}

function listening(port: number | undefined): void {
  console.log(JSON.stringify({ port }))
}

if (level === 'raw') {
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      let body: Body
      try {
        body = (await request.json()) as Body
      } catch {
        return fail(400, 'body is not JSON')
      }
      if (typeof body?.model !== 'string' || !Array.isArray(body.messages) || body.messages.some(m => typeof m?.role !== 'string' || typeof m.content !== 'string')) return fail(400, 'invalid body')
      return chat(request, body)
    },
  })
  listening(server.port)
} else {
  const Message = t.Object({ role: t.String(), content: t.String() })
  const app = new Elysia().post('/v1/chat/completions', ({ request, body }) => chat(request, body), {
    body: t.Object({
      model: t.String(),
      messages: t.Array(Message),
      max_tokens: t.Optional(t.Integer({ minimum: 1 })),
      stream: t.Optional(t.Boolean()),
      stream_options: t.Optional(t.Object({ include_usage: t.Optional(t.Boolean()) })),
    }),
  })
  app.listen({ port: 0, hostname: '127.0.0.1' })
  listening(app.server?.port)
}
