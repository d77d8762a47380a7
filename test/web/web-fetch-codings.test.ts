import { describe, expect, test } from 'bun:test'
import { once } from 'node:events'
import type { Transform } from 'node:stream'
import { brotliCompressSync, constants, createBrotliCompress, createZstdCompress, deflateRawSync, deflateSync, gzipSync, zstdCompressSync } from 'node:zlib'
import { createPlanOrg, json, type TestApp } from '../support/harness'
import { buildWebApp, type FakeResolver } from '../support/fake-web'
import { CREDIT, PRICE, webFetchTools } from '../support/web-fetch'

// A page's content codings are decoded by the gateway under the byte cap. Before, Bun's fetch
// inflated ahead of the capped reader: a 2.4 KB brotli or 49 KB zstd body held 1–2.4 GB of the
// gateway's memory, whatever max_bytes said (QA).

let t: TestApp
let resolver: FakeResolver
const { serve, spent, fetchUrls, expectRefused } = webFetchTools(() => t)

async function setup(extra: Parameters<typeof buildWebApp>[0] = {}) {
  ;({ t, resolver } = await buildWebApp(extra))
  return createPlanOrg(t, { name: 'codings', keyName: 'web', credit: CREDIT })
}

const MiB = 1 << 20
// A run of one letter compresses as a run of spaces does, and shows where the page was cut.
const RUN = Buffer.alloc(MiB, 0x61)

/** `RUN` `times` over through a streaming compressor: the bomb's text is never held whole here, so the test's own memory stays flat. */
async function bomb(encoder: Transform, times: number): Promise<Buffer> {
  const parts: Buffer[] = []
  encoder.on('data', (part: Buffer) => parts.push(part))
  for (let index = 0; index < times; index += 1) if (!encoder.write(RUN)) await once(encoder, 'drain')
  encoder.end()
  await once(encoder, 'end')
  return Buffer.concat(parts)
}

const text = (body: string | Uint8Array, encoding: string) => new Response(body, { headers: { 'content-type': 'text/plain', 'content-encoding': encoding } })

describe('content codings', () => {
  test('brotli, zstd and gzip bombs of 1 GiB each are cut at max_bytes without being inflated', async () => {
    const { orgId, key } = await setup()
    const bodies: Record<string, Buffer> = {
      br: await bomb(createBrotliCompress({ params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_SIZE_HINT]: 1024 * MiB } }), 1024),
      zstd: await bomb(createZstdCompress(), 1024),
      // 1024 gzip members, each a MiB of spaces: one gzip stream as RFC 1952 defines it.
      gzip: Buffer.concat(Array<Buffer>(1024).fill(gzipSync(RUN, { level: 9 }))),
    }
    expect(bodies.br!.byteLength).toBeLessThan(4096)
    const site = serve((_, url) => (url.pathname === '/ping' ? new Response('pong') : text(bodies[url.pathname.slice(1)]!, url.pathname.slice(1))))
    resolver.set('bomb.acme-web.com', ['127.0.0.1'])
    Bun.gc(true)
    const before = process.memoryUsage().rss
    const response = await fetchUrls(key, ['br', 'zstd', 'gzip'].map(coding => `http://bomb.acme-web.com:${site.port}/${coding}`))
    // Before the fix, Bun's fetch went on inflating a bomb on its HTTP thread after the body was
    // cancelled. That thread serves one socket event at a time: a request through it completes
    // only once the inflation queued before it is done (measured on the old code: +0.6–1.3 GB here).
    await (await fetch(`http://127.0.0.1:${site.port}/ping`)).text()
    const grown = process.memoryUsage().rss - before
    expect(response.status).toBe(200)
    const { results } = await json(response)
    expect(results.map((result: { content: string }) => result.content.length)).toEqual([65_536, 65_536, 65_536])
    expect(grown).toBeLessThan(200 * MiB)
    expect(await spent(orgId)).toBe(3n * PRICE)
    expect(site.seen[0]!.headers['accept-encoding']).toBe('gzip, deflate, br, zstd')
  }, 30_000)

  test('a long coded page is cut at max_bytes, not refused; a short one is read whole', async () => {
    const { key } = await setup({ fetch: 'max_bytes: 1024' })
    const long = 'word '.repeat(1000)
    const site = serve((_, url) => text(url.pathname === '/long' ? brotliCompressSync(long) : zstdCompressSync('short page'), url.pathname === '/long' ? 'br' : 'zstd'))
    resolver.set('cut.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://cut.acme-web.com:${site.port}/long`, `http://cut.acme-web.com:${site.port}/short`])
    expect(response.status).toBe(200)
    const { results } = await json(response)
    expect(results[0].content).toBe(long.slice(0, 1024).trimEnd())
    expect(results[1].content).toBe('short page')
  })

  test('stacked codings are decoded layer by layer; raw deflate and x-gzip are read as browsers read them', async () => {
    // Before: Bun decoded one layer of "gzip, br", and the page was a 502 (binary data).
    const { key } = await setup()
    const pages: Record<string, () => Response> = {
      '/stacked': () => text(brotliCompressSync(gzipSync('two layers')), 'gzip, br'),
      '/deflate': () => text(deflateSync('zlib deflate'), 'deflate'),
      '/raw': () => text(deflateRawSync('raw deflate'), 'deflate'),
      '/x-gzip': () => text(gzipSync('old name'), 'X-Gzip, identity'),
    }
    const site = serve((_, url) => pages[url.pathname]!())
    resolver.set('layers.acme-web.com', ['127.0.0.1'])
    const contents: string[] = []
    for (const paths of [['/stacked', '/deflate', '/raw'], ['/x-gzip']]) {
      const response = await fetchUrls(key, paths.map(path => `http://layers.acme-web.com:${site.port}${path}`))
      expect(response.status).toBe(200)
      contents.push(...(await json(response)).results.map((result: { content: string }) => result.content))
    }
    expect(contents).toEqual(['two layers', 'zlib deflate', 'raw deflate', 'old name'])
  })

  test('a coding the gateway does not decode, or too many stacked, is refused naming them, and not billed', async () => {
    const { orgId, key } = await setup()
    const site = serve((_, url) => text(url.pathname === '/compress' ? 'x' : gzipSync(gzipSync(gzipSync('deep'))), url.pathname === '/compress' ? 'compress' : 'gzip, gzip, gzip'))
    resolver.set('odd.acme-web.com', ['127.0.0.1'])
    await expectRefused(await fetchUrls(key, [`http://odd.acme-web.com:${site.port}/compress`]), orgId, 'the content coding "compress", which this gateway does not decode')
    await expectRefused(await fetchUrls(key, [`http://odd.acme-web.com:${site.port}/deep`]), orgId, '3 stacked content codings (gzip, gzip, gzip); at most 2 are decoded')
  })

  test('a coded body that does not decode is a 502 naming the coding, and not billed', async () => {
    const { orgId, key } = await setup()
    const site = serve(() => text(gzipSync('cut short').subarray(0, 12), 'gzip'))
    resolver.set('broken.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://broken.acme-web.com:${site.port}/`])
    expect(response.status).toBe(502)
    expect((await json(response)).error.message).toContain('its gzip content coding does not decode')
    expect(await spent(orgId)).toBe(0n)
  })

  test('a compressed PDF is decoded, then read by the extraction pool', async () => {
    const { orgId, key } = await setup()
    const pdf = await Bun.file(new URL('../fixtures/documents/report.pdf', import.meta.url)).bytes()
    const site = serve(() => new Response(zstdCompressSync(pdf), { headers: { 'content-type': 'application/pdf', 'content-encoding': 'zstd' } }))
    resolver.set('docs.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://docs.acme-web.com:${site.port}/report.pdf`])
    expect(response.status).toBe(200)
    expect((await json(response)).results[0].content).toContain('Quarterly report — Zürich office')
    expect(await spent(orgId)).toBe(PRICE)
    // A cold extraction worker starts within ~1-2 s idle, ~5 s with the machine's cores busy.
  }, 30_000)
})
