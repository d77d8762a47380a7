import { afterEach, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { drizzle } from 'drizzle-orm/libsql'
import { createApp } from '../../src/app'
import { ClientExecutor, NativeExecutor } from '../../src/billing/executor'
import { verifyLedger } from '../../src/billing/verify'
import { loadConfig } from '../../src/config/load'
import { migrateDatabase, openDatabase, type Database } from '../../src/db/client'
import { schema } from '../../src/db/schema'
import { createDeps, type Deps } from '../../src/deps'
import { silentLogger } from '../../src/observability/logger'
import { chunk, DONE, frame, openAIUsage } from '../providers/openai-wire'
import { switchable } from '../support/database-outage'
import { FakeClock } from '../support/fake-clock'
import { FakeUpstream } from '../support/fake-upstream'
import { seedAdminOrg } from '../support/harness'
import { poll } from '../support/poll'

// Database outage (issue 12 point 7): with the database unreachable or read-only, billed routes
// and the balance answer 503 `unavailable` before any upstream call (never a fabricated zero,
// never inference that cannot be billed), public routes keep working, nothing is written, and
// service resumes by itself once the database is back.

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function setup() {
  const upstream = await FakeUpstream.start()
  cleanups.push(() => upstream.close())
  const yaml = `
providers: [{ id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }]
models: [{ id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 4096, max_output_tokens: 64 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
`
  const env = { SVC_CONFIG: '/virtual/outage.yaml', UP_KEY: 'sk-up-0123456789' }
  const raw = await openDatabase(':memory:')
  await migrateDatabase(raw)
  const wire = switchable(raw.client)
  const database: Database = { client: wire.client, db: drizzle(wire.client, { schema }), url: raw.url, unlimited: raw.unlimited, close: () => raw.close() }
  const clock = new FakeClock()
  const deps: Deps = await createDeps(loadConfig(env, () => yaml), { clock, database, executor: new ClientExecutor(wire.client), logger: silentLogger })
  await deps.sweeper.start()
  cleanups.push(() => deps.close().catch(() => {}))
  const app = createApp(deps)
  const { orgId, adminKey: secret } = await seedAdminOrg(deps, 'acme', 10_000_000_000n)
  const request = (method: string, path: string, body?: unknown) =>
    app.handle(
      new Request(`http://localhost${path}`, {
        method,
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    )
  const answer = () =>
    upstream.enqueue({
      kind: 'sse',
      body: chunk({ role: 'assistant', content: 'ok' }) + chunk({}, 'stop') + frame({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm1', choices: [], usage: openAIUsage({ inputTokens: 3, outputTokens: 1 }) }) + DONE,
    })
  const chat = (stream = false) => request('POST', '/v1/chat/completions', { model: 'm', stream, messages: [{ role: 'user', content: 'hi' }] })
  const entries = async () => Number((await raw.client.execute('SELECT COUNT(*) AS n FROM ledger_entries')).rows[0]!.n)
  return { deps, clock, upstream, wire, raw, request, answer, chat, entries, orgId }
}

/** Every billed and balance route answers 503 unavailable, with no upstream call and no write; public routes answer. */
async function expectOutage(s: Awaited<ReturnType<typeof setup>>) {
  const calls = s.upstream.requests.length
  for (const stream of [false, true]) {
    const response = await s.chat(stream)
    expect(response.status).toBe(503)
    expect(((await response.json()) as any).error.code).toBe('unavailable')
    expect(s.deps.ledger.health!.unavailable).toBe(true) // refused by the ledger's health, not by auth
  }
  // Once the key cache expires too, the credential cannot be read: still 503, never 401 or 500.
  s.clock.advance(2500)
  for (const stream of [false, true]) {
    const response = await s.chat(stream)
    expect(response.status).toBe(503)
    expect(((await response.json()) as any).error.code).toBe('unavailable')
  }
  const balance = await s.request('GET', '/api/v1/billing/balance')
  expect(balance.status).toBe(503)
  const body = (await balance.json()) as any
  expect(body.error.code).toBe('unavailable')
  expect(body.available_nanos).toBeUndefined() // never a fabricated zero
  expect((await s.request('POST', '/api/v1/api-keys', { name: 'during outage' })).status).toBe(503)
  expect(s.upstream.requests.length).toBe(calls) // no unbilled inference
  expect((await s.request('GET', '/v1/models')).status).toBe(200)
  expect((await s.request('GET', '/healthz')).status).toBe(200)
  expect(s.deps.limits.concurrency.size).toBe(0)
  expect(s.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)).toBe(0n)
}

describe('database outage', () => {
  test('unreachable: 503 on billed routes and balance, public routes work, recovery by itself', async () => {
    const s = await setup()
    s.answer()
    expect((await s.chat()).status).toBe(200) // warm: a lease in memory, the key cached
    const before = await s.entries()

    s.wire.set('unreachable')
    // The last write is older than the freshness window (1 s; the key is still cached, 2 s): the
    // next billed call probes the database first.
    s.clock.advance(1500)
    await expectOutage(s)
    expect((await s.request('GET', '/readyz')).status).toBe(503)
    const text = await (await s.request('GET', '/api/v1/rate-limits')).text()
    expect(text).not.toContain('internal_error')

    s.wire.set('ok')
    // Nothing to do: the probe timer finds the database again.
    await poll('service to resume', 100, 50, async () => {
      s.answer()
      const response = await s.chat()
      if (response.status === 200) return true
      return undefined
    })
    expect(await s.entries()).toBe(before + 1)
    expect((await s.request('GET', '/api/v1/billing/balance')).status).toBe(200)
    expect(await verifyLedger(s.raw.client, { nowMs: s.clock.now(), staleAfterMs: 3_600_000 })).toEqual([])
  }, 20_000)

  test('read-only: reads still work, but billed routes and balance are 503 until writes come back', async () => {
    const s = await setup()
    s.answer()
    expect((await s.chat()).status).toBe(200)
    const before = await s.entries()

    await s.raw.client.execute('PRAGMA query_only = 1')
    s.clock.advance(1500)
    await expectOutage(s)
    expect(await s.entries()).toBe(before)
    // Reads still answer, but an instance that cannot bill is not ready for billed traffic.
    const ready = await s.request('GET', '/readyz')
    expect(ready.status).toBe(503)
    expect(await ready.json()).toEqual({ status: 'unavailable', database: 'unwritable' })

    await s.raw.client.execute('PRAGMA query_only = 0')
    await poll('service to resume', 100, 50, async () => {
      s.answer()
      return (await s.chat()).status === 200 ? true : undefined
    })
    expect(await s.entries()).toBe(before + 1)
    expect(await (await s.request('GET', '/readyz')).json()).toEqual({ status: 'ready', database: 'ok' })
    expect(await verifyLedger(s.raw.client, { nowMs: s.clock.now(), staleAfterMs: 3_600_000 })).toEqual([])
  }, 20_000)

  test('a database that fails mid-traffic: the failed settlement marks it down, the next calls are refused before the upstream', async () => {
    const s = await setup()
    s.answer()
    expect((await s.chat()).status).toBe(200)
    s.wire.set('unreachable')
    // Within the freshness window a call is admitted on the lease in memory; its settlement
    // fails, so the client gets 503 and nothing complete (and nothing is charged).
    s.answer()
    const cut = await s.chat()
    expect(cut.status).toBe(503)
    // From then on, refused before any upstream call.
    await expectOutage(s)
    s.wire.set('ok')
    await poll('service to resume', 100, 50, async () => {
      s.answer()
      return (await s.chat()).status === 200 ? true : undefined
    })
  }, 20_000)

  test('a local file whose writer connection turns read-only (the native engine): 503, then recovery', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'svc-outage-'))
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }))
    const upstream = await FakeUpstream.start()
    cleanups.push(() => upstream.close())
    const yaml = `
providers: [{ id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }]
models: [{ id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 4096, max_output_tokens: 64 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
`
    const path = join(directory, 'svc.db')
    const env = { SVC_CONFIG: '/virtual/outage.yaml', UP_KEY: 'sk-up-0123456789', DATABASE_URL: `file:${path}` }
    const database = await openDatabase(env.DATABASE_URL)
    await migrateDatabase(database)
    const executor = new NativeExecutor(path)
    const clock = new FakeClock()
    const deps = await createDeps(loadConfig(env, () => yaml), { clock, database, executor, logger: silentLogger })
    await deps.sweeper.start()
    cleanups.push(() => deps.close().catch(() => {}))
    const app = createApp(deps)
    const { adminKey: secret } = await seedAdminOrg(deps, 'acme', 10_000_000_000n)
    const send = (path: string, body?: unknown) =>
      app.handle(new Request(`http://localhost${path}`, { method: body ? 'POST' : 'GET', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined }))
    const chat = () => send('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] })

    // The writer's own connection refuses writes, as a read-only file or volume would.
    ;(executor as unknown as { database: { exec(sql: string): void } }).database.exec('PRAGMA query_only = 1')
    clock.advance(1500)
    expect((await chat()).status).toBe(503)
    expect(deps.ledger.health!.unavailable).toBe(true)
    expect((await send('/api/v1/billing/balance')).status).toBe(503)
    expect(upstream.requests).toHaveLength(0)

    ;(executor as unknown as { database: { exec(sql: string): void } }).database.exec('PRAGMA query_only = 0')
    await poll('service to resume', 100, 50, () => (deps.ledger.health!.unavailable ? undefined : true))
    upstream.enqueue({
      kind: 'sse',
      body: chunk({ role: 'assistant', content: 'ok' }) + chunk({}, 'stop') + frame({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm1', choices: [], usage: openAIUsage({ inputTokens: 3, outputTokens: 1 }) }) + DONE,
    })
    expect((await chat()).status).toBe(200)
    expect(await verifyLedger(database.client, { nowMs: clock.now(), staleAfterMs: 3_600_000 })).toEqual([])
  }, 20_000)
})
