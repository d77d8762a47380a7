import { afterEach, expect, test } from 'bun:test'
import { join } from 'node:path'
import { runProcess } from '../support/cli'
import { gatewayWorkspace, seedOrg, startGateway, type GatewayProcess, type GatewayWorkspace } from '../support/gateway-process'
import { hranaServer } from '../support/hrana-server'

// A libSQL server that accepts requests and stops answering them, after the gateway has booted
// on it (QA). libSQL's HTTP client has no timeout, so every billed call, /readyz and the
// shutdown's closing writes waited forever, until SIGKILL. Each request now gets
// DATABASE_TIMEOUT_S, after which it is an outage (README, "Database outage"); the closing then
// fails (its leases stay out until a restart or another instance's sweep) and the exit code is 1.

let workspace: GatewayWorkspace
let database: ReturnType<typeof hranaServer>
let gateway: GatewayProcess | undefined
afterEach(() => {
  gateway?.process.kill('SIGKILL')
  database.stop()
  workspace.remove()
})

const YAML = (drainTimeoutS: number) => `
providers: [{ id: demo, type: demo, retention: none }]
models: [{ id: m, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 256 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
shutdown: { drain_timeout_s: ${drainTimeoutS} }
`

/** A gateway on a libSQL server (Hrana over HTTP) with an organization, and its admin key. */
async function gatewayOnServedDatabase(drainTimeoutS: number) {
  workspace = gatewayWorkspace('svc-silent-db-', YAML(drainTimeoutS))
  database = hranaServer(join(workspace.directory, 'served.db'))
  const env = { ...workspace.env, DATABASE_URL: database.url, SVC_INSTANCE_ID: 'served', DATABASE_TIMEOUT_S: '0.5' }
  const { key } = await seedOrg(env, 1_000_000_000n)
  gateway = await startGateway(env)
  return { gateway, key }
}

const messages = (gateway: GatewayProcess) => gateway.lines.filter(line => line.startsWith('{')).map(line => JSON.parse(line).msg as string)

test('a billed call and /readyz on a silent server: 503 unavailable once its requests time out, nothing charged', async () => {
  const { gateway, key } = await gatewayOnServedDatabase(1)
  const chat = () =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    })
  expect((await chat()).status).toBe(200)
  database.silence()
  const refused = await chat()
  expect(refused.status).toBe(503)
  expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('unavailable')
  const ready = await fetch(`${gateway.url}/readyz`)
  expect(ready.status).toBe(503)
  expect(await ready.json()).toEqual({ status: 'unavailable', database: 'unreachable' })
}, 30_000)

test('a SIGTERM on a silent server: the closing writes time out, and the process ends', async () => {
  const { gateway, key } = await gatewayOnServedDatabase(600)
  const chat = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  })
  expect(chat.status).toBe(200)
  database.silence()
  gateway.process.kill('SIGTERM')
  expect(await Promise.race([gateway.exited, Bun.sleep(15_000).then(() => 'still running')])).toBe(1)
  expect(messages(gateway).slice(-2)).toEqual(['shutdown: closing failed', 'stopped'])
}, 30_000)

// An operator command migrates first, with no limit on the migration itself: one timed statement
// before it fails on a server that answers nothing (QA: `svc ledger verify` hung there).
test('an operator command on a silent server: a one-line failure within DATABASE_TIMEOUT_S, exit 1', async () => {
  workspace = gatewayWorkspace('svc-silent-db-cli-', YAML(1))
  database = hranaServer(join(workspace.directory, 'served.db'))
  database.silence()
  const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts')
  const run = await runProcess([process.execPath, CLI, 'ledger', 'verify'], { env: { ...process.env, ...workspace.env, DATABASE_URL: database.url, DATABASE_TIMEOUT_S: '0.5' } })
  expect(run.code).toBe(1)
  expect(run.stderr).toContain('did not answer within 0.5 s')
}, 30_000)
