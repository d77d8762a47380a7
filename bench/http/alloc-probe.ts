/**
 * Heap allocation per request, by object type: the gateway's app in this process, on a database
 * file with the bench's configuration, against the mock upstream in its own process; the client's
 * own allocations (measured alone against the upstream) are subtracted. Counts come from JSC's
 * objectTypeCounts between two points with no collection in between (a WeakRef canary tells), so
 * they do not move with the machine's load as CPU timings do.
 *
 *   bun bench/http/alloc-probe.ts [--stream] [--requests 200] [--conns 16] [--tree DIR] > /dev/null
 *
 * Prints to stderr: heap cells allocated per request, then the top object types.
 */
import { heapStats } from 'bun:jsc'
import { resolve } from 'node:path'
import { appInProcess, startUpstreams } from './targets'

const argv = process.argv.slice(2)
const option = (name: string, fallback: string) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1]! : fallback)
const stream = argv.includes('--stream')
const requests = Number(option('requests', '200'))
const conns = Number(option('conns', '16'))

const upstreams = await startUpstreams()
// `--tree`: another checkout's app (an ablation, a commit to compare with).
const { app, key, close } = await appInProcess(upstreams, argv.includes('--tree') ? { tree: resolve(option('tree', '.')) } : {})
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

async function measure(work: (count: number) => Promise<void>): Promise<Map<string, number> | undefined> {
  Bun.gc(true)
  // Cleared by any collection while the requests run: their counts would then be short.
  const canary = new WeakRef({})
  const before = heapStats().objectTypeCounts
  await work(requests)
  const after = heapStats().objectTypeCounts
  if (canary.deref() === undefined) return undefined
  const types = new Map<string, number>()
  for (const [type, count] of Object.entries(after)) types.set(type, count - (before[type] ?? 0))
  return types
}

async function stable(work: (count: number) => Promise<void>): Promise<Map<string, number>> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const types = await measure(work)
    if (types) return types
  }
  throw new Error('a collection ran during every attempt: lower --requests')
}

await run(2000)
await runClientOnly(2000)
const client = await stable(runClientOnly)
const total = await stable(run)
const per = (n: number) => (n / requests).toFixed(1)
const rows = [...total].map(([type, count]) => [type, count - (client.get(type) ?? 0)] as const)
const cells = rows.reduce((sum, [, count]) => sum + Math.max(0, count), 0)
console.error(`${stream ? 'stream' : 'non-stream'}, ${requests} requests, ${conns} at a time: ${per(cells)} heap cells per request (the client's own subtracted), by type:`)
for (const [type, count] of rows.filter(([, count]) => count > requests / 10).sort((x, y) => y[1] - x[1]).slice(0, 40)) console.error(`${per(count).padStart(8)}  ${type}`)
server.stop(true)
await close()
upstreams.instant.kill()
upstreams.paced.kill()
process.exit(0)
