import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { webConfigYaml } from '../support/fake-web'
import { gatewayWorkspace, openDeps, seedOrg, startGateway, type GatewayProcess, type GatewayWorkspace } from '../support/gateway-process'
import { connectMcp } from '../support/mcp'
import { poll } from '../support/poll'

// What `svc serve` loads at boot (bench/README.md, "Boot footprint"): the real gateway as a child
// process, with a preloaded probe that lists its loaded modules on SIGUSR2. Heavy dependencies
// that only rare routes or other commands need must not be loaded until first used. A behaviour
// check, not a byte count: a module that comes back into the boot graph fails it by name.

/** Path fragments of modules the server must not load at boot, and why each is deferred. */
const DEFERRED: Record<string, string> = {
  '/node_modules/@modelcontextprotocol/sdk/': 'MCP SDK (zod, ajv): first POST /mcp',
  '/node_modules/zod/': 'through the MCP SDK',
  '/node_modules/ajv/': 'through the MCP SDK',
  '/node_modules/htmlparser2/': 'first HTML page read by the web fetch',
  '/node_modules/@noble/ciphers/': 'only the simulated backend and the client encrypt',
  '/node_modules/@libsql/hrana-client/': 'remote libSQL clients, for a server URL only',
  '/src/operator/chat.ts': 'operator commands: imported when run',
  '/src/operator/billing.ts': 'operator commands: imported when run',
  '/src/operator/dev-tee.ts': 'operator commands: imported when run',
  '/src/operator/login.ts': 'operator commands: imported when run',
  '/src/client/': 'the client library (operator commands only)',
}

let workspace: GatewayWorkspace
let gateway: GatewayProcess
let probeFile = ''

/** Every module path loaded in the gateway so far. */
async function loadedModules(): Promise<string[]> {
  rmSync(probeFile, { force: true })
  gateway.process.kill('SIGUSR2')
  return poll('the module probe file', 200, 25, () => (existsSync(probeFile) ? (JSON.parse(readFileSync(probeFile, 'utf8')) as string[]) : undefined))
}

const deferredIn = (modules: string[]) =>
  Object.keys(DEFERRED).filter(fragment => modules.some(path => path.includes(fragment)))

beforeAll(async () => {
  workspace = gatewayWorkspace('svc-boot-footprint-', webConfigYaml())
  probeFile = join(workspace.directory, 'modules.json')
  gateway = await startGateway({ ...workspace.env, MODULE_PROBE_FILE: probeFile }, ['--preload', join(import.meta.dir, '..', 'support', 'module-probe.ts')])
}, 60_000)

afterAll(async () => {
  gateway?.process.kill('SIGKILL')
  await gateway?.exited
  workspace?.remove()
})

test('serve boots without the MCP SDK, htmlparser2, @noble/ciphers, remote libSQL clients or operator commands', async () => {
  const modules = await loadedModules()
  // The probe sees the server itself (else an empty list would pass).
  expect(modules.some(path => path.endsWith('/src/app.ts'))).toBe(true)
  expect(modules.some(path => path.includes('/node_modules/elysia/'))).toBe(true)
  expect(deferredIn(modules).map(fragment => `${fragment} (${DEFERRED[fragment]})`)).toEqual([])
})

test('the MCP SDK loads on the first POST /mcp and answers', async () => {
  const org = await seedOrg(workspace.env, 0n)
  const deps = await openDeps(workspace.env)
  const token = await deps.oauth.tokens
    .issue({ clientId: 'svc-cli', userId: org.userId, orgId: org.orgId, scope: 'mcp:inference', resource: null, keyId: org.keyId })
    .then(grant => grant.tokens.access_token)
  await deps.close()
  // An unauthenticated POST is refused before the SDK is needed.
  expect((await fetch(`${gateway.url}/mcp`, { method: 'POST', body: '{}' })).status).toBe(401)
  expect(deferredIn(await loadedModules())).not.toContain('/node_modules/@modelcontextprotocol/sdk/')

  const client = await connectMcp(gateway.url, token)
  const { tools } = await client.listTools()
  await client.close()
  expect(tools.map(tool => tool.name)).toContain('svc.list_models')
  expect(deferredIn(await loadedModules())).toContain('/node_modules/@modelcontextprotocol/sdk/')
})
