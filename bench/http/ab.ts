/**
 * A/B of the gateway's CPU time per request: two gateways (tree A and tree B, or one tree with
 * two environments) behind the same instant mock upstream, driven alternately (A B B A A B…)
 * with the same load, several rounds. On a loaded, shared machine throughput is noise, but CPU
 * time per request of the gateway process (from /proc, all threads) stays comparable.
 *
 *   bun bench/http/ab.ts --a /tmp/base-tree [--b .] [--a-env K=V,K=V] [--b-env K=V] [--a-flags '--smol']
 *                        [--scenario nonstream|stream|paced|messages|messages-stream] [--conns 32] [--seconds 5] [--rounds 6] [--rate R]
 *                        [--ttfb N]
 *
 * Prints each run and the medians of CPU µs/request, requests/s and peak RSS per side, and the
 * paired view: B ÷ A of each round (its two runs are adjacent in time, so a machine that drifts
 * over minutes moves both), their median and range, and in how many rounds B was lower.
 *
 * With `--ttfb N` (a streaming scenario): time to the first streamed byte at one connection
 * instead, N pairs of single requests from this process, A and B alternately (the first of each
 * pair flips), so drift between two requests ~0.2 s apart is all the pairing leaves. Prints the
 * medians per side and the median of the per-pair differences B − A.
 */
import { resolve } from 'node:path'
import { measure, type Sample } from './drive'
import { removeDir, scenarioRequest, startGateway, startUpstreams } from './targets'

const argv = process.argv.slice(2)
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`)
  return at >= 0 && argv[at + 1] !== undefined ? argv[at + 1]! : fallback
}
const envOf = (text: string) => Object.fromEntries(text.split(',').filter(Boolean).map(pair => pair.split('=') as [string, string]))
const root = resolve(import.meta.dir, '../..')
const sides = {
  A: { tree: resolve(option('a', root)), env: envOf(option('a-env', '')), flags: option('a-flags', '').split(' ').filter(Boolean) },
  B: { tree: resolve(option('b', root)), env: envOf(option('b-env', '')), flags: option('b-flags', '').split(' ').filter(Boolean) },
}
// nonstream and stream call the instant upstream; paced streams from the paced one (50 ms to the
// first chunk, 5 ms between chunks: what a live model's stream costs per chunk). messages and
// messages-stream: an Anthropic Messages client on the Anthropic provider (the instant upstream).
const scenario = option('scenario', 'nonstream')
const request = scenarioRequest(scenario)
const conns = Number(option('conns', '32'))
const seconds = Number(option('seconds', '5'))
const rounds = Number(option('rounds', '6'))
// --rate R: a paced load (Bun load generator) so both sides serve the same requests per second
// whatever else the machine runs; without it, wrk as fast as possible.
const rate = Number(option('rate', '0')) || undefined

const upstreams = await startUpstreams()
const gateways = { A: await startGateway(upstreams, sides.A), B: await startGateway(upstreams, sides.B) }
const run = (side: 'A' | 'B', secs: number) =>
  measure(gateways[side].dir, gateways[side].process.pid, {
    url: `${gateways[side].process.url}${request.path}`,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${gateways[side].key}` },
    body: request.body,
    connections: conns,
    seconds: secs,
    rate,
  }, rate === undefined ? undefined : false)

const samples: Record<'A' | 'B', Sample[]> = { A: [], B: [] }
try {
  const pairs = Number(option('ttfb', '0'))
  if (pairs > 0) await firstBytes(pairs)
  else await cpuRounds()
} finally {
  await stop()
}

async function cpuRounds(): Promise<void> {
  console.error(`A: ${JSON.stringify(sides.A)}\nB: ${JSON.stringify(sides.B)}\n${scenario}, ${conns} connections, ${seconds} s × ${rounds} rounds`)
  // Warm-up: the JIT keeps compiling for several seconds under load (its threads took ~10-25% of
  // the gateway's CPU in the first 10 s), then pools, caches and leases.
  for (const side of ['A', 'B'] as const) await run(side, Number(option('warmup', '6')))
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? (['A', 'B'] as const) : (['B', 'A'] as const)
    for (const side of order) {
      const sample = await run(side, seconds)
      samples[side].push(sample)
      console.error(`round ${round + 1} ${side}: ${sample.cpu_us_per_request.toFixed(1)} µs/req (main thread ${sample.main_thread_us_per_request.toFixed(1)})  ${sample.rps.toFixed(0)} req/s  rss ${sample.peak_rss_mib} MiB${sample.errors ? `  ERRORS ${sample.errors}` : ''}`)
    }
  }
  const median = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b)
    const middle = Math.floor(sorted.length / 2)
    return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
  }
  const summary = Object.fromEntries(
    (['A', 'B'] as const).map(side => [
      side,
      {
        cpu_us_per_request: Math.round(median(samples[side].map(s => s.cpu_us_per_request)) * 10) / 10,
        main_thread_us_per_request: Math.round(median(samples[side].map(s => s.main_thread_us_per_request)) * 10) / 10,
        rps: Math.round(median(samples[side].map(s => s.rps))),
        peak_rss_mib: Math.max(...samples[side].map(s => s.peak_rss_mib)),
        errors: samples[side].reduce((sum, s) => sum + s.errors, 0),
      },
    ]),
  )
  const ratio = summary.B!.cpu_us_per_request / summary.A!.cpu_us_per_request
  const paired = samples.A.map((a, round) => samples.B[round]!.cpu_us_per_request / a.cpu_us_per_request).sort((x, y) => x - y)
  const round3 = (value: number) => Math.round(value * 1000) / 1000
  console.log(
    JSON.stringify({
      ...summary,
      cpu_ratio_b_over_a: round3(ratio),
      paired_cpu_ratio: { median: round3(median(paired)), min: round3(paired[0]!), max: round3(paired.at(-1)!), b_lower_in: `${paired.filter(value => value < 1).length} of ${paired.length}` },
    }),
  )
}

/** Microseconds from sending the request to its first body byte (the body is then read to its end). */
async function firstByteOf(side: 'A' | 'B'): Promise<number> {
  const started = performance.now()
  const response = await fetch(`${gateways[side].process.url}${request.path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${gateways[side].key}` },
    body: request.body,
  })
  if (!response.ok) throw new Error(`${side} answered ${response.status}: ${await response.text()}`)
  const reader = response.body!.getReader()
  let first: number | undefined
  for (;;) {
    const { done } = await reader.read()
    first ??= (performance.now() - started) * 1000
    if (done) return first
  }
}

async function firstBytes(pairs: number): Promise<void> {
  for (let i = 0; i < 20; i++) for (const side of ['A', 'B'] as const) await firstByteOf(side)
  const times: Record<'A' | 'B', number[]> = { A: [], B: [] }
  const differences: number[] = []
  for (let pair = 0; pair < pairs; pair++) {
    const order = pair % 2 === 0 ? (['A', 'B'] as const) : (['B', 'A'] as const)
    for (const side of order) times[side].push(await firstByteOf(side))
    differences.push(times.B.at(-1)! - times.A.at(-1)!)
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  const round = (value: number) => Math.round(value)
  console.log(
    JSON.stringify({
      scenario,
      pairs,
      ttfb_p50_us: { A: round(median(times.A)), B: round(median(times.B)) },
      b_minus_a_p50_us: round(median(differences)),
      b_later_in: `${differences.filter(value => value > 0).length} of ${pairs}`,
    }),
  )
}

async function stop(): Promise<void> {
  for (const side of ['A', 'B'] as const) gateways[side].process.kill()
  upstreams.instant.kill()
  upstreams.paced.kill()
  await Promise.all([gateways.A.exited, gateways.B.exited])
  for (const side of ['A', 'B'] as const) removeDir(gateways[side].dir)
}
