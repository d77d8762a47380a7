import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { readFileSync, writeFileSync } from 'node:fs'
import { verifyLedger } from '../../src/billing/verify'
import { chunk, DONE, frame, openAIUsage } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { type GatewayProcess, gatewayWorkspace, type GatewayWorkspace, openDeps, seedOrg, startGateway } from '../support/gateway-process'
import { poll } from '../support/poll'

// Graceful shutdown (issue 12 point 2, ARCHITECTURE.md §7.5), against the real `svc serve`
// process: on SIGTERM /readyz turns unready at once, the listener closes, a stream that ends
// within the deadline ends normally and is billed; past the deadline a stream ends with an
// in-band `unavailable` error (its produced output billed) and a collected answer gets 503
// (nothing billed); then the writer flushes, leases go back, and the process exits 0.

const CREDIT = 10_000_000_000n
const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b

let workspace: GatewayWorkspace
let env: Record<string, string>
let upstream: FakeUpstream
const gates: Array<() => void> = []
const children: GatewayProcess[] = []

beforeEach(async () => {
  upstream = await FakeUpstream.start()
  workspace = gatewayWorkspace('svc-shutdown-', `
providers: [{ id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none, idle_timeout_ms: 60000 }]
models: [{ id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 8192, max_output_tokens: 256 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
metrics: { port: 0 }
shutdown: { drain_timeout_s: 1.5 }
`, { SVC_INSTANCE_ID: 'gw-1' })
  env = workspace.env
})

afterEach(async () => {
  for (const open of gates.splice(0)) open()
  for (const child of children.splice(0)) child.process.kill('SIGKILL')
  await upstream.close()
  workspace.remove()
})

function gate() {
  let open!: () => void
  const promise = new Promise<void>(resolve => (open = resolve))
  gates.push(open)
  return { promise, open }
}

/** Reads an SSE body until `until` appears in the text; returns the reader and the text so far. */
async function readUntil(response: Response, until: string) {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ''
  while (!text.includes(until)) {
    const { value, done } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
  }
  const rest = async () => {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) return text
      text += decoder.decode(value, { stream: true })
    }
  }
  return { text, rest }
}

describe('graceful shutdown', () => {
  test('SIGTERM: unready at once, finish within the deadline, cut the rest in-band, settle, flush, exit 0', async () => {
    const org = await seedOrg(env, CREDIT)
    const gateway = await startGateway(env)
    children.push(gateway)
    const post = (body: object, requestId: string) =>
      fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.key}`, 'content-type': 'application/json', 'x-request-id': requestId },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello' }], ...body }),
      })

    const finishA = gate()
    const usageA = { inputTokens: 11, outputTokens: 22 }
    upstream.enqueue(
      { kind: 'sse', body: [chunk({ role: 'assistant', content: 'Alpha ' }), finishA.promise, chunk({}, 'stop'), frame({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm1', choices: [], usage: openAIUsage(usageA) }), DONE] },
      { kind: 'sse', body: [chunk({ role: 'assistant', content: 'Beta words ' }), gate().promise] },
      { kind: 'sse', body: [chunk({ role: 'assistant', content: 'Gamma ' }), gate().promise] },
    )
    const a = await readUntil(await post({ stream: true }, 'req-a'), 'Alpha')
    await upstream.request(0)
    const b = await readUntil(await post({ stream: true }, 'req-b'), 'Beta')
    const c = post({ stream: false }, 'req-c')
    await upstream.request(2)

    gateway.process.kill('SIGTERM')
    const admin = `http://127.0.0.1:${gateway.adminPort}`
    const ready = await poll('readyz to turn unready', 200, 5, async () => {
      const response = await fetch(`${admin}/readyz`)
      return response.status === 503 ? response.json() : undefined
    })
    expect(ready).toEqual({ status: 'draining', database: 'ok' })
    // The listener is closed: a new connection is refused.
    expect(await fetch(`${gateway.url}/healthz`).then(() => 'accepted', () => 'refused')).toBe('refused')

    // A finishes within the deadline: normal end, billed its usage.
    finishA.open()
    const textA = await a.rest()
    expect(textA).toContain('"finish_reason":"stop"')
    expect(textA.trim().endsWith('data: [DONE]')).toBe(true)
    // B and C outlive the deadline: B ends with an in-band unavailable error, C gets 503.
    const textB = await b.rest()
    expect(textB).toContain('Beta words')
    expect(textB).toContain('"code":"unavailable"')
    expect(textB).not.toContain('finish_reason":"stop"')
    const responseC = await c
    expect(responseC.status).toBe(503)
    expect(((await responseC.json()) as any).error.code).toBe('unavailable')

    expect(await gateway.exited).toBe(0)
    expect(gateway.logs('shutting down')).toHaveLength(1)
    expect(gateway.logs('stopped')[0]).toMatchObject({ exit_code: 0 })
    // Every upstream connection was closed.
    for (let index = 0; index < 3; index++) expect(upstream.requests[index]!.isDisconnected() || index === 0).toBe(true)

    const deps = await openDeps(env)
    try {
      expect(await verifyLedger(deps.database.client, { nowMs: Date.now(), staleAfterMs: 30_000 })).toEqual([])
      const rows = (await deps.database.client.execute("SELECT request_id, SUM(amount_nanos) AS nanos, COUNT(*) AS n FROM ledger_entries WHERE kind = 'settle' GROUP BY request_id")).rows
      const byRequest = new Map(rows.map(row => [String(row.request_id), { nanos: BigInt(row.nanos as bigint), n: Number(row.n) }]))
      expect(byRequest.get('req-a')).toEqual({ nanos: ceilDiv(11n * 1_000_000_000n, 1_000_000n) + ceilDiv(22n * 2_000_000_000n, 1_000_000n), n: 1 })
      expect(byRequest.get('req-b')?.n).toBe(1)
      expect(byRequest.get('req-b')!.nanos).toBeGreaterThan(0n)
      expect(byRequest.has('req-c')).toBe(false)
      // This boot's leases were handed back: nothing of the org's money is still leased.
      const leased = (await deps.database.client.execute('SELECT COALESCE(SUM(amount_nanos), 0) AS n FROM leases')).rows[0]!.n
      expect(BigInt(leased as bigint)).toBe(0n)
      const balance = await deps.balance(org.orgId)
      expect(balance.prepaidNanos).toBe(CREDIT - byRequest.get('req-a')!.nanos - byRequest.get('req-b')!.nanos)
    } finally {
      await deps.close()
    }
  }, 30_000)

  test('a second signal cuts at once: the stream ends in-band, its output is billed, exit 0', async () => {
    writeFileSync(env.SVC_CONFIG!, readFileSync(env.SVC_CONFIG!, 'utf8').replace('drain_timeout_s: 1.5', 'drain_timeout_s: 600'))
    const org = await seedOrg(env, CREDIT)
    const gateway = await startGateway(env)
    children.push(gateway)
    upstream.enqueue({ kind: 'sse', body: [chunk({ role: 'assistant', content: 'Endless ' }), gate().promise] })
    const response = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.key}`, 'content-type': 'application/json', 'x-request-id': 'req-endless' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'go on forever' }] }),
    })
    const stream = await readUntil(response, 'Endless')
    gateway.process.kill('SIGINT')
    await poll('the drain to start', 200, 5, () => (gateway.logs('shutting down').length > 0 ? true : undefined))
    const started = performance.now()
    gateway.process.kill('SIGINT')
    const text = await stream.rest()
    expect(performance.now() - started).toBeLessThan(5000) // not the 600 s deadline
    expect(text).toContain('"code":"unavailable"')
    expect(await gateway.exited).toBe(0)
    const deps = await openDeps(env)
    try {
      const billed = (await deps.database.client.execute("SELECT COUNT(*) AS n FROM ledger_entries WHERE request_id = 'req-endless'")).rows[0]!.n
      expect(billed).toBe(1n)
      expect(await verifyLedger(deps.database.client, { nowMs: Date.now(), staleAfterMs: 30_000 })).toEqual([])
    } finally {
      await deps.close()
    }
  }, 20_000)

  test('a collected answer whose client leaves during the drain is released and logged, its lease returned, before the exit', async () => {
    // Before: the responses had all ended (the client left), so the exit did not wait for the
    // call itself, which ends on the lifecycle's next tick: its hold kept the lease out (QA).
    const { orgId, key } = await seedOrg(env, CREDIT)
    const gateway = await startGateway(env)
    children.push(gateway)
    upstream.enqueue({ kind: 'stall' })
    const client = new AbortController()
    const answer = fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      signal: client.signal,
    }).catch(() => 'aborted')
    await upstream.request(0)
    gateway.process.kill('SIGTERM')
    await poll('the drain to begin', 50, 100, () => (gateway.logs('shutting down').length > 0 ? true : undefined))
    client.abort()
    expect(await answer).toBe('aborted')
    expect(await gateway.exited).toBe(0)
    expect(gateway.logs('request').some(line => line.route === '/v1/chat/completions')).toBe(true)
    const deps = await openDeps(env)
    try {
      expect(await deps.database.client.execute('SELECT COUNT(*) AS n FROM leases').then(result => Number(result.rows[0]!.n))).toBe(0)
      expect((await deps.balance(orgId)).availableNanos).toBe(CREDIT)
    } finally {
      await deps.close()
    }
  }, 20_000)

  test('SIGINT on an idle gateway: exits 0 promptly', async () => {
    await seedOrg(env, CREDIT)
    const gateway = await startGateway(env)
    children.push(gateway)
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200)
    gateway.process.kill('SIGINT')
    expect(await gateway.exited).toBe(0)
    expect(gateway.logs('stopped')[0]).toMatchObject({ signal: 'SIGINT', exit_code: 0 })
  }, 20_000)
})
