/**
 * System calls and context switches per request, the gateway beside the bare proxy (perf
 * tracepoints, so the counting costs little): on a VM where each syscall and wake-up is dear,
 * what a request spends in the kernel is part of its price.
 *
 *   bun bench/http/syscalls.ts [--scenario nonstream|stream] [--conns 32] [--seconds 4]
 *
 * Needs `perf` with tracepoint access (root, or kernel.perf_event_paranoid ≤ 1).
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { measure } from './drive'
import { removeDir, scenarioRequest, startGateway, startProxies, startUpstreams } from './targets'

const argv = process.argv.slice(2)
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`)
  return at >= 0 && argv[at + 1] !== undefined ? argv[at + 1]! : fallback
}
const scenario = option('scenario', 'nonstream')
const conns = Number(option('conns', '32'))
const seconds = Number(option('seconds', '4'))
const request = scenarioRequest(scenario)

const upstreams = await startUpstreams()
const proxies = await startProxies(upstreams)
const gateway = await startGateway(upstreams)
const dir = mkdtempSync(join(tmpdir(), 'svc-syscalls-'))

/** Counts of every syscall tracepoint and context switches of `pid` (all threads) while `work` runs. */
async function counted<T>(pid: number, work: () => Promise<T>): Promise<{ result: T; counts: Map<string, number> }> {
  const out = join(dir, `perf-${pid}.txt`)
  const perf = Bun.spawn(['perf', 'stat', '-x', ',', '-o', out, '-e', 'raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_*', '-p', String(pid)], { stdout: 'ignore', stderr: 'ignore' })
  await Bun.sleep(300)
  const result = await work()
  perf.kill('SIGINT')
  await perf.exited
  const counts = new Map<string, number>()
  for (const line of (await Bun.file(out).text()).split('\n')) {
    const [value, , event] = line.split(',')
    const n = Number(value)
    if (event !== undefined && Number.isFinite(n) && n > 0) counts.set(event.replace('syscalls:sys_enter_', ''), n)
  }
  return { result, counts }
}

const targets = [
  { name: 'bare proxy', pid: proxies.instant.pid, url: proxies.instant.url, headers: {} as Record<string, string> },
  { name: 'gateway', pid: gateway.process.pid, url: gateway.process.url, headers: { authorization: `Bearer ${gateway.key}` } },
]
const perRequest = new Map<string, Map<string, number>>()
try {
  for (const target of targets) {
    const load = { url: `${target.url}${request.path}`, headers: { 'content-type': 'application/json', ...target.headers }, body: request.body, connections: conns, seconds }
    await measure(dir, target.pid, { ...load, seconds: 2 })
    const { result, counts } = await counted(target.pid, () => measure(dir, target.pid, load))
    const per = new Map<string, number>()
    for (const [event, n] of counts) per.set(event, n / result.requests)
    perRequest.set(target.name, per)
    console.log(`${target.name}: ${result.requests} requests, ${result.cpu_us_per_request.toFixed(1)} µs CPU/request`)
  }
  const events = [...new Set([...perRequest.values()].flatMap(per => [...per.keys()]))]
    .filter(event => [...perRequest.values()].some(per => (per.get(event) ?? 0) >= 0.01))
    .sort((a, b) => (perRequest.get('gateway')!.get(b) ?? 0) - (perRequest.get('gateway')!.get(a) ?? 0))
  console.log(`\n${'per request'.padEnd(24)}${targets.map(t => t.name.padStart(12)).join('')}`)
  for (const event of events) console.log(`${event.padEnd(24)}${targets.map(t => (perRequest.get(t.name)!.get(event) ?? 0).toFixed(2).padStart(12)).join('')}`)
} finally {
  for (const process of [upstreams.instant, upstreams.paced, proxies.instant, proxies.paced, gateway.process]) process.kill()
  removeDir(gateway.dir)
  removeDir(dir)
}
