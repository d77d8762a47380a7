/**
 * Peak RSS of one gateway serving mixed traffic: the bench (bench/http.ts) measures each scenario
 * on its own, after its 1- and 32-connection cells, which is what the issue's RSS target asks;
 * a production gateway serves streamed and non-streamed requests, and both API formats, from one
 * process. Each cycle runs, on the same gateway, `--conns` connections of non-streamed Chat
 * Completions, then as many of instant streams, then half of each at once of non-streamed Chat
 * Completions and Messages streams (an Anthropic SDK's request to the Anthropic provider).
 *
 *   bun bench/http/mixed-rss.ts [--cycles 3] [--seconds 4] [--conns 128] [--env K=V,K=V] [--tree DIR]
 *
 * Prints each slice's peak RSS, requests/s and CPU µs per request (for the two at once, the
 * peak over both and each one's req/s). `--env` passes variables to the gateway, e.g.
 * `BUN_JSC_smallHeapGrowthFactor=1.5` (bench/README.md, the sixteenth session).
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { measure, type Load } from './drive'
import { removeDir, scenarioRequest, startGateway, startUpstreams } from './targets'

const argv = process.argv.slice(2)
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`)
  return at >= 0 && argv[at + 1] !== undefined ? argv[at + 1]! : fallback
}
const cycles = Number(option('cycles', '3'))
const seconds = Number(option('seconds', '4'))
const conns = Number(option('conns', '128'))
const env = Object.fromEntries(option('env', '').split(',').filter(Boolean).map(pair => pair.split('=') as [string, string]))
const tree = resolve(option('tree', resolve(import.meta.dir, '../..')))

const upstreams = await startUpstreams()
const gateway = await startGateway(upstreams, { tree, env })
// Two loads at once are sampled by two drivers, each with its own scratch directory.
const dirs = [mkdtempSync(join(tmpdir(), 'mixed-rss-')), mkdtempSync(join(tmpdir(), 'mixed-rss-'))] as const
const load = (scenario: string, connections: number, secs = seconds): Load => {
  const { path, body } = scenarioRequest(scenario)
  return { url: `${gateway.process.url}${path}`, headers: { 'content-type': 'application/json', authorization: `Bearer ${gateway.key}` }, body, connections, seconds: secs }
}
const pid = gateway.process.pid
const line = (name: string, peak: number, rps: string, cpu: string) => console.log(`${name.padEnd(44)} peak ${peak.toFixed(1)} MiB  ${rps} req/s  cpu ${cpu} µs/req`)

try {
  console.error(`${cycles} cycles of ${seconds} s slices at ${conns} connections${Object.keys(env).length ? `, env ${JSON.stringify(env)}` : ''}`)
  // Warm-up at 32 connections, as the bench's lower cells do (JIT, pools, leases, the auth cache).
  for (const scenario of ['nonstream', 'stream', 'messages-stream']) await measure(dirs[0], pid, load(scenario, 32, 1))
  for (let cycle = 0; cycle < cycles; cycle++) {
    for (const scenario of ['nonstream', 'stream']) {
      const sample = await measure(dirs[0], pid, load(scenario, conns))
      line(`cycle ${cycle}: ${scenario}`, sample.peak_rss_mib, sample.rps.toFixed(0), sample.cpu_us_per_request.toFixed(0))
    }
    const half = Math.max(1, Math.round(conns / 2))
    const [chat, messages] = await Promise.all([measure(dirs[0], pid, load('nonstream', half)), measure(dirs[1], pid, load('messages-stream', half))])
    line(`cycle ${cycle}: nonstream + messages-stream at once`, Math.max(chat.peak_rss_mib, messages.peak_rss_mib), `${chat.rps.toFixed(0)} + ${messages.rps.toFixed(0)}`, '–')
  }
} finally {
  gateway.process.kill()
  upstreams.instant.kill()
  upstreams.paced.kill()
  await gateway.exited
  for (const dir of [...dirs, gateway.dir]) removeDir(dir)
}
