import { describe, expect, test } from 'bun:test'
import { once } from 'node:events'
import { brotliCompressSync, constants, createBrotliCompress, deflateRawSync, gzipSync } from 'node:zlib'
import { createPlanOrg, json, type TestApp } from '../support/harness'
import { buildWebApp, stopsAfterEach } from '../support/fake-web'

// A search backend's content codings are decoded by the gateway under its answer cap
// (content-coding.ts, as for fetched pages). Before, Bun's fetch decoded them: ahead of the
// capped reader (a compression bomb from a hostile or compromised backend was inflated whatever
// the cap said), and only one layer of a stacked coding.

const CREDIT = 1_000_000_000n
const MiB = 1 << 20
// The search backend's answer cap (src/web/search.ts).
const CAP = 4 * MiB
let t: TestApp
const stops = stopsAfterEach(() => t)

/** A search backend on 127.0.0.1 answering each request with `answer()`, and what it was asked with. */
function backend(answer: () => Response) {
  const seen: Array<Record<string, string>> = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch(request) {
      seen.push(Object.fromEntries(request.headers))
      return answer()
    },
  })
  stops.push(() => server.stop(true))
  return { seen, base: `http://127.0.0.1:${server.port}` }
}

async function setup(kind: 'searxng' | 'brave', base: string) {
  const search = kind === 'brave' ? `{ backend: brave, api_key_env: TEST_BRAVE_KEY, base_url: "${base}" }` : `{ backend: searxng, base_url: "${base}" }`
  ;({ t } = await buildWebApp({ search }, { TEST_BRAVE_KEY: 'k' }))
  return createPlanOrg(t, { name: 'codings', credit: CREDIT })
}

const spent = async (orgId: string) => CREDIT - (await t.deps.balance(orgId)).prepaidNanos
const coded = (body: Uint8Array, encoding: string) => new Response(body, { headers: { 'content-type': 'application/json', 'content-encoding': encoding } })

/** JSON of `size` bytes or more (a results list padded with one long snippet) through `encoder`, streamed so the test never holds it whole. */
async function jsonBomb(encoder: ReturnType<typeof createBrotliCompress>, size: number): Promise<Buffer> {
  const parts: Buffer[] = []
  encoder.on('data', (part: Buffer) => parts.push(part))
  encoder.write('{"results":[{"url":"https://a.com/","title":"a","content":"')
  const run = Buffer.alloc(MiB, 0x61)
  for (let written = 0; written < size; written += MiB) if (!encoder.write(run)) await once(encoder, 'drain')
  encoder.end('"}]}')
  await once(encoder, 'end')
  return Buffer.concat(parts)
}

const ANSWER = { results: [{ url: 'https://bun.sh/', title: 'Bun', content: 'A fast runtime' }] }

describe('search backend content codings', () => {
  test.each([['searxng', 'gzip'], ['searxng', 'br'], ['brave', 'gzip'], ['brave', 'br']] as const)('%s: a %s bomb past the answer cap is refused as any answer over it, nothing billed', async (kind, encoding) => {
    const body = encoding === 'br'
      ? await jsonBomb(createBrotliCompress({ params: { [constants.BROTLI_PARAM_QUALITY]: 5 } }), 64 * MiB)
      // gzip members, each a MiB of `a`: one gzip stream (RFC 1952); the first holds the JSON's start.
      : Buffer.concat([gzipSync('{"results":[{"url":"https://a.com/","title":"a","content":"'), ...Array<Buffer>(64).fill(gzipSync(Buffer.alloc(MiB, 0x61)))])
    expect(body.byteLength).toBeLessThan(CAP / 16)
    const server = backend(() => coded(body, encoding))
    const { orgId, key } = await setup(kind, server.base)
    const response = await t.request('POST', '/api/v1/web/search', { key, body: { query: 'x' } })
    expect(response.status).toBe(502)
    expect((await json(response)).error).toMatchObject({ code: 'provider_error', message: expect.stringContaining(`the ${kind} search backend answered more than ${CAP} bytes`) })
    expect(await spent(orgId)).toBe(0n)
    expect(server.seen[0]!['accept-encoding']).toBe('gzip, deflate, br, zstd')
  }, 30_000)

  test('stacked codings and raw deflate are decoded as for pages; a coding the gateway does not decode is named', async () => {
    // Before: Bun decoded one layer of "gzip, br", and the answer was "not JSON"; raw deflate too.
    const answers = [
      () => coded(brotliCompressSync(gzipSync(JSON.stringify(ANSWER))), 'gzip, br'),
      () => coded(deflateRawSync(JSON.stringify(ANSWER)), 'deflate'),
      () => coded(gzipSync(gzipSync(gzipSync(JSON.stringify(ANSWER)))), 'gzip, gzip, gzip'),
      () => coded(new TextEncoder().encode(JSON.stringify(ANSWER)), 'compress'),
      () => coded(gzipSync(JSON.stringify(ANSWER)).subarray(0, 12), 'gzip'),
    ]
    let next = 0
    const server = backend(() => answers[next++]!())
    const { orgId, key } = await setup('searxng', server.base)
    const outcomes: Array<[number, string]> = []
    for (let index = 0; index < answers.length; index++) {
      const response = await t.request('POST', '/api/v1/web/search', { key, body: { query: 'x' } })
      const body = await json(response)
      outcomes.push([response.status, response.status === 200 ? body.results[0].title : body.error.message.split('; nothing was billed')[0]])
    }
    expect(outcomes).toEqual([
      [200, 'Bun'],
      [200, 'Bun'],
      [502, "the searxng search backend's answer is sent in 3 stacked content codings (gzip, gzip, gzip); at most 2 are decoded"],
      [502, `the searxng search backend's answer is sent in the content coding "compress", which this gateway does not decode (it asks for gzip, deflate, br, zstd)`],
      [502, expect.stringMatching(/^the searxng search backend's answer: its gzip content coding does not decode \(.+\): the body is corrupt or cut short$/)],
    ])
    expect(await spent(orgId)).toBe(2n * 5_000_000n)
  })
})
