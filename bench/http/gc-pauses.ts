/**
 * Garbage collection per request in the gateway as `svc serve` runs it, under load: the bytes
 * JavaScriptCore counts toward its collections, and the pauses of its eden and full collections.
 * The gateway alone runs with `BUN_JSC_logGC=1`, its standard error going to a file that is read
 * between the measured runs. gc-bytes.ts measures the app in process (steadier bytes, no
 * sockets); this one measures the real server, where the pauses are what the main thread loses.
 *
 *   bun bench/http/gc-pauses.ts [--scenario nonstream|stream|messages|messages-stream] [--conns 32]
 *                               [--seconds 3] [--rounds 3] [--tree DIR]
 *
 * Prints one line per round: KiB per request, eden and full collections with their pause per
 * request (µs), requests. At 32 connections an instant stream pays ~4 µs (bench/README.md,
 * "What the ledger's batch costs every request").
 */
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { measure } from './drive'
import { removeDir, scenarioRequest, startGateway, startUpstreams } from './targets'

const argv = process.argv.slice(2)
const option = (name: string, fallback: string) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1]! : fallback)
const scenario = option('scenario', 'stream')
const conns = Number(option('conns', '32'))
const seconds = Number(option('seconds', '3'))
const rounds = Number(option('rounds', '3'))
const tree = option('tree', '') || undefined
const request = scenarioRequest(scenario)

/** What the log says so far: bytes allocated, and each kind's collections and pause milliseconds. */
function totals(log: string) {
  const text = readFileSync(log, 'utf8')
  const sum = { bytes: 0, eden: 0, full: 0, edenMs: 0, fullMs: 0 }
  for (const match of text.matchAll(/bytes allocated this cycle: (\d+)/g)) sum.bytes += Number(match[1])
  for (const match of text.matchAll(/=> (Eden|Full)Collection.*?p=([\d.]+)ms/g)) {
    if (match[1] === 'Eden') (sum.eden += 1), (sum.edenMs += Number(match[2]))
    else (sum.full += 1), (sum.fullMs += Number(match[2]))
  }
  return sum
}

const upstreams = await startUpstreams()
const logDir = mkdtempSync(join(tmpdir(), 'svc-gc-pauses-'))
const log = join(logDir, 'gc.log')
const gateway = await startGateway(upstreams, { tree: tree && resolve(tree), env: { BUN_JSC_logGC: '1' }, stderr: log })
try {
  const load = {
    url: `${gateway.process.url}${request.path}`,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${gateway.key}` },
    body: request.body,
    connections: conns,
  }
  // Warm-up: the JIT and the heap's sizing settle in the first seconds under load.
  await measure(gateway.dir, gateway.process.pid, { ...load, seconds: 4 })
  console.log(`${scenario}, ${conns} connections, ${tree ?? 'this tree'}`)
  for (let round = 0; round < rounds; round++) {
    const before = totals(log)
    const sample = await measure(gateway.dir, gateway.process.pid, { ...load, seconds })
    await Bun.sleep(200)
    const after = totals(log)
    const per = (ms: number) => ((ms * 1000) / sample.requests).toFixed(2)
    console.log(
      `  ${((after.bytes - before.bytes) / sample.requests / 1024).toFixed(1)} KiB/request, ` +
        `eden ${after.eden - before.eden} (pause ${per(after.edenMs - before.edenMs)} µs/request), ` +
        `full ${after.full - before.full} (pause ${per(after.fullMs - before.fullMs)} µs/request), ${sample.requests} requests${sample.errors ? `, ${sample.errors} errors` : ''}`,
    )
  }
} finally {
  gateway.process.kill()
  upstreams.instant.kill()
  upstreams.paced.kill()
  await gateway.exited
  removeDir(gateway.dir)
  removeDir(logDir)
}
