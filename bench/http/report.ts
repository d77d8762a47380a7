/** The benchmark's table and its targets (issue 11 / ARCHITECTURE.md §11), from median samples. */
import type { Sample } from './drive'

export interface Cell {
  scenario: string
  connections: number
  proxy: Sample
  gateway: Sample
  /** Median time to the first streamed byte at 1 connection (streaming scenarios only). */
  ttfb_us?: { proxy: number; gateway: number }
}

export interface Target {
  name: string
  value: number
  limit: string
  met: boolean
}

const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits

export function evaluate(cells: Cell[]): Target[] {
  const targets: Target[] = []
  const at = (scenario: string, conns: number) => cells.find(cell => cell.scenario === scenario && cell.connections === conns)
  const ratio = (cell: Cell, key: 'rps' | 'cpu_us_per_request') => cell.gateway[key] / cell.proxy[key]
  for (const conns of [32, 128]) {
    const plain = at('nonstream-instant', conns)
    if (plain) {
      targets.push({ name: `non-stream throughput ÷ bare @${conns}`, value: round(ratio(plain, 'rps')), limit: '≥ 0.8', met: ratio(plain, 'rps') >= 0.8 })
      targets.push({ name: `non-stream CPU/request ÷ bare @${conns}`, value: round(ratio(plain, 'cpu_us_per_request')), limit: '≤ 1.5', met: ratio(plain, 'cpu_us_per_request') <= 1.5 })
    }
    const paced = at('stream-paced', conns)
    if (paced) targets.push({ name: `paced stream throughput ÷ bare @${conns}`, value: round(ratio(paced, 'rps')), limit: '≥ 0.9', met: ratio(paced, 'rps') >= 0.9 })
    const instant = at('stream-instant', conns)
    if (instant) targets.push({ name: `instant stream throughput ÷ bare @${conns}`, value: round(ratio(instant, 'rps')), limit: '≥ 0.6', met: ratio(instant, 'rps') >= 0.6 })
  }
  const single = at('nonstream-instant', 1)
  if (single) {
    const added = (single.gateway.p50_us - single.proxy.p50_us) / 1000
    targets.push({ name: 'added p50 @1 (ms, billing on)', value: round(added, 3), limit: '≤ 0.5', met: added <= 0.5 })
  }
  for (const scenario of ['stream-instant', 'stream-paced']) {
    const first = at(scenario, 1)?.ttfb_us
    if (first) {
      const added = (first.gateway - first.proxy) / 1000
      targets.push({ name: `added time to first byte @1, ${scenario} (ms)`, value: round(added, 3), limit: '≤ 0.5', met: added <= 0.5 })
    }
  }
  const peak = Math.max(0, ...cells.filter(cell => cell.connections === 128).map(cell => cell.gateway.peak_rss_mib))
  if (peak > 0) targets.push({ name: 'gateway peak RSS @128 (MiB)', value: peak, limit: '≤ 150', met: peak <= 150 })
  return targets
}

export function printTable(cells: Cell[], targets: Target[]): void {
  const rows = [
    '| scenario | conns | bare req/s | gateway req/s | ratio | bare p50 / p99 ms | gateway p50 / p99 ms | CPU µs/req bare / gw | ratio | gw peak RSS MiB |',
    '| - | -: | -: | -: | -: | -: | -: | -: | -: | -: |',
    ...cells.map(({ scenario, connections, proxy, gateway }) =>
      `| ${scenario} | ${connections} | ${proxy.rps.toFixed(0)} | ${gateway.rps.toFixed(0)} | ${(gateway.rps / proxy.rps).toFixed(2)} | ` +
      `${(proxy.p50_us / 1000).toFixed(2)} / ${(proxy.p99_us / 1000).toFixed(2)} | ${(gateway.p50_us / 1000).toFixed(2)} / ${(gateway.p99_us / 1000).toFixed(2)} | ` +
      `${proxy.cpu_us_per_request.toFixed(0)} / ${gateway.cpu_us_per_request.toFixed(0)} | ${(gateway.cpu_us_per_request / proxy.cpu_us_per_request).toFixed(2)} | ${gateway.peak_rss_mib} |`),
    '',
    '| target | value | limit | met |',
    '| - | -: | - | - |',
    ...targets.map(target => `| ${target.name} | ${target.value} | ${target.limit} | ${target.met ? 'yes' : '**no**'} |`),
  ]
  console.log(rows.join('\n'))
}
