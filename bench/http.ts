/**
 * `bun run bench`: the gateway against a bare Bun reverse proxy, side by side in one run
 * (issue 11, ARCHITECTURE.md §11). See bench/README.md for what is measured and how to read it.
 *
 *   bun bench/http.ts [--quick] [--seconds N] [--repeat N] [--conns 1,32,128] [--only a,b] [--bun-loadgen] [--label X]
 *                     [--first-ms 50] [--gap-ms 5]   (the paced upstream's latency to the first chunk and between chunks)
 *   bun bench/http.ts --soak MINUTES
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { join } from 'node:path'
import { firstByte, haveWrk, measure, rssMiB, type Load, type Sample } from './http/drive'
import { evaluate, printTable, type Cell } from './http/report'
import { DEFAULT_PACING, removeDir, scenarioRequest, startGateway, startProxies, startUpstreams, type Process } from './http/targets'

const argv = process.argv.slice(2)
const flag = (name: string) => argv.includes(`--${name}`)
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`)
  return at >= 0 && argv[at + 1] ? argv[at + 1]! : fallback
}
const quick = flag('quick')
const seconds = Number(option('seconds', quick ? '1' : '4'))
const repeat = Number(option('repeat', quick ? '1' : '2'))
const connections = option('conns', '1,32,128').split(',').map(Number)
const soakMinutes = Number(option('soak', '0'))
const useWrk = haveWrk && !flag('bun-loadgen')
const pacing = { firstMs: Number(option('first-ms', String(DEFAULT_PACING.firstMs))), gapMs: Number(option('gap-ms', String(DEFAULT_PACING.gapMs))) }

// `request`: what is sent (targets.ts, scenarioRequest); `upstream`: the mock behind the proxy;
// `gateway`: which gateway process serves it.
// The Messages stream (an Anthropic SDK's request to an Anthropic backend, passed through) has no
// target of its own: its rows make a slowdown of that path visible in every run, CI's included.
// It has a gateway process of its own: served by the same process, it cost the Chat Completions
// scenarios measured after it 3–10% more CPU and 9–20 MiB more RSS (bench/README.md), which would
// move the targets' measurements away from what every earlier run measured.
export const SCENARIOS = [
  { name: 'nonstream-instant', request: 'nonstream', upstream: 'instant', stream: false, gateway: 'chat' },
  { name: 'stream-instant', request: 'stream', upstream: 'instant', stream: true, gateway: 'chat' },
  { name: 'stream-paced', request: 'paced', upstream: 'paced', stream: true, gateway: 'chat' },
  { name: 'messages-stream', request: 'messages-stream', upstream: 'instant', stream: true, gateway: 'messages' },
] as const
const only = option('only', '')
const scenarios = only ? SCENARIOS.filter(s => only.split(',').includes(s.name)) : SCENARIOS

if (!haveWrk) console.error('wrk not found: using the Bun load generator (install wrk with `apt-get install wrk` for steadier numbers)')
console.error(`load average ${loadavg().map(v => v.toFixed(2)).join(' ')}; ${seconds} s per run, ${repeat} repeat(s), ${useWrk ? 'wrk' : 'bun loadgen'}`)

const upstreams = await startUpstreams(pacing)
const proxies = await startProxies(upstreams)
const gateway = await startGateway(upstreams)
const gateways = { chat: gateway, messages: scenarios.some(s => s.gateway === 'messages') ? await startGateway(upstreams) : undefined }
const running = [gateway, ...(gateways.messages ? [gateways.messages] : [])]
const all: Process[] = [upstreams.instant, upstreams.paced, proxies.instant, proxies.paced, ...running.map(started => started.process)]
const stopAll = async () => {
  for (const child of all) child.kill()
  // A gateway drains and exits on SIGTERM (and writes a CPU profile when asked to).
  for (const started of running) {
    await started.exited
    removeDir(started.dir)
  }
}
process.on('SIGINT', () => void stopAll().then(() => process.exit(130)))

const gatewayOf = (scenario: (typeof SCENARIOS)[number]) => gateways[scenario.gateway]!

function loadFor(scenario: (typeof SCENARIOS)[number], target: 'proxy' | 'gateway', conns: number, secs: number): Load {
  const { path, body } = scenarioRequest(scenario.request)
  const served = gatewayOf(scenario)
  const base = target === 'proxy' ? proxies[scenario.upstream].url : served.process.url
  return {
    url: `${base}${path}`,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${served.key}` },
    body,
    connections: conns,
    seconds: secs,
  }
}
const pidOf = (scenario: (typeof SCENARIOS)[number], target: 'proxy' | 'gateway') =>
  target === 'proxy' ? proxies[scenario.upstream].pid : gatewayOf(scenario).process.pid

try {
  if (soakMinutes > 0) await soak(soakMinutes)
  else await run()
} finally {
  await stopAll()
}

async function run(): Promise<void> {
  const samples = new Map<string, Sample[]>()
  const ttfb = new Map<string, Array<{ ttfb_p50_us: number; p50_us: number }>>()
  const push = <T>(map: Map<string, T[]>, key: string, value: T) => map.set(key, [...(map.get(key) ?? []), value])
  for (const scenario of scenarios) {
    // Warm both targets (JIT, connection pools, the gateway's auth cache and leases).
    for (const target of ['proxy', 'gateway'] as const) await measure(gateway.dir, pidOf(scenario, target), loadFor(scenario, target, 32, 1), useWrk)
  }
  for (let round = 0; round < repeat; round++) {
    // A B A B: the order flips every round so drift on the machine hits both sides alike.
    const order = round % 2 === 0 ? (['proxy', 'gateway'] as const) : (['gateway', 'proxy'] as const)
    for (const scenario of scenarios) {
      for (const conns of connections) {
        for (const target of order) {
          const sample = await measure(gateway.dir, pidOf(scenario, target), loadFor(scenario, target, conns, seconds), useWrk)
          push(samples, `${scenario.name}/${conns}/${target}`, sample)
          console.error(`${scenario.name.padEnd(18)} c=${String(conns).padStart(3)} ${target.padEnd(7)} ${sample.rps.toFixed(0).padStart(6)} req/s  p50 ${(sample.p50_us / 1000).toFixed(2)} ms  cpu ${sample.cpu_us_per_request.toFixed(0)} µs/req (main ${sample.main_thread_us_per_request.toFixed(0)})  rss ${sample.peak_rss_mib} MiB${sample.errors ? `  ERRORS ${sample.errors}` : ''}`)
        }
      }
      if (scenario.stream) {
        for (const target of order) push(ttfb, `${scenario.name}/${target}`, await firstByte(loadFor(scenario, target, 1, 0), quick ? 50 : 200))
      }
    }
  }
  const cells: Cell[] = []
  for (const scenario of scenarios) {
    for (const conns of connections) {
      const proxy = median(samples.get(`${scenario.name}/${conns}/proxy`)!)
      const gw = median(samples.get(`${scenario.name}/${conns}/gateway`)!)
      const first = scenario.stream && conns === 1
        ? { proxy: medianOf(ttfb.get(`${scenario.name}/proxy`)!, 'ttfb_p50_us'), gateway: medianOf(ttfb.get(`${scenario.name}/gateway`)!, 'ttfb_p50_us') }
        : undefined
      cells.push({ scenario: scenario.name, connections: conns, proxy, gateway: gw, ttfb_us: first })
    }
  }
  const targets = evaluate(cells)
  printTable(cells, targets)
  const result = { date: new Date().toISOString(), tool: useWrk ? 'wrk' : 'bun-loadgen', seconds, repeat, paced_upstream: pacing, load_average: loadavg(), cells, targets }
  save('http', result)
}

async function soak(minutes: number): Promise<void> {
  const scenario = SCENARIOS[2]
  const points: Array<{ minute: number; rss_mib: number; rps: number; errors: number }> = []
  const slices = Math.max(1, Math.round((minutes * 60) / 30))
  for (let i = 0; i < slices; i++) {
    const sample = await measure(gateway.dir, gateway.process.pid, loadFor(scenario, 'gateway', 32, 30), useWrk)
    points.push({ minute: ((i + 1) * 30) / 60, rss_mib: Math.round(rssMiB(gateway.process.pid) * 10) / 10, rps: Math.round(sample.rps), errors: sample.errors })
    console.error(`soak ${points.at(-1)!.minute.toFixed(1)} min: rss ${points.at(-1)!.rss_mib} MiB, ${points.at(-1)!.rps} req/s, errors ${sample.errors}`)
  }
  // Growth is judged after the first minute (JIT, pools and caches fill up first).
  const settled = points.filter(point => point.minute > 1)
  const growth = settled.length > 1 ? settled.at(-1)!.rss_mib - settled[0]!.rss_mib : 0
  const result = { date: new Date().toISOString(), scenario: scenario.name, connections: 32, minutes, points, growth_after_first_minute_mib: growth, peak_rss_mib: Math.max(...points.map(p => p.rss_mib)) }
  console.log(JSON.stringify(result, null, 2))
  save('soak', result)
}

function median(list: Sample[]): Sample {
  const pick = (key: keyof Sample) => medianOf(list, key)
  return { requests: pick('requests'), errors: list.reduce((sum, s) => sum + s.errors, 0), rps: pick('rps'), p50_us: pick('p50_us'), p99_us: pick('p99_us'), cpu_us_per_request: pick('cpu_us_per_request'), main_thread_us_per_request: pick('main_thread_us_per_request'), peak_rss_mib: Math.max(...list.map(s => s.peak_rss_mib)) }
}
function medianOf<T>(list: T[], key: keyof T): number {
  const values = list.map(item => Number(item[key])).sort((a, b) => a - b)
  const middle = Math.floor(values.length / 2)
  return values.length % 2 ? values[middle]! : (values[middle - 1]! + values[middle]!) / 2
}
function save(kind: string, result: unknown): void {
  const dir = join(import.meta.dir, 'results')
  mkdirSync(dir, { recursive: true })
  const label = option('label', quick ? 'quick' : '')
  const file = join(dir, `${kind}-${new Date().toISOString().slice(0, 16).replace(':', '')}${label ? `-${label}` : ''}.json`)
  writeFileSync(file, JSON.stringify(result, null, 2) + '\n')
  console.error(`wrote ${file}`)
}
