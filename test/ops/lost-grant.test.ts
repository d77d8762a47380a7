import { afterEach, expect, test } from 'bun:test'
import { join } from 'node:path'
import { createClient } from '@libsql/client'
import { gatewayWorkspace, runSvc, seedOrg, startGateway, type GatewayProcess, type GatewayWorkspace } from '../support/gateway-process'
import { hranaServer } from '../support/hrana-server'

// A lease grant that a libSQL server committed but whose reply the gateway never got (here: the
// server answers after DATABASE_TIMEOUT_S; any network failure after the COMMIT does the same).
// QA: the call got 503, and the grant stayed leased for the rest of the boot, unknown to the
// process: an organization with 0.05 USD was refused 429 "another gateway instance holds the rest
// leased" with no other instance, 40 s later still, and the idle return never gave it back.

let workspace: GatewayWorkspace
let database: ReturnType<typeof hranaServer>
let gateway: GatewayProcess | undefined
afterEach(() => {
  gateway?.process.kill('SIGKILL')
  database.stop()
  workspace.remove()
})

const YAML = `
providers: [{ id: demo, type: demo, retention: none }]
models: [{ id: m, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 256 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
shutdown: { drain_timeout_s: 5 }
`

const BALANCE = 50_000_000n // 0.05 USD: one lease takes all of it

test('a prepaid grant committed with its reply lost: the next call leases it again, and shutdown returns every nano', async () => {
  workspace = gatewayWorkspace('svc-lost-grant-', YAML)
  database = hranaServer(join(workspace.directory, 'served.db'), 42611)
  const env = { ...workspace.env, DATABASE_URL: database.url, SVC_INSTANCE_ID: 'only', DATABASE_TIMEOUT_S: '1', PORT: '42612' }
  const { orgId, key } = await seedOrg(env, BALANCE)
  gateway = await startGateway(env)
  const chat = () =>
    fetch(`${gateway!.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    })
  const reader = createClient({ url: database.url, intMode: 'bigint' })
  const leased = async () => (await reader.execute({ sql: 'SELECT COALESCE(SUM(amount_nanos), 0) AS n FROM leases WHERE org_id = ?', args: [orgId] })).rows[0]!.n as bigint
  try {
    database.delayReply(body => body.includes('INSERT INTO leases') && body.includes('|prepaid|'), 2500)
    const lost = await chat()
    expect(lost.status).toBe(503)
    await Bun.sleep(2000) // the late reply is sent (to no one); the grant is in the database
    expect(await leased()).toBe(BALANCE)

    // Once the writer has committed again (a probe each second), the next call is served from
    // that money: nothing else holds it.
    let answer = await chat()
    for (let tries = 0; answer.status === 503 && tries < 20; tries++) {
      await Bun.sleep(250)
      answer = await chat()
    }
    expect({ status: answer.status, body: answer.status === 200 ? '' : await answer.text() }).toEqual({ status: 200, body: '' })
    expect(await leased()).toBeLessThan(BALANCE) // the row holds what the process knows, less what it spent

    gateway.process.kill('SIGTERM')
    expect(await gateway.exited).toBe(0)
    expect(await leased()).toBe(0n)
    const verify = await runSvc(['ledger', 'verify'], env)
    expect({ code: verify.code, out: verify.stdout.trim() }).toEqual({ code: 0, out: 'ledger ok: every invariant holds' })
    // Every nano is the organization's again but the one call's charge.
    const money = await reader.execute({
      sql: `SELECT b.prepaid_nanos AS prepaid, b.prepaid_leased_nanos AS leased,
                   (SELECT SUM(amount_nanos) FROM ledger_entries WHERE org_id = ?1 AND kind = 'settle') AS spent
            FROM balances b WHERE b.org_id = ?1`,
      args: [orgId],
    })
    const { prepaid, leased: stillLeased, spent } = money.rows[0] as unknown as { prepaid: bigint; leased: bigint; spent: bigint }
    expect(spent).toBeGreaterThan(0n)
    expect([prepaid, stillLeased]).toEqual([BALANCE - spent, 0n])
  } finally {
    reader.close()
  }
}, 60_000)
