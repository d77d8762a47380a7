import { afterAll, beforeAll, expect, test } from 'bun:test'
import { chatLoad } from '../support/chat-load'
import { type GatewayProcess, gatewayWorkspace, type GatewayWorkspace, openDeps, runSvc, seedOrg, startGateway } from '../support/gateway-process'
import { startLoadUpstream, type LoadUpstream } from '../support/load-upstream'

// Several instances (issue 12 point 6, SECURITY-NOTES.md L8 and L12): two `svc serve` processes
// on one local database file in WAL mode serve one organization concurrently until its money
// runs out. Together they never spend more than it had, never bill a request twice, bill every
// complete answer exactly once, and leave a ledger that verifies. A key revoked through one
// stops working on the other within the staleness bound the README states (auth.cache_ttl_ms,
// at most 2 s).

const MTOK = 1_000_000n
const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b
const CACHE_TTL_MS = 2000

let workspace: GatewayWorkspace
let env: Record<string, string>
let upstream: LoadUpstream
const children: GatewayProcess[] = []

beforeAll(() => {
  upstream = startLoadUpstream({ chunks: 6, gapMs: 2 })
  workspace = gatewayWorkspace('svc-instances-', `
providers: [{ id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }]
models: [{ id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "100", output_per_mtok: "200" }, context_length: 8192, max_output_tokens: 16 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
limits: { inference: { key: { burst: 100000, per_second: 100000 }, org: { burst: 100000, per_second: 100000 } }, management: { key: { burst: 100000, per_second: 100000 }, org: { burst: 100000, per_second: 100000 } }, org_inference_concurrency: 1000 }
auth: { cache_ttl_ms: ${CACHE_TTL_MS} }
`)
  env = workspace.env
})

afterAll(async () => {
  for (const child of children) child.process.kill('SIGKILL')
  await upstream.close()
  workspace.remove()
})

test('two processes on one WAL database: no overspend, no double billing, revocation crosses within the bound', async () => {
  const price = ceilDiv(BigInt(upstream.usage.inputTokens) * 100_000_000_000n, MTOK) + ceilDiv(BigInt(upstream.usage.outputTokens) * 200_000_000_000n, MTOK)
  // Enough for ~120 answers; the load asks for many more.
  const credit = price * 120n + price / 2n
  const org = await seedOrg(env, credit)
  const a = await startGateway({ ...env, SVC_INSTANCE_ID: 'gw-a' })
  children.push(a)
  const b = await startGateway({ ...env, SVC_INSTANCE_ID: 'gw-b' })
  children.push(b)

  // Revocation: a key created and revoked through A, used on B.
  const admin = { authorization: `Bearer ${org.key}`, 'content-type': 'application/json' }
  const created = (await (await fetch(`${a.url}/api/v1/api-keys`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'roaming' }) })).json()) as any
  const roaming = { authorization: `Bearer ${created.key.token}` }
  expect((await fetch(`${b.url}/api/v1/rate-limits`, { headers: roaming })).status).toBe(200) // B has it cached now
  expect((await fetch(`${a.url}/api/v1/api-keys/${created.key.id}`, { method: 'DELETE', headers: admin })).status).toBe(204)
  const revokedAt = performance.now()
  expect((await fetch(`${a.url}/api/v1/rate-limits`, { headers: roaming })).status).toBe(401) // at once on A
  let crossedAfter = -1
  while (performance.now() - revokedAt < CACHE_TTL_MS + 3000) {
    if ((await fetch(`${b.url}/api/v1/rate-limits`, { headers: roaming })).status === 401) {
      crossedAfter = performance.now() - revokedAt
      break
    }
    await Bun.sleep(20) // polling another process; the bound itself is asserted below
  }
  expect(crossedAfter).toBeGreaterThanOrEqual(0)
  expect(crossedAfter).toBeLessThanOrEqual(CACHE_TTL_MS + 250)

  // Spend the organization's money through both at once.
  const outcomes = await chatLoad({ urls: [a.url, b.url], key: org.key, workers: 16, running: () => true, prefix: 'duo', invalidShare: 0, perWorker: 16 })
  const complete = outcomes.filter(outcome => outcome.complete)
  expect(complete.some(outcome => outcome.target === 0) && complete.some(outcome => outcome.target === 1)).toBe(true)
  expect(outcomes.filter(outcome => outcome.status === 429).length).toBeGreaterThan(0) // the money ran out
  for (const outcome of outcomes) expect(outcome.complete || outcome.status === 429 ? 'ok' : `${outcome.id} → ${outcome.status}`).toBe('ok')

  for (const child of [a, b]) child.process.kill('SIGTERM')
  expect(await a.exited).toBe(0)
  expect(await b.exited).toBe(0)
  const cli = await runSvc(['ledger', 'verify'], env)
  expect(cli.code).toBe(0)

  const inspector = await openDeps(env)
  try {
    const rows = (await inspector.database.client.execute("SELECT request_id, COUNT(*) AS n, SUM(amount_nanos) AS nanos FROM ledger_entries WHERE kind = 'settle' GROUP BY request_id")).rows
    const billed = new Map(rows.map(row => [String(row.request_id), { n: Number(row.n), nanos: BigInt(row.nanos as bigint) }]))
    for (const outcome of complete) expect(billed.get(outcome.id)).toEqual({ n: 1, nanos: price })
    expect(billed.size).toBe(complete.length) // nothing else was billed (every 200 was complete)
    const spent = [...billed.values()].reduce((sum, entry) => sum + entry.nanos, 0n)
    expect(spent).toBeLessThanOrEqual(credit) // no overspend
    const balance = await inspector.balance(org.orgId)
    expect(balance.prepaidNanos).toBe(credit - spent)
    // Refusals came only once the money left could not cover one more estimate: most of it was spent.
    expect(complete.length).toBeGreaterThan(60)
  } finally {
    await inspector.close()
  }
}, 120_000)
