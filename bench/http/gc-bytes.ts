/**
 * What one chat request allocates, in the unit that paces JavaScriptCore's collections: the
 * bytes it counts toward the next one (cells, their storage, and the extra memory of strings and
 * buffers it is told of). The gateway's app of any tree (`--tree`) runs in a child process with
 * `BUN_JSC_logGC=1`, serving `--requests` requests from `--conns` callers in that process against
 * the mock upstream; JSC logs "bytes allocated this cycle" at each collection it starts, and the
 * sum over the measured requests, less the same callers' own against the bare upstream, is the
 * gateway's. Unlike CPU time it does not move with the machine's load (±1 KiB between runs).
 * The collections' share of the main thread follows it (bench/README.md, "An instant stream read in place").
 *
 *   bun bench/http/gc-bytes.ts [--stream] [--tree DIR] [--requests 20000] [--conns 32]
 */
import { resolve } from 'node:path'
import { appInProcess, startUpstreams } from './targets'

const argv = process.argv.slice(2)
const option = (name: string, fallback: string) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1]! : fallback)
const stream = argv.includes('--stream')
const tree = resolve(option('tree', resolve(import.meta.dir, '../..')))
const requests = Number(option('requests', '20000'))
const conns = Number(option('conns', '32'))
const CHILD = 'GC_BYTES_CHILD'

if (process.env[CHILD] === undefined) {
  // The parent: runs itself with the GC log on, and sums the log between the child's marks.
  const child = Bun.spawn([process.execPath, import.meta.path, ...argv], { env: { ...process.env, [CHILD]: '1', BUN_JSC_logGC: '1' }, stdout: 'inherit', stderr: 'pipe' })
  const log = await new Response(child.stderr).text()
  if ((await child.exited) !== 0) throw new Error(`the measuring process failed:\n${log.slice(-2000)}`)
  const sums = new Map<string, number>()
  let phase: string | undefined
  for (const line of log.split('\n')) {
    const mark = /^MARK (\w+) (start|end)$/.exec(line)
    if (mark) phase = mark[2] === 'start' ? mark[1] : undefined
    const allocated = /bytes allocated this cycle: (\d+)/.exec(line)
    if (allocated && phase !== undefined) sums.set(phase, (sums.get(phase) ?? 0) + Number(allocated[1]))
  }
  const kib = (bytes: number) => (bytes / requests / 1024).toFixed(1)
  const gateway = (sums.get('gateway') ?? 0) - (sums.get('client') ?? 0)
  console.log(`${stream ? 'stream' : 'non-stream'} ${tree}: ${kib(gateway)} KiB per request counted toward collections (callers alone ${kib(sums.get('client') ?? 0)}, with the gateway ${kib(sums.get('gateway') ?? 0)}; ${requests} requests)`)
  process.exit(0)
}

const upstreams = await startUpstreams()
const { app, key, close } = await appInProcess(upstreams, { tree })
// The request log goes nowhere (building and batching its lines stays measured).
process.stdout.write = (() => true) as typeof process.stdout.write
const server = app.listen({ port: 0, hostname: '127.0.0.1' }).server!
const body = JSON.stringify({ model: 'bench-instant', messages: [{ role: 'user', content: 'Say twenty words.' }], max_tokens: 64, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) })
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }

async function drive(url: string, count: number): Promise<void> {
  let left = count
  await Promise.all(
    Array.from({ length: conns }, async () => {
      while (left-- > 0) {
        const response = await fetch(url, { method: 'POST', headers, body })
        await response.arrayBuffer()
        if (response.status !== 200) throw new Error(`status ${response.status}`)
      }
    }),
  )
}

const targets = { gateway: `http://127.0.0.1:${server.port}/v1/chat/completions`, client: `${upstreams.instant.url}/v1/chat/completions` }
await drive(targets.gateway, 3000) // warm-up: JIT, leases, pools
for (const [phase, url] of Object.entries(targets)) {
  Bun.gc(true)
  console.error(`MARK ${phase} start`)
  await drive(url, requests)
  console.error(`MARK ${phase} end`)
}
server.stop(true)
await close()
upstreams.instant.kill()
upstreams.paced.kill()
process.exit(0)
