/**
 * The gateway's own CPU per chat request without sockets: the app of any tree (`--tree`) in this
 * process, driven through `app.handle` by `--conns` concurrent callers, on a database file with
 * the bench's configuration (auth, limits, billing, info logging to a discarded stdout), with
 * `fetch` to the upstream answered in process by the mock's bodies. What is left is the
 * pipeline's JavaScript, the ledger's SQLite and GC, so a `--cpu-prof` profile of it is not
 * diluted by socket and HTTP work, and two trees compare without the HTTP layer's noise.
 * `--messages`: a streamed Anthropic Messages request to an Anthropic backend instead (its
 * stream in one network read, as a body of undeclared length; `--chunked`: one read per event).
 *
 *   bun bench/http/in-process.ts [--stream | --messages [--chunked]] [--tree DIR] [--conns 32] [--rounds 5] [--seconds 2]
 *   bun --cpu-prof --cpu-prof-dir=/tmp/prof bench/http/in-process.ts && bun bench/http/profile-summary.ts /tmp/prof/*.cpuprofile
 *
 * Prints process CPU µs per request of each round and their median (the callers' own Request
 * and Response objects are included: ~3 µs).
 */
import { resolve } from 'node:path'
import { anthropicFrames, mockBodies } from './mock-bodies'
import { appInProcess, type Upstreams } from './targets'

const argv = process.argv.slice(2)
const option = (name: string, fallback: string) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1]! : fallback)
const messages = argv.includes('--messages')
const chunked = argv.includes('--chunked')
const stream = argv.includes('--stream') || messages
const tree = resolve(option('tree', resolve(import.meta.dir, '../..')))
const conns = Number(option('conns', '32'))
const rounds = Number(option('rounds', '5'))
const seconds = Number(option('seconds', '2'))

const upstreamOrigin = 'http://upstream.invalid'
const anthropicOrigin = 'http://anthropic.invalid'
const { completion, frames } = mockBodies()
const sse = frames.join('')
const anthropic = anthropicFrames().map(frame => new TextEncoder().encode(frame))
const anthropicWhole = new TextEncoder().encode(anthropicFrames().join(''))

const realFetch = globalThis.fetch
globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
  if (String(input).startsWith(anthropicOrigin)) {
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        for (const piece of chunked ? anthropic : [anthropicWhole]) controller.enqueue(piece)
        controller.close()
      },
    })
    return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
  }
  if (!String(input).startsWith(upstreamOrigin)) return realFetch(input, init)
  // Declared, as the HTTP mock's instant stream is (Bun sends its length): the gateway reads it whole.
  if (stream) return new Response(sse, { headers: { 'content-type': 'text/event-stream', 'content-length': String(Buffer.byteLength(sse)) } })
  return new Response(completion, { headers: { 'content-type': 'application/json', 'content-length': String(completion.length) } })
}) as typeof fetch

const fake = { url: upstreamOrigin } as Upstreams['instant']
const { app, key, close } = await appInProcess({ instant: fake, paced: fake }, { tree, anthropic: { url: anthropicOrigin } })
// The request log goes nowhere (its cost, building and batching the lines, stays measured).
process.stdout.write = (() => true) as typeof process.stdout.write

const body = JSON.stringify({ model: messages ? 'bench-claude' : 'bench-instant', messages: [{ role: 'user', content: 'Say twenty words.' }], max_tokens: 64, stream })
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': String(body.length) }
const path = messages ? '/v1/messages' : '/v1/chat/completions'

async function round(ms: number): Promise<number> {
  let count = 0
  const end = performance.now() + ms
  const before = process.cpuUsage()
  await Promise.all(
    Array.from({ length: conns }, async () => {
      while (performance.now() < end) {
        const response = await app.handle(new Request(`http://gateway.local${path}`, { method: 'POST', headers, body }))
        await response.arrayBuffer()
        if (response.status !== 200) throw new Error(`status ${response.status}`)
        count += 1
      }
    }),
  )
  const used = process.cpuUsage(before)
  return (used.user + used.system) / count
}

await round(1000) // warm-up: JIT, lease growth
const results: number[] = []
for (let index = 0; index < rounds; index += 1) results.push(await round(seconds * 1000))
const sorted = [...results].sort((a, b) => a - b)
console.error(
  `${messages ? `messages stream${chunked ? ', chunked' : ''}` : stream ? 'stream' : 'non-stream'} ${tree}: median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} µs/request ` +
    `(${results.map(value => value.toFixed(1)).join(' ')}), rss ${(process.memoryUsage().rss / 1048576).toFixed(0)} MiB`,
)
await close()
process.exit(0)
