/**
 * Drives one target with wrk (or the Bun load generator when wrk is missing) and samples the
 * target process: CPU time from /proc/<pid>/stat (all threads) and resident memory from
 * /proc/<pid>/status while the load runs.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface Load {
  url: string
  headers: Record<string, string>
  body: string
  connections: number
  seconds: number
  /** Requests per second for all connections together (Bun load generator only); unset = as fast as possible. */
  rate?: number
}

export interface Sample {
  requests: number
  errors: number
  rps: number
  p50_us: number
  p99_us: number
  cpu_us_per_request: number
  /**
   * The JavaScript thread's share: what bounds the gateway's throughput (its fetch, GC and
   * libSQL threads run beside it), so the finer measure of a change to the request path.
   */
  main_thread_us_per_request: number
  peak_rss_mib: number
}

const TICKS_PER_SECOND = 100 // Linux USER_HZ

export const haveWrk = Bun.which('wrk') !== null

/** CPU ticks of a process (all threads), or of its main thread alone (`/proc/<pid>/task/<pid>`). */
function cpuTicks(pid: number, mainThread = false): number {
  const fields = readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after "pid (comm) ".
  return Number(fields[11]) + Number(fields[12])
}

export function rssMiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return match ? Number(match[1]) / 1024 : 0
}

function wrkScript(dir: string, load: Load): string {
  const path = join(dir, 'wrk.lua')
  const headers = Object.entries(load.headers).map(([name, value]) => `wrk.headers[${JSON.stringify(name)}] = ${JSON.stringify(value)}`)
  writeFileSync(
    path,
    [
      'wrk.method = "POST"',
      `wrk.body = ${JSON.stringify(load.body)}`,
      ...headers,
      'done = function(summary, latency, requests)',
      '  local e = summary.errors',
      '  io.write(string.format(\'{"requests":%d,"seconds":%f,"errors":%d,"non2xx":%d,"p50_us":%d,"p99_us":%d}\\n\',',
      '    summary.requests, summary.duration / 1e6, e.connect + e.read + e.write + e.timeout, e.status,',
      '    latency:percentile(50), latency:percentile(99)))',
      'end',
    ].join('\n'),
  )
  return path
}

async function runTool(dir: string, load: Load, useWrk: boolean): Promise<{ requests: number; seconds: number; errors: number; non2xx: number; p50_us: number; p99_us: number }> {
  const command = useWrk
    ? ['wrk', '-t', '1', '-c', String(load.connections), '-d', `${Math.max(1, Math.round(load.seconds))}s`, '--timeout', '30s', '-s', wrkScript(dir, load), load.url]
    : ['bun', join(import.meta.dir, 'loadgen.ts'), JSON.stringify(load)]
  const child = Bun.spawn(command, { stdout: 'pipe', stderr: 'pipe' })
  const out = await new Response(child.stdout).text()
  await child.exited
  const line = out.split('\n').reverse().find(candidate => candidate.startsWith('{"requests"'))
  if (!line) throw new Error(`load generator gave no result: ${out} ${await new Response(child.stderr).text()}`)
  return JSON.parse(line)
}

/** One measured run against one target process. */
export async function measure(dir: string, pid: number, load: Load, useWrk = haveWrk): Promise<Sample> {
  let peak = rssMiB(pid)
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 50)
  const before = cpuTicks(pid)
  const mainBefore = cpuTicks(pid, true)
  const result = await runTool(dir, load, useWrk)
  const ticks = cpuTicks(pid) - before
  const mainTicks = cpuTicks(pid, true) - mainBefore
  clearInterval(sampler)
  peak = Math.max(peak, rssMiB(pid))
  return {
    requests: result.requests,
    errors: result.errors + result.non2xx,
    rps: result.requests / result.seconds,
    p50_us: result.p50_us,
    p99_us: result.p99_us,
    cpu_us_per_request: result.requests > 0 ? (ticks * 1e6) / TICKS_PER_SECOND / result.requests : 0,
    main_thread_us_per_request: result.requests > 0 ? (mainTicks * 1e6) / TICKS_PER_SECOND / result.requests : 0,
    peak_rss_mib: Math.round(peak * 10) / 10,
  }
}

/** Time to the first streamed byte at one connection, from the Bun probe. */
export async function firstByte(load: Load, requests: number): Promise<{ ttfb_p50_us: number; ttfb_p99_us: number; p50_us: number }> {
  const child = Bun.spawn(['bun', join(import.meta.dir, 'loadgen.ts'), JSON.stringify({ ...load, ttfb: requests })], { stdout: 'pipe', stderr: 'inherit' })
  const out = await new Response(child.stdout).text()
  await child.exited
  return JSON.parse(out.trim().split('\n').pop()!)
}
