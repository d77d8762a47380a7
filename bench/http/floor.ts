/**
 * How far below the bare proxy the stack itself sits, for the chat targets (issue 11): the
 * bare proxy, the floor gateways of floor-gateway.ts (`raw`, `elysia`, `ledger`: the least that
 * auth, limits, validation and durable billing can cost on Bun, Elysia and libSQL) and the real
 * gateway, behind the same instant mock, driven in turn (the order rotates every round) with wrk
 * at each connection count. Prints per target the medians of requests/s and CPU µs per request
 * (all threads, from /proc) and both as ratios to the bare proxy, and writes them as JSON under
 * bench/results/floor-<date>[-stream].json. Non-stream by default; `--stream` asks every target for
 * an SSE stream with usage (the instant mock's 20 chunks).
 *
 *   bun bench/http/floor.ts [--stream] [--conns 32,128] [--rounds 4] [--seconds 4] [--without-gateway]
 *                           [--gateway-tree DIR] [--gateway-env K=V,K=V]   (the gateway of another tree, or with more env)
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { measure, type Sample } from './drive'
import { removeDir, startGateway, startProxies, startScript, startUpstreams, type Process } from './targets'

const argv = process.argv.slice(2)
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`)
  return at >= 0 && argv[at + 1] !== undefined ? argv[at + 1]! : fallback
}
const connections = option('conns', '32,128').split(',').map(Number)
const rounds = Number(option('rounds', '4'))
const seconds = Number(option('seconds', '4'))
const stream = argv.includes('--stream')

const upstreams = await startUpstreams()
const proxies = await startProxies(upstreams)
const dir = mkdtempSync(join(tmpdir(), 'svc-floor-'))
const floorKey = 'z_sk_floor_bench_key'
const floor = async (level: string) =>
  startScript(`floor-${level}`, 'floor-gateway.ts', { LEVEL: level, UPSTREAM: upstreams.instant.url, DB: join(dir, `${level}.db`), LOG: join(dir, `${level}.log`), KEY: floorKey })
const gatewayEnv = Object.fromEntries(option('gateway-env', '').split(',').filter(Boolean).map(pair => pair.split('=') as [string, string]))
const gateway = argv.includes('--without-gateway') ? undefined : await startGateway(upstreams, { tree: option('gateway-tree', '') || undefined, env: gatewayEnv })

interface Target { name: string; process: Process; key: string; dir: string }
const targets: Target[] = [
  { name: 'bare proxy', process: proxies.instant, key: '', dir },
  { name: 'floor: raw', process: await floor('raw'), key: floorKey, dir },
  { name: 'floor: elysia', process: await floor('elysia'), key: floorKey, dir },
  { name: 'floor: elysia + ledger', process: await floor('ledger'), key: floorKey, dir },
  ...(gateway ? [{ name: 'gateway', process: gateway.process, key: gateway.key, dir: gateway.dir }] : []),
]
const body = JSON.stringify({
  model: 'bench-instant',
  messages: [{ role: 'user', content: 'Say twenty words.' }],
  max_tokens: 64,
  ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
})
const run = (target: Target, conns: number, secs: number) =>
  measure(target.dir, target.process.pid, {
    url: `${target.process.url}/v1/chat/completions`,
    headers: { 'content-type': 'application/json', ...(target.key ? { authorization: `Bearer ${target.key}` } : {}) },
    body,
    connections: conns,
    seconds: secs,
  })
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const results: Record<string, Record<string, { rps: number; cpu_us_per_request: number; rps_ratio: number; cpu_ratio: number; errors: number }>> = {}
try {
  console.error(`load average ${loadavg().map(v => v.toFixed(2)).join(' ')}; ${stream ? 'stream' : 'non-stream'}, ${rounds} rounds × ${seconds} s per target and connection count`)
  for (const target of targets) await run(target, 32, 6) // warm-up: JIT, pools, leases
  for (const conns of connections) {
    const samples = new Map<string, Sample[]>(targets.map(target => [target.name, []]))
    for (let round = 0; round < rounds; round++) {
      for (let index = 0; index < targets.length; index++) {
        const target = targets[(index + round) % targets.length]!
        samples.get(target.name)!.push(await run(target, conns, seconds))
      }
    }
    const bare = samples.get('bare proxy')!
    const bareRps = median(bare.map(s => s.rps))
    const bareCpu = median(bare.map(s => s.cpu_us_per_request))
    results[conns] = {}
    console.log(`\n${conns} connections        req/s   ratio   CPU µs/req   ratio`)
    for (const target of targets) {
      const mine = samples.get(target.name)!
      const rps = median(mine.map(s => s.rps))
      const cpu = median(mine.map(s => s.cpu_us_per_request))
      const row = { rps: Math.round(rps), cpu_us_per_request: Math.round(cpu * 10) / 10, rps_ratio: Math.round((rps / bareRps) * 100) / 100, cpu_ratio: Math.round((cpu / bareCpu) * 100) / 100, errors: mine.reduce((sum, s) => sum + s.errors, 0) }
      results[conns]![target.name] = row
      console.log(`${target.name.padEnd(24)} ${String(row.rps).padStart(7)}  ${row.rps_ratio.toFixed(2).padStart(5)}  ${row.cpu_us_per_request.toFixed(1).padStart(10)}  ${row.cpu_ratio.toFixed(2).padStart(6)}${row.errors ? `  ERRORS ${row.errors}` : ''}`)
    }
  }
  const out = join(import.meta.dir, '../results', `floor-${new Date().toISOString().slice(0, 16).replace(':', '')}${stream ? '-stream' : ''}.json`)
  mkdirSync(join(import.meta.dir, '../results'), { recursive: true })
  writeFileSync(out, `${JSON.stringify({ scenario: stream ? 'stream-instant' : 'nonstream-instant', rounds, seconds, results }, null, 2)}\n`)
  console.error(`\nwrote ${out}`)
} finally {
  for (const target of targets) target.process.kill()
  upstreams.instant.kill()
  upstreams.paced.kill()
  proxies.paced.kill()
  if (gateway) {
    await gateway.exited
    removeDir(gateway.dir)
  }
  removeDir(dir)
}
