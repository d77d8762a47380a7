/**
 * Heap allocation per request, by object type: the gateway's app in this process, on a database
 * file with the bench's configuration, against the mock upstream in its own process (so only the
 * gateway's allocations count). Counts are exact (JSC's objectTypeCounts between two points with
 * no collection in between), unlike CPU timings on a shared machine.
 *
 *   bun bench/http/alloc-probe.ts [--stream] [--requests 200] [--conns 16] > /dev/null
 *
 * Prints to stderr: heap bytes and objects allocated per request, then the top object types.
 */
import { heapStats } from 'bun:jsc'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp } from '../../src/app'
import { loadConfig } from '../../src/config/load'
import { migrateDatabase } from '../../src/db/client'
import { createDeps } from '../../src/deps'
import { bootstrapIfEmpty } from '../../src/orgs/bootstrap'
import { gatewayConfig, startUpstreams } from './targets'

const argv = process.argv.slice(2)
const option = (name: string, fallback: string) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1]! : fallback)
const stream = argv.includes('--stream')
const requests = Number(option('requests', '200'))
const conns = Number(option('conns', '16'))

const upstreams = await startUpstreams()
const dir = mkdtempSync(join(tmpdir(), 'svc-alloc-'))
writeFileSync(join(dir, 'config.yaml'), gatewayConfig(upstreams))
const config = loadConfig({ DATABASE_URL: `file:${join(dir, 'svc.db')}`, SVC_CONFIG: join(dir, 'config.yaml'), SVC_LOG_LEVEL: 'info', BENCH_UPSTREAM_KEY: 'bench' })
const deps = await createDeps(config)
await migrateDatabase(deps.database)
await deps.sweeper.start()
const boot = await bootstrapIfEmpty(deps)
const key = boot!.secret
const app = createApp(deps)
const server = app.listen({ port: 0, hostname: '127.0.0.1' }).server!
const url = `http://127.0.0.1:${server.port}/v1/chat/completions`
const body = JSON.stringify({ model: 'bench-instant', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 64, stream })

async function run(count: number): Promise<void> {
  let left = count
  await Promise.all(Array.from({ length: conns }, async () => {
    while (left-- > 0) {
      const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body })
      await response.arrayBuffer()
      if (response.status !== 200) throw new Error(`status ${response.status}`)
    }
  }))
}

// The client's own fetches run in this process too: measured alone, against the bare upstream, and subtracted.
async function runClientOnly(count: number): Promise<void> {
  let left = count
  const direct = `${upstreams.instant.url}/v1/chat/completions`
  await Promise.all(Array.from({ length: conns }, async () => {
    while (left-- > 0) await (await fetch(direct, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body })).arrayBuffer()
  }))
}

async function measure(work: (count: number) => Promise<void>): Promise<{ bytes: number; objects: number; types: Map<string, number> } | undefined> {
  Bun.gc(true)
  const before = heapStats()
  await work(requests)
  const after = heapStats()
  // A collection in between makes the difference meaningless: the caller retries.
  if (after.objectCount < before.objectCount || after.heapSize < before.heapSize) return undefined
  const types = new Map<string, number>()
  for (const [type, count] of Object.entries(after.objectTypeCounts)) types.set(type, count - (before.objectTypeCounts[type] ?? 0))
  return { bytes: after.heapSize - before.heapSize, objects: after.objectCount - before.objectCount, types }
}

async function stable(work: (count: number) => Promise<void>) {
  for (let attempt = 0; attempt < 10; attempt++) {
    const result = await measure(work)
    if (result) return result
  }
  throw new Error('a collection ran during every attempt: lower --requests')
}

await run(2000)
await runClientOnly(2000)
const client = await stable(runClientOnly)
const total = await stable(run)
const per = (n: number) => (n / requests).toFixed(1)
console.error(`${stream ? 'stream' : 'non-stream'}, ${requests} requests, ${conns} at a time`)
console.error(`gateway + client: ${per(total.bytes)} bytes, ${per(total.objects)} objects per request`)
console.error(`client alone:     ${per(client.bytes)} bytes, ${per(client.objects)} objects per request`)
console.error(`gateway:          ${per(total.bytes - client.bytes)} bytes, ${per(total.objects - client.objects)} objects per request`)
const rows = [...total.types].map(([type, count]) => [type, count - (client.types.get(type) ?? 0)] as const).filter(([, count]) => count > requests / 10)
for (const [type, count] of rows.sort((a, b) => b[1] - a[1]).slice(0, 40)) console.error(`${per(count).padStart(8)}  ${type}`)
server.stop(true)
await deps.close()
upstreams.instant.kill()
upstreams.paced.kill()
process.exit(0)
