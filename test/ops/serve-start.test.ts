import { afterEach, expect, test } from 'bun:test'
import { join } from 'node:path'
import { runProcess } from '../support/cli'
import { poll } from '../support/poll'
import { gatewayWorkspace, openDeps, seedOrg, startGateway, type GatewayProcess, type GatewayWorkspace } from '../support/gateway-process'

// `svc serve` when it cannot bind: a port already taken fails the start (EADDRINUSE), even when
// another gateway holds it, and a first boot that fails so creates no admin key it would never
// print.

const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts')
const YAML = 'plans: { payg: { monthly_allowance: "0", fusion: false } }\n'

const workspaces: GatewayWorkspace[] = []
let running: GatewayProcess | undefined
afterEach(async () => {
  running?.process.kill('SIGTERM')
  await running?.exited
  running = undefined
  for (const workspace of workspaces.splice(0)) workspace.remove()
})

function workspaceFor(prefix: string): GatewayWorkspace {
  const workspace = gatewayWorkspace(prefix, YAML)
  workspaces.push(workspace)
  return workspace
}

const serve = (env: Record<string, string>) => runProcess([process.execPath, CLI, 'serve'], { env: { ...process.env, ...env } })

test('a second gateway on a port another gateway holds fails to start instead of sharing it', async () => {
  running = await startGateway(workspaceFor('svc-serve-port-').env)
  const second = await serve({ ...workspaceFor('svc-serve-port-b-').env, PORT: String(running.port), SVC_BOOTSTRAP: '0' })
  expect(second.code).toBe(1)
  expect(second.stdout + second.stderr).toContain('EADDRINUSE')
}, 30_000)

test('a first boot that cannot bind creates no organization; the next boot creates it and prints its key', async () => {
  const workspace = workspaceFor('svc-serve-boot-')
  const holder = Bun.serve({ port: 0, hostname: '0.0.0.0', fetch: () => new Response('taken') })
  try {
    const failed = await serve({ ...workspace.env, PORT: String(holder.port), SVC_BOOTSTRAP: '1' })
    expect(failed.code).toBe(1)
    expect(failed.stdout).not.toContain('Created organization')
  } finally {
    holder.stop(true)
  }
  running = await startGateway({ ...workspace.env, SVC_BOOTSTRAP: '1' })
  expect(running.lines.join('\n')).toContain('Created organization')
  expect(running.lines.join('\n')).toMatch(/Authorization: Bearer z_sk_/)
}, 30_000)

test("a boot returns its instance's earlier leases only once it listens: a copy that cannot bind returns none", async () => {
  const workspace = workspaceFor('svc-serve-lease-')
  const { orgId } = await seedOrg(workspace.env, 1_000_000_000n)
  // A lease of instance prod-1's earlier boot, as a live (or crashed) process would hold it.
  const deps = await openDeps(workspace.env)
  const leases = async () => (await deps.database.client.execute("SELECT id FROM leases WHERE instance_id = 'prod-1'")).rows.length
  try {
    await deps.database.client.batch([
      { sql: 'UPDATE balances SET prepaid_leased_nanos = prepaid_leased_nanos + 200000000 WHERE org_id = ?', args: [orgId] },
      {
        sql: `INSERT INTO leases (id, instance_id, boot_id, scope, org_id, key_id, period_start_ms, amount_nanos, last_grant_nanos, updated_at_ms)
              VALUES ('earlier|prepaid', 'prod-1', 'earlier-boot', 'prepaid', ?, NULL, 0, 200000000, 200000000, 0)`,
        args: [orgId],
      },
    ], 'write')
    const holder = Bun.serve({ port: 0, hostname: '0.0.0.0', fetch: () => new Response('taken') })
    try {
      const failed = await serve({ ...workspace.env, PORT: String(holder.port), SVC_INSTANCE_ID: 'prod-1' })
      expect(failed.code).toBe(1)
      expect(failed.stdout + failed.stderr).toContain('EADDRINUSE')
    } finally {
      holder.stop(true)
    }
    expect(await leases()).toBe(1)
    // A boot that listens returns it.
    running = await startGateway({ ...workspace.env, SVC_INSTANCE_ID: 'prod-1' })
    expect(running.lines.join('\n')).toContain('"msg":"returned leases"')
    expect(await leases()).toBe(0)
  } finally {
    await deps.close()
  }
}, 30_000)

test('a second gateway started with a live one\'s SVC_INSTANCE_ID runs under a fresh id and says so', async () => {
  const workspace = workspaceFor('svc-serve-sameid-')
  running = await startGateway({ ...workspace.env, SVC_INSTANCE_ID: 'prod-1' })
  const second = await startGateway({ ...workspace.env, SVC_INSTANCE_ID: 'prod-1' })
  try {
    const warning = second.lines.map(line => (line.startsWith('{') ? JSON.parse(line) : {})).find(line => line.level === 'warn')
    expect(warning).toMatchObject({ msg: expect.stringContaining('SVC_INSTANCE_ID prod-1 is held by a live process'), instance_id: expect.stringMatching(/^ephemeral-/) })
    expect(running.lines.join('\n')).not.toContain('held by a live process')
  } finally {
    second.process.kill('SIGTERM')
    await second.exited
  }
}, 30_000)

/** A port free right now (taken by a throwaway server, then released). */
function freePort(): number {
  const probe = Bun.serve({ port: 0, fetch: () => new Response() })
  const port = probe.port!
  probe.stop(true)
  return port
}

/** `svc serve` on a free port with `stdout` as given; its stderr is collected as it comes. */
function serveWith(env: Record<string, string>, stdout: 'pipe' | ReturnType<typeof Bun.file>) {
  const port = freePort()
  const child = Bun.spawn([process.execPath, CLI, 'serve'], { env: { ...process.env, ...env, PORT: String(port) }, stdin: 'ignore', stdout, stderr: 'pipe' })
  let stderr = ''
  void (async () => {
    for await (const chunk of child.stderr) stderr += new TextDecoder().decode(chunk)
  })()
  const url = `http://127.0.0.1:${port}`
  const ready = () => poll('the gateway to answer', 200, 50, async () => ((await fetch(`${url}/healthz`).catch(() => undefined))?.status === 200 ? true : undefined))
  const failedWrite = () => poll('a failed log write to be reported', 200, 50, () => (stderr.includes('log lines could not be written to standard output') ? true : undefined))
  return { child, url, ready, failedWrite, stderr: () => stderr }
}

test("standard output failing (a full disk) neither stops the gateway nor loses the first boot's key: it goes to stderr", async () => {
  const gateway = serveWith({ ...workspaceFor('svc-serve-full-').env, SVC_BOOTSTRAP: '1' }, Bun.file('/dev/full'))
  try {
    await gateway.ready()
    // Every request writes a log line, and each write fails: the gateway goes on serving.
    await gateway.failedWrite()
    for (let request = 0; request < 5; request++) expect((await fetch(`${gateway.url}/v1/models`)).status).toBe(200)
  } finally {
    gateway.child.kill('SIGTERM')
  }
  expect(await gateway.child.exited).toBe(0)
  expect(gateway.stderr()).toMatch(/Authorization: Bearer z_sk_/)
}, 30_000)

test('a log reader that exits (a closed pipe) does not stop the gateway', async () => {
  const gateway = serveWith({ ...workspaceFor('svc-serve-pipe-').env, SVC_BOOTSTRAP: '0' }, 'pipe')
  try {
    await gateway.ready()
    await (gateway.child.stdout as ReadableStream<Uint8Array>).cancel()
    await poll('a failed log write', 200, 50, async () => {
      expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
      return gateway.stderr().includes('log lines could not be written to standard output') ? true : undefined
    })
    expect((await fetch(`${gateway.url}/v1/models`)).status).toBe(200)
    expect(gateway.child.exitCode).toBeNull()
  } finally {
    gateway.child.kill('SIGTERM')
  }
  expect(await gateway.child.exited).toBe(0)
}, 30_000)

test('a first boot whose key neither output takes revokes it: no live credential that nobody saw', async () => {
  const workspace = workspaceFor('svc-serve-nowhere-')
  const child = Bun.spawn([process.execPath, CLI, 'serve'], {
    env: { ...process.env, ...workspace.env, PORT: '0', SVC_BOOTSTRAP: '1' },
    stdin: 'ignore',
    stdout: Bun.file('/dev/full'),
    stderr: Bun.file('/dev/full'),
  })
  expect(await child.exited).toBe(1)
  const deps = await openDeps(workspace.env)
  try {
    const keys = await deps.database.client.execute("SELECT status FROM api_keys WHERE name = 'bootstrap admin'")
    expect(keys.rows.map(row => row.status)).toEqual(['revoked'])
  } finally {
    await deps.close()
  }
}, 30_000)
