import { afterAll, beforeAll, expect, test } from 'bun:test'
import { verifyLedger } from '../../src/billing/verify'
import { FAULT_POINTS } from '../../src/lib/fault-point'
import { gatewayWorkspace, type GatewayWorkspace, openDeps, runSvc, seedOrg, startGateway } from '../support/gateway-process'
import { startLoadUpstream, type LoadUpstream } from '../support/load-upstream'

// Crashes at exact steps (SECURITY-NOTES.md L6): the serve process with SVC_FAULT_POINT kills
// itself with SIGKILL when its request reaches that step. For each step, streamed and collected:
// the client never saw a complete answer; only a crash after the settlement committed bills it,
// exactly once (in_settle: killed inside its write transaction, before the COMMIT: nothing); a crash before the upstream leaves the upstream untouched; the restart returns
// the killed boot's leases and the ledger verifies.

const CREDIT = 100_000_000_000n
let workspace: GatewayWorkspace
let env: Record<string, string>
let upstream: LoadUpstream

beforeAll(() => {
  upstream = startLoadUpstream({ chunks: 6, gapMs: 1 })
  workspace = gatewayWorkspace('svc-fault-points-', `
providers: [{ id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }]
models: [{ id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 8192, max_output_tokens: 64 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
`, { SVC_INSTANCE_ID: 'gw-faults' })
  env = workspace.env
})

afterAll(async () => {
  await upstream.close()
  workspace.remove()
})

test('a crash at every step leaves a consistent ledger; only a committed settlement is billed, once', async () => {
  const org = await seedOrg(env, CREDIT)
  const inspector = await openDeps(env)
  const sql = async (text: string, args: string[] = []) => (await inspector.database.client.execute({ sql: text, args })).rows
  try {
    for (const point of FAULT_POINTS) {
      for (const stream of [true, false]) {
        const id = `${point}-${stream ? 'stream' : 'plain'}`
        const gateway = await startGateway({ ...env, SVC_FAULT_POINT: point })
        let complete = false
        try {
          const response = await fetch(`${gateway.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${org.key}`, 'content-type': 'application/json', 'x-request-id': id },
            body: JSON.stringify({ model: 'm', stream, messages: [{ role: 'user', content: 'crash here' }] }),
          })
          const text = await response.text()
          complete = response.status === 200 && (stream ? text.includes('[DONE]') : text.includes('"choices"'))
        } catch {
          // The connection died with the process.
        }
        expect({ id, exit: await gateway.exited }).toEqual({ id, exit: 137 - 128 + 128 }) // killed by SIGKILL
        expect({ id, complete }).toEqual({ id, complete: false })
        const entries = Number((await sql('SELECT COUNT(*) AS n FROM ledger_entries WHERE request_id = ?', [id]))[0]!.n)
        expect({ id, entries }).toEqual({ id, entries: point === 'after_settle_before_final_frame' ? 1 : 0 })
        expect({ id, reachedUpstream: upstream.received.has(id) }).toEqual({ id, reachedUpstream: point !== 'after_reserve' })
        const stranded = await sql("SELECT DISTINCT boot_id FROM leases WHERE instance_id = 'gw-faults'")

        // The restart hands the killed boot's leases back before it listens.
        const restarted = await startGateway(env)
        for (const row of stranded) expect((await sql('SELECT COUNT(*) AS n FROM leases WHERE boot_id = ?', [String(row.boot_id)]))[0]!.n).toBe(0n)
        expect(await verifyLedger(inspector.database.client, { nowMs: Date.now(), staleAfterMs: 3_600_000 })).toEqual([])
        restarted.process.kill('SIGTERM')
        expect(await restarted.exited).toBe(0)
      }
    }
    const cli = await runSvc(['ledger', 'verify'], env)
    expect(cli.code).toBe(0)
    const spent = BigInt((await sql("SELECT COALESCE(SUM(amount_nanos), 0) AS n FROM ledger_entries WHERE kind = 'settle'"))[0]!.n as bigint)
    expect((await inspector.balance(org.orgId)).prepaidNanos).toBe(CREDIT - spent)
  } finally {
    await inspector.close()
  }
}, 120_000)
