import { afterEach, describe, expect, test } from 'bun:test'
import { createApp } from '../../src/app'
import { loadConfig } from '../../src/config/load'
import { migrateDatabase, openDatabase } from '../../src/db/client'
import { createDeps, type DepsOverrides } from '../../src/deps'
import { WorkerExtractorPool } from '../../src/documents/pool'
import { startAdminServer } from '../../src/observability/admin-server'
import { createLogger } from '../../src/observability/logger'
import { FakeClock } from '../support/fake-clock'
import { FakeUpstream } from '../support/fake-upstream'
import { poll } from '../support/poll'
import { buildTestApp, json, seedAdminOrg } from '../support/harness'

// /metrics (Prometheus text, token or admin port), the one log line per request, and the
// request id forwarded upstream.

const TOKEN = 'metrics-token-0123456789abcdef'
const PROMPT = 'a secret prompt that must never be logged'

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A gateway whose log lines are captured, with the given YAML config and env. */
async function gateway(yaml: string, env: Record<string, string> = {}, overrides: DepsOverrides = {}) {
  const lines: string[] = []
  const fullEnv = { SVC_CONFIG: '/virtual/config.yaml', ...env }
  const database = await openDatabase(':memory:')
  await migrateDatabase(database)
  const clock = new FakeClock()
  const deps = await createDeps(loadConfig(fullEnv, () => yaml), { ...overrides, clock, database, logger: createLogger('info', line => lines.push(line)) })
  await deps.sweeper.start()
  cleanups.push(() => deps.close())
  const app = createApp(deps)
  const { orgId, adminKey: secret } = await seedAdminOrg(deps, 'acme', 10_000_000_000n)
  const request = (method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}) =>
    app.handle(
      new Request(`http://localhost${path}`, {
        method,
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...options.headers },
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
      }),
    )
  const logs = () => lines.map(line => JSON.parse(line) as Record<string, unknown>)
  return { deps, app, request, lines, logs, secret, orgId }
}

const DEMO_BASE = `
providers: [{ id: demo, type: demo, retention: none }]
models: [{ id: demo-anonymous, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "0.10", output_per_mtok: "0.40" }, context_length: 32768, max_output_tokens: 4096 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
`
const DEMO = `${DEMO_BASE}metrics: { token_env: SVC_METRICS_TOKEN }\n`

/** The value of one series in a Prometheus text body, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find(candidate => candidate.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

describe('/metrics', () => {
  test('off unless configured: 404', async () => {
    const t = await buildTestApp()
    const off = await t.request('GET', '/metrics')
    expect(off.status).toBe(404)
    expect((await json(off)).error.message).toBe('metrics are not served on this port (configure metrics.token_env, or metrics.port for an admin port)')
    await t.close()
  })

  test('a metrics token is required when configured; the text counts requests, tokens, nanos, ledger batches and refusals', async () => {
    const g = await gateway(DEMO, { SVC_METRICS_TOKEN: TOKEN })
    expect((await g.request('GET', '/metrics', { headers: { authorization: '' } })).status).toBe(401)
    expect((await g.request('GET', '/metrics')).status).toBe(401) // an API key is not the metrics token
    expect((await g.request('GET', '/metrics', { headers: { authorization: `Bearer ${TOKEN}x` } })).status).toBe(401)

    const chat = await g.request('POST', '/v1/chat/completions', { body: { model: 'demo-anonymous', messages: [{ role: 'user', content: PROMPT }] } })
    expect(chat.status).toBe(200)
    const usage = (await json(chat)).usage
    const streamed = await g.request('POST', '/v1/chat/completions', { body: { model: 'demo-anonymous', stream: true, messages: [{ role: 'user', content: 'hi' }] } })
    expect(await streamed.text()).toContain('[DONE]')
    expect((await g.request('POST', '/v1/chat/completions', { body: { model: 'nope', messages: [] } })).status).toBe(400)
    expect((await g.request('GET', '/no/such/path')).status).toBe(404)

    const response = await g.request('GET', '/metrics', { headers: { authorization: `Bearer ${TOKEN}` } })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toContain('text/plain; version=0.0.4')
    const text = await response.text()
    expect(sample(text, 'svc_http_requests_total{route="/v1/chat/completions",method="POST",status="200"}')).toBe(2)
    expect(sample(text, 'svc_http_requests_total{route="/v1/chat/completions",method="POST",status="400"}')).toBe(1)
    expect(sample(text, 'svc_http_requests_total{route="unmatched",method="GET",status="404"}')).toBe(1)
    expect(sample(text, 'svc_http_requests_total{route="/metrics",method="GET",status="401"}')).toBe(3)
    expect(sample(text, 'svc_http_request_duration_seconds_count{route="/v1/chat/completions"}')).toBe(3)
    expect(sample(text, 'svc_upstream_requests_total{provider="demo:demo",outcome="ok"}') ?? sample(text, 'svc_upstream_requests_total{provider="demo",outcome="ok"}')).toBe(2)
    expect(sample(text, 'svc_tokens_total{model="demo-anonymous",direction="input"}')).toBeGreaterThanOrEqual(usage.prompt_tokens)
    expect(sample(text, 'svc_billed_nanos_total{model="demo-anonymous",purpose="chat"}')).toBeGreaterThan(0)
    expect(sample(text, 'svc_ledger_commit_seconds_count')).toBeGreaterThan(0)
    expect(sample(text, 'svc_ledger_queue_depth')).toBe(0)
    expect(sample(text, 'svc_open_streams')).toBe(0)
    expect(sample(text, 'svc_draining')).toBe(0)
    // The extractor pool starts its workers on first use: nothing running yet.
    expect(sample(text, 'svc_extractor_workers')).toBe(0)
    expect(sample(text, 'svc_extractor_busy')).toBe(0)
    expect(sample(text, 'svc_extractor_queued')).toBe(0)
    // Nothing in the metrics is a credential or content.
    expect(text).not.toContain(g.secret)
    expect(text).not.toContain(PROMPT)
  })

  test('refusals are counted by code; the extractor pool reports its workers, busy and queued jobs', async () => {
    // A real pool of one worker running the scripted stand-in (its job bytes are commands).
    const extractor = new WorkerExtractorPool({
      size: 1, queueSize: 4, timeoutMs: 60_000, memoryBudgetBytes: Number.MAX_SAFE_INTEGER, workerUrl: new URL('../documents/scripted.worker.ts', import.meta.url).href,
      limits: { maxTextBytes: 1024, zip: { maxEntries: 10, maxInflatedBytes: 1024, maxRatio: 10 }, pdf: { maxPages: 1, maxObjects: 10, maxNesting: 10 } },
    })
    const g = await gateway(`${DEMO}\nlimits: { inference: { key: { burst: 1, per_second: 0.001 }, org: { burst: 100, per_second: 1 } } }`, { SVC_METRICS_TOKEN: TOKEN }, { extractor })
    const body = { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] }
    expect((await g.request('POST', '/v1/chat/completions', { body })).status).toBe(200)
    expect((await g.request('POST', '/v1/chat/completions', { body })).status).toBe(429)
    const scrape = async () => (await g.request('GET', '/metrics', { headers: { authorization: `Bearer ${TOKEN}` } })).text()
    expect(sample(await scrape(), 'svc_refusals_total{code="rate_limited"}')).toBe(1)

    // One job hangs on the only worker; two more wait in the queue.
    const job = (command: string) => extractor.extract({ bytes: new TextEncoder().encode(command) }).then(() => 'done', () => 'failed')
    const jobs = [job('hang'), job('echo:a'), job('echo:b')]
    await poll('the worker to take the hanging job', 400, 10, () => (extractor.stats().busy === 1 ? true : undefined))
    const text = await scrape()
    expect(sample(text, 'svc_extractor_workers')).toBe(1)
    expect(sample(text, 'svc_extractor_busy')).toBe(1)
    expect(sample(text, 'svc_extractor_queued')).toBe(2)
    expect(text).toContain('# TYPE svc_extractor_queued gauge')
    // Closing the pool ends every job (the queued ones are refused, the hung worker is terminated).
    await extractor.close()
    expect(await Promise.all(jobs)).toEqual(['failed', 'failed', 'failed'])
    const after = await scrape()
    expect(sample(after, 'svc_extractor_busy')).toBe(0)
    expect(sample(after, 'svc_extractor_queued')).toBe(0)
  })

  test('with an admin port, /metrics is served there (token still checked) and not on the public app', async () => {
    const g = await gateway(`${DEMO_BASE}metrics: { token_env: SVC_METRICS_TOKEN, port: 0 }`, { SVC_METRICS_TOKEN: TOKEN })
    expect(g.deps.config.metrics.port).toBe(0)
    const elsewhere = await g.request('GET', '/metrics', { headers: { authorization: `Bearer ${TOKEN}` } })
    expect(elsewhere.status).toBe(404)
    expect((await json(elsewhere)).error.message).toBe('metrics are not served on this port (they are served on the admin port (metrics.port))')
    const admin = startAdminServer(g.deps, 0, '127.0.0.1')
    cleanups.push(() => admin.stop(true))
    // A port already taken: the failure names the setting.
    expect(() => startAdminServer(g.deps, admin.port!, '127.0.0.1')).toThrow(`cannot serve the admin port (metrics.port ${admin.port} on metrics.host 127.0.0.1)`)
    // A host name that does not resolve is pointed at (QA: Bun's words alone were "ENOENT: no such file or directory").
    expect(() => startAdminServer(g.deps, 0, 'no.such.host.invalid')).toThrow('(is "no.such.host.invalid" a name that resolves to an address of this machine?)')
    const base = `http://127.0.0.1:${admin.port}`
    expect((await fetch(`${base}/metrics`)).status).toBe(401)
    const scraped = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
    expect(scraped.status).toBe(200)
    expect(await scraped.text()).toContain('# TYPE svc_http_requests_total counter')
    expect(await (await fetch(`${base}/readyz`)).json()).toEqual({ status: 'ready', database: 'ok' })
    expect((await fetch(`${base}/v1/models`)).status).toBe(404)
    // A known path with another method is 405 naming what it takes.
    const posted = await fetch(`${base}/metrics`, { method: 'POST' })
    expect([posted.status, posted.headers.get('allow'), ((await posted.json()) as { error: { code: string } }).error.code]).toEqual([405, 'GET, HEAD', 'method_not_allowed'])
    // Every answer carries its request id (the client's when well-formed), as the public port's do.
    for (const path of ['/healthz', '/readyz', '/metrics', '/nope']) {
      const response = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${TOKEN}`, 'x-request-id': `probe-${path.length}` } })
      expect([path, response.headers.get('x-request-id')]).toEqual([path, `probe-${path.length}`])
    }
  })
})

describe('request log', () => {
  test('one JSON line per request, with ids, route, model, backend, usage and charge; never the key or the prompt', async () => {
    const g = await gateway(DEMO, { SVC_METRICS_TOKEN: TOKEN })
    const plain = await g.request('POST', '/v1/chat/completions', { body: { model: 'demo-anonymous', messages: [{ role: 'user', content: PROMPT }] }, headers: { 'x-request-id': 'req-plain-1' } })
    const { usage } = await json(plain)
    const streamed = await g.request('POST', '/v1/chat/completions', {
      body: { model: 'demo-anonymous', stream: true, messages: [{ role: 'user', content: PROMPT }] },
      headers: { 'x-request-id': 'req-stream-1' },
    })
    // The streamed request's line is written when its stream ends, by the time its last frame is
    // out (the demo's answer is at hand at once: stream-response.ts sends it whole, or at once with
    // the terminal frames after the settlement when nothing else is in flight).
    await streamed.text()
    expect(g.logs().filter(line => line.request_id === 'req-stream-1')).toHaveLength(1)
    await g.request('GET', '/api/v1/billing/balance', { headers: { 'x-request-id': 'req-balance-1' } })

    const lines = g.logs().filter(line => line.msg === 'request')
    expect(lines.map(line => line.request_id)).toEqual(['req-plain-1', 'req-stream-1', 'req-balance-1'])
    const [first, second, third] = lines
    expect(first).toMatchObject({
      level: 'info', org_id: g.orgId, route: '/v1/chat/completions', method: 'POST', status: 200, model: 'demo-anonymous', outcome: 'ok',
      stream: false, input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens,
    })
    expect(first!.backend).toMatch(/^demo/)
    expect(BigInt(first!.charged_nanos as string)).toBeGreaterThan(0n)
    expect(typeof first!.key_id).toBe('string')
    expect(typeof first!.latency_ms).toBe('number')
    expect(second).toMatchObject({ status: 200, stream: true, outcome: 'finished' })
    expect(BigInt(second!.charged_nanos as string)).toBeGreaterThan(0n)
    expect(third).toMatchObject({ route: '/api/v1/billing/balance', method: 'GET', status: 200, org_id: g.orgId })
    const all = g.lines.join('')
    expect(all).not.toContain(g.secret)
    expect(all).not.toContain(PROMPT)
    expect(all).not.toContain('Hello') // no output text either
  })
})

describe('request log of a reply that streams', () => {
  test("its line is written when the stream ends, not when the reply's headers left", async () => {
    const upstream = await FakeUpstream.start()
    cleanups.push(() => upstream.close())
    const g = await gateway(`
providers: [{ id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }]
models: [{ id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 4096, max_output_tokens: 64 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }`, { UP_KEY: 'sk-upstream-key-123456' })
    let open: (value?: unknown) => void = () => {}
    const gate = new Promise(resolve => (open = resolve))
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm1', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
    upstream.enqueue({
      kind: 'sse',
      body: [chunk({ role: 'assistant', content: 'Hel' }), gate, chunk({ content: 'lo' }), chunk({}, 'stop'), 'data: [DONE]\n\n'],
    })
    const streamed = await g.request('POST', '/v1/chat/completions', {
      body: { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] },
      headers: { 'x-request-id': 'req-streaming-1' },
    })
    expect(streamed.status).toBe(200)
    expect(g.logs().filter(line => line.request_id === 'req-streaming-1')).toHaveLength(0)
    open()
    expect(await streamed.text()).toContain('data: [DONE]')
    const lines = g.logs().filter(line => line.request_id === 'req-streaming-1')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ status: 200, stream: true, outcome: 'finished' })
  })
})

describe('an answer that came whole', () => {
  test('is settled before it leaves while another call is in flight, and leaves before its settlement when the gateway is idle', async () => {
    const upstream = await FakeUpstream.start()
    cleanups.push(() => upstream.close())
    const g = await gateway(`
plans: { payg: { monthly_allowance: "0", fusion: false } }
providers: [{ id: demo, type: demo, retention: none }, { id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }]
models:
  - { id: demo-anonymous, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "0.10", output_per_mtok: "0.40" }, context_length: 32768, max_output_tokens: 4096 }
  - { id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 4096, max_output_tokens: 64 }`, { UP_KEY: 'sk-upstream-key-123456' })
    const demo = (id: string) =>
      g.request('POST', '/v1/chat/completions', { body: { model: 'demo-anonymous', stream: true, messages: [{ role: 'user', content: PROMPT }] }, headers: { 'x-request-id': id } })
    const logged = (id: string) => g.logs().filter(line => line.request_id === id).length

    // Idle: the demo's answer (at hand at once) is out before the settlement, whose end writes the line.
    const idle = await demo('req-idle')
    expect(logged('req-idle')).toBe(0)
    expect(await idle.text()).toContain('data: [DONE]')
    expect(logged('req-idle')).toBe(1)

    // Another call in flight (a stream held open upstream): the answer is settled first, then sent as one body.
    let open: (value?: unknown) => void = () => {}
    const gate = new Promise(resolve => (open = resolve))
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm1', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
    upstream.enqueue({ kind: 'sse', body: [chunk({ role: 'assistant', content: 'Hel' }), gate, chunk({}, 'stop'), 'data: [DONE]\n\n'] })
    const held = await g.request('POST', '/v1/chat/completions', { body: { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] } })
    expect(g.deps.lifecycle.inFlight).toBe(1)
    const busy = await demo('req-busy')
    expect(logged('req-busy')).toBe(1)
    expect(await busy.text()).toContain('data: [DONE]')
    open()
    expect(await held.text()).toContain('data: [DONE]')
  })
})

describe('request id upstream', () => {
  test('the client request id is forwarded to the upstream as X-Request-Id (both HTTP provider types)', async () => {
    for (const type of ['openai-compatible', 'anthropic'] as const) {
      const upstream = await FakeUpstream.start()
      cleanups.push(() => upstream.close())
      const yaml = `
providers: [{ id: up, type: ${type}, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }]
models: [{ id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 4096, max_output_tokens: 64 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }`
      const g = await gateway(yaml, { UP_KEY: 'sk-upstream-key-123456' })
      upstream.enqueue({ kind: 'json', status: 500, body: { error: { message: 'boom' } } })
      const response = await g.request('POST', '/v1/chat/completions', { body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, headers: { 'x-request-id': `req-forwarded-${type}` } })
      expect(response.status).toBe(502)
      expect(upstream.onlyRequest().headers['x-request-id']).toBe(`req-forwarded-${type}`)
    }
  })
})
