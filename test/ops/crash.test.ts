import { afterAll, beforeAll, expect, test } from 'bun:test'
import { verifyLedger } from '../../src/billing/verify'
import { chatLoad, type ChatOutcome } from '../support/chat-load'
import { type GatewayProcess, gatewayWorkspace, type GatewayWorkspace, openDeps, runSvc, seedOrg, startGateway } from '../support/gateway-process'
import { startLoadUpstream, type LoadUpstream } from '../support/load-upstream'

// Crash safety (issue 12 point 3, SECURITY-NOTES.md L6): the real gateway process on a local
// database file serves billed streaming and collected chat against an upstream, and is killed
// with SIGKILL at a random moment, several rounds over. After every restart the leases of the
// killed boot are back with the organization and the ledger verifies; at the end `svc ledger
// verify` passes, every request the client saw complete was billed exactly once (at its exact
// price), nothing was billed for a request that never reached the upstream (invalid ones
// included), and no request was billed twice.

const ROUNDS = 4
const CREDIT = 1_000_000_000_000n
const INSTANCE = 'gw-crash'
const MTOK = 1_000_000n
const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b

let workspace: GatewayWorkspace
let env: Record<string, string>
let upstream: LoadUpstream
let child: GatewayProcess | undefined

beforeAll(() => {
  upstream = startLoadUpstream({ chunks: 8, gapMs: 4 })
  workspace = gatewayWorkspace('svc-crash-', `
providers: [{ id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }]
models: [{ id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1.5", output_per_mtok: "2.5" }, context_length: 8192, max_output_tokens: 256 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
limits: { inference: { key: { burst: 100000, per_second: 100000 }, org: { burst: 100000, per_second: 100000 } }, org_inference_concurrency: 1000 }
`, { SVC_INSTANCE_ID: INSTANCE })
  env = workspace.env
})

afterAll(async () => {
  child?.process.kill('SIGKILL')
  await upstream.close()
  workspace.remove()
})

test('SIGKILL at random moments under billed load: restart returns the leases, verify passes, complete ⇒ billed exactly once', async () => {
  const org = await seedOrg(env, CREDIT)
  const inspector = await openDeps(env)
  const sql = async (text: string, args: Array<string | number> = []) => (await inspector.database.client.execute({ sql: text, args })).rows
  const outcomes: ChatOutcome[] = []
  let leasedAtSomeKill = 0n
  try {
    for (let round = 0; round <= ROUNDS; round++) {
      const leftBehind = await sql('SELECT boot_id, COALESCE(SUM(amount_nanos), 0) AS amount FROM leases WHERE instance_id = ? GROUP BY boot_id', [INSTANCE])
      for (const row of leftBehind) leasedAtSomeKill += BigInt(row.amount as bigint)
      child = await startGateway(env)
      // The restart returned every lease of the killed boot before it listened.
      for (const row of leftBehind) expect((await sql('SELECT COUNT(*) AS n FROM leases WHERE boot_id = ?', [String(row.boot_id)]))[0]!.n).toBe(0n)
      expect(await verifyLedger(inspector.database.client, { nowMs: Date.now(), staleAfterMs: 3_600_000 })).toEqual([])

      let running = true
      const last = round === ROUNDS
      const load = chatLoad({ urls: [child.url], key: org.key, workers: 12, running: () => running, prefix: `r${round}`, perWorker: last ? 6 : undefined })
      if (last) {
        // The last round ends with a graceful stop, so that the final state is quiescent.
        outcomes.push(...(await load))
        running = false
        child.process.kill('SIGTERM')
        expect(await child.exited).toBe(0)
      } else {
        await Bun.sleep(150 + Math.random() * 600) // a random moment under load
        child.process.kill('SIGKILL')
        await child.exited
        running = false
        outcomes.push(...(await load))
      }
      child = undefined
    }

    expect(leasedAtSomeKill).toBeGreaterThan(0n) // the kills did strand leases, which came back
    const cli = await runSvc(['ledger', 'verify'], env)
    expect(cli.stderr + cli.stdout).toContain('ledger ok')
    expect(cli.code).toBe(0)

    const entries = await sql("SELECT request_id, COUNT(*) AS n, SUM(amount_nanos) AS nanos FROM ledger_entries WHERE kind = 'settle' GROUP BY request_id")
    const billed = new Map(entries.map(row => [String(row.request_id), { n: Number(row.n), nanos: BigInt(row.nanos as bigint) }]))
    const price = ceilDiv(BigInt(upstream.usage.inputTokens) * 1_500_000_000n, MTOK) + ceilDiv(BigInt(upstream.usage.outputTokens) * 2_500_000_000n, MTOK)
    const complete = outcomes.filter(outcome => outcome.complete)
    expect(complete.length).toBeGreaterThan(20)
    expect(outcomes.some(outcome => !outcome.complete && outcome.kind !== 'invalid')).toBe(true) // some were cut by kills
    for (const outcome of complete) expect({ id: outcome.id, billed: billed.get(outcome.id) }).toEqual({ id: outcome.id, billed: { n: 1, nanos: price } })
    for (const [id, entry] of billed) {
      expect({ id, n: entry.n }).toEqual({ id, n: 1 }) // never twice
      expect({ id, reachedUpstream: upstream.received.has(id) }).toEqual({ id, reachedUpstream: true })
    }
    for (const outcome of outcomes.filter(outcome => outcome.kind === 'invalid')) {
      expect(billed.has(outcome.id)).toBe(false)
      expect(upstream.received.has(outcome.id)).toBe(false)
    }
    // Conservation: the balance is the credit minus what was billed, and nothing is leased.
    const spent = [...billed.values()].reduce((sum, entry) => sum + entry.nanos, 0n)
    expect((await inspector.balance(org.orgId)).prepaidNanos).toBe(CREDIT - spent)
    expect((await sql('SELECT COALESCE(SUM(amount_nanos), 0) AS n FROM leases'))[0]!.n).toBe(0n)
  } finally {
    await inspector.close()
  }
}, 120_000)
