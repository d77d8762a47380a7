// A quick comparison of one answer through MCP (official SDK client, tools/call svc.chat) and
// through POST /v1/chat/completions (non-streamed), on a real socket, with the demo model and
// an in-memory database. Sequential requests; prints the median and p95 per surface.
// Usage: bun bench/mcp.ts [N]   (default 300 calls each)
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { createApp } from '../src/app'
import { loadConfig } from '../src/config/load'
import { migrateDatabase, openDatabase } from '../src/db/client'
import { createDeps } from '../src/deps'
import { silentLogger } from '../src/observability/logger'

const calls = Number(process.argv[2] ?? 300)
const yaml = `
providers: [{ id: demo, type: demo, retention: none }]
models: [{ id: demo-anonymous, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "0.1", output_per_mtok: "0.4" }, context_length: 32768, max_output_tokens: 4096 }]
plans: { pro: { monthly_allowance: "1000", fusion: true } }
limits: { inference: { key: { burst: 1000000, per_second: 1000000 }, org: { burst: 1000000, per_second: 1000000 } } }
`
const database = await openDatabase(':memory:')
await migrateDatabase(database)
const env = { SVC_CONFIG: '/virtual.yaml' }
const deps = await createDeps(loadConfig(env, () => yaml), { database, logger: silentLogger })
await deps.sweeper.start()
const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: createApp(deps).fetch })
const base = `http://127.0.0.1:${server.port}`
const { org, ownerUserId } = await deps.orgs.createOrg({ name: 'bench', planId: 'pro', ownerEmail: 'bench@example.test' })
const { key, secret } = await deps.keys.create({ orgId: org.id, userId: ownerUserId, name: 'bench', admin: true, expiresAtMs: null, spendCap: null })
const { tokens } = await deps.oauth.tokens.issue({ clientId: 'svc-cli', userId: ownerUserId, orgId: org.id, scope: 'mcp:inference', resource: null, keyId: key.id })

const client = new Client({ name: 'bench', version: '0' })
await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${tokens.access_token}` } } }))

async function measure(name: string, run: () => Promise<void>): Promise<void> {
  for (let index = 0; index < 30; index++) await run()
  const samples: number[] = []
  for (let index = 0; index < calls; index++) {
    const started = performance.now()
    await run()
    samples.push(performance.now() - started)
  }
  samples.sort((a, b) => a - b)
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!.toFixed(2)
  console.log(`${name.padEnd(28)} p50 ${at(0.5)} ms  p95 ${at(0.95)} ms  (${calls} calls)`)
}

await measure('HTTP chat/completions', async () => {
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo-anonymous', messages: [{ role: 'user', content: 'hello' }] }),
  })
  await response.json()
})
await measure('MCP tools/call svc.chat', async () => {
  await client.callTool({ name: 'svc.chat', arguments: { model: 'demo-anonymous', prompt: 'hello' } })
})
await measure('MCP tools/list', async () => {
  await client.listTools()
})
await measure('raw POST tools/list', async () => {
  const response = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tokens.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  })
  await response.json()
})
await client.close()
server.stop(true)
await deps.close()
