/**
 * A Bun load generator: the fallback when wrk is not installed, and the time-to-first-byte probe
 * (wrk measures whole responses only). Run as its own process so its CPU never counts against a
 * target. Args (JSON in argv[2]): {url, headers, body, connections, seconds, ttfb?: number}.
 * With `ttfb: N`, sends N requests one after another and reports time to the first body byte.
 * With `rate: R`, the connections together send at most R requests per second (each paced to
 * its share), so two targets compared A/B do the same work per second (bench/http/ab.ts).
 * Prints one JSON line: {requests, errors, non2xx, seconds, p50_us, p99_us, ttfb_p50_us?, ttfb_p99_us?}.
 */

interface Args {
  url: string
  headers: Record<string, string>
  body: string
  connections: number
  seconds: number
  ttfb?: number
  rate?: number
}

const args = JSON.parse(process.argv[2]!) as Args
const latencies: number[] = []
const firstBytes: number[] = []
let errors = 0
let non2xx = 0

async function once(recordFirstByte: boolean): Promise<void> {
  const started = performance.now()
  try {
    const response = await fetch(args.url, { method: 'POST', headers: args.headers, body: args.body })
    if (response.status < 200 || response.status > 299) non2xx++
    const reader = response.body!.getReader()
    let first = true
    for (;;) {
      const { done } = await reader.read()
      if (first && recordFirstByte) firstBytes.push((performance.now() - started) * 1000)
      first = false
      if (done) break
    }
    latencies.push((performance.now() - started) * 1000)
  } catch {
    errors++
  }
}

const percentile = (values: number[], p: number) => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!)
}

const started = performance.now()
if (args.ttfb) {
  for (let i = 0; i < args.ttfb; i++) await once(true)
} else {
  const deadline = started + args.seconds * 1000
  await Promise.all(
    Array.from({ length: args.connections }, async (_, connection) => {
      // Paced: connection i sends at start + (i + k × connections) / rate; late sends go at once.
      const gapMs = args.rate ? (1000 * args.connections) / args.rate : 0
      let next = started + (gapMs * connection) / args.connections
      while (performance.now() < deadline) {
        if (gapMs > 0) {
          const wait = next - performance.now()
          if (wait > 0) await Bun.sleep(wait)
          next += gapMs
          if (performance.now() >= deadline) break
        }
        await once(false)
      }
    }),
  )
}
const seconds = (performance.now() - started) / 1000
console.log(
  JSON.stringify({
    requests: latencies.length,
    errors,
    non2xx,
    seconds,
    p50_us: percentile(latencies, 50),
    p99_us: percentile(latencies, 99),
    ...(args.ttfb ? { ttfb_p50_us: percentile(firstBytes, 50), ttfb_p99_us: percentile(firstBytes, 99) } : {}),
  }),
)
export {}
