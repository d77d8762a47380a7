import { describe, expect, test } from 'bun:test'
import { createPlanOrg, json, type TestApp } from '../support/harness'
import { buildWebApp, type FakeResolver } from '../support/fake-web'
import { CREDIT, PRICE, webFetchTools } from '../support/web-fetch'

// What a fetched page may be, through the HTTP route: size caps and deadlines that cut it,
// content types and charsets, each with what is billed.

let t: TestApp
let resolver: FakeResolver
const { serve, spent, fetchUrls, page, expectRefused } = webFetchTools(() => t)

async function setup(extra: Parameters<typeof buildWebApp>[0] = {}) {
  ;({ t, resolver } = await buildWebApp(extra))
  return createPlanOrg(t, { name: 'ssrf', keyName: 'web', credit: CREDIT })
}

describe('caps and content types', () => {
  test('a page longer than max_bytes is cut at the cap (a compression bomb included)', async () => {
    const { key } = await setup()
    const bomb = Bun.gzipSync(new Uint8Array(50_000_000).fill(0x61))
    const site = serve((_, url) =>
      url.pathname === '/bomb'
        ? new Response(bomb, { headers: { 'content-type': 'text/plain', 'content-encoding': 'gzip' } })
        : new Response('b'.repeat(200_000), { headers: { 'content-type': 'text/plain' } }),
    )
    resolver.set('big.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://big.acme-web.com:${site.port}/bomb`, `http://big.acme-web.com:${site.port}/long`])
    expect(response.status).toBe(200)
    const { results } = await json(response)
    expect(results[0].content.length).toBe(65_536)
    expect(results[1].content.length).toBe(65_536)
  }, 20_000) // compressing 50 MB takes a few seconds on a loaded machine

  test('the text caps never cut a surrogate pair in half', async () => {
    // Before: max_content_chars 500 on "a" + 300 emoji ended in a lone "\ud83d" (strict JSON parsers and tokenizers refuse it).
    const { key } = await setup({ fetch: 'max_content_chars: 500' })
    const text = `a${'😀'.repeat(300)}`
    const site = serve((_, url) =>
      url.pathname === '/page.html'
        ? new Response(`<title>${'😀'.repeat(600)}</title><p>${text}</p>`, { headers: { 'content-type': 'text/html; charset=utf-8' } })
        : new Response(text, { headers: { 'content-type': 'text/plain; charset=utf-8' } }),
    )
    resolver.set('emoji.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://emoji.acme-web.com:${site.port}/page.txt`, `http://emoji.acme-web.com:${site.port}/page.html`])
    expect(response.status).toBe(200)
    const { results } = await json(response)
    expect(results[0].content).toBe(`a${'😀'.repeat(249)}`)
    expect(results[1].content).toBe(`a${'😀'.repeat(249)}`)
    // The title's own cap (1000 units) too.
    expect(results[1].title).toBe('😀'.repeat(500))
    expect(results[1].title.isWellFormed()).toBe(true)
  })

  test('a page cut at max_bytes inside a UTF-8 character drops the partial character; a page that ends there is read as it is', async () => {
    // Before: the cut page ended in U+FFFD, a character the page does not hold.
    const { key } = await setup({ fetch: 'max_bytes: 1024' })
    const site = serve((_, url) =>
      new Response(url.pathname === '/cut' ? `ab${'€'.repeat(1000)}` : new Uint8Array([...new Uint8Array(1023).fill(0x61), 0xe2]), { headers: { 'content-type': 'text/plain; charset=utf-8' } }),
    )
    resolver.set('euro.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://euro.acme-web.com:${site.port}/cut`, `http://euro.acme-web.com:${site.port}/whole`])
    expect(response.status).toBe(200)
    const { results } = await json(response)
    // 2 + 340 × 3 = 1022 bytes, then 2 of the next € cut off.
    expect(results[0].content).toBe(`ab${'€'.repeat(340)}`)
    // Exactly 1024 bytes, not cut: its own malformed last byte is still U+FFFD.
    expect(results[1].content).toBe(`${'a'.repeat(1023)}\ufffd`)
  })

  test('a page that does not answer in time is a 502 that bills nothing and says not to retry', async () => {
    const { orgId, key } = await setup({ fetch: 'timeout_ms: 200' })
    const site = serve(() => new Promise<Response>(() => {}))
    resolver.set('slow.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://slow.acme-web.com:${site.port}/`])
    expect(response.status).toBe(502)
    const error = (await json(response)).error
    expect(error.code).toBe('provider_error')
    expect(error.message).toContain('did not answer within 200 ms')
    expect(error.message).toContain('do not retry automatically')
    expect(await spent(orgId)).toBe(0n)
  })

  test('a server that accepts but sends no headers is cut by the connect / first-byte deadline', async () => {
    const { orgId, key } = await setup({ fetch: 'timeout_ms: 5000, connect_timeout_ms: 150' })
    const site = serve(() => new Promise<Response>(() => {}))
    resolver.set('slow.acme-web.com', ['127.0.0.1'])
    const started = performance.now()
    const response = await fetchUrls(key, [`http://slow.acme-web.com:${site.port}/`])
    expect(response.status).toBe(502)
    expect((await json(response)).error.message).toContain('did not start answering within 150 ms')
    expect(performance.now() - started).toBeLessThan(2000)
    expect(await spent(orgId)).toBe(0n)
  })

  test('a page that stalls mid-body is cut by the total deadline (the first-byte one no longer applies)', async () => {
    // The first-byte deadline is generous enough for a loaded machine's local server to answer;
    // the total one is what cuts the stalled body.
    const { orgId, key } = await setup({ fetch: 'timeout_ms: 1200, connect_timeout_ms: 600' })
    const site = serve(() => new Response(new ReadableStream({ start(controller) { controller.enqueue(new TextEncoder().encode('<p>partial')) } }), { headers: { 'content-type': 'text/html' } }))
    resolver.set('drip.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://drip.acme-web.com:${site.port}/`])
    expect(response.status).toBe(502)
    expect((await json(response)).error.message).toContain('did not answer within 1200 ms')
    expect(await spent(orgId)).toBe(0n)
  })

  test.each([
    ['an image', 'image/png'],
    ['an archive', 'application/zip'],
    ['no content type', ''],
    ['JavaScript', 'text/javascript'],
  ])('%s is refused as not text-like, and not billed', async (_, type) => {
    const { orgId, key } = await setup()
    const site = serve(() => new Response(new Uint8Array([0x89, 0x50, 0x4e, 0x47]), { headers: type ? { 'content-type': type } : {} }))
    resolver.set('files.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://files.acme-web.com:${site.port}/x`])
    await expectRefused(response, orgId, 'only HTML, plain text, JSON, JSON Lines, XML, YAML, TOML and PDF')
  })

  test('a PDF page is read through the document extraction pool and billed as one page', async () => {
    const { orgId, key } = await setup()
    const pdf = await Bun.file(new URL('../fixtures/documents/report.pdf', import.meta.url)).bytes()
    const site = serve(() => new Response(pdf, { headers: { 'content-type': 'application/pdf', 'last-modified': 'Tue, 03 Nov 2026 10:00:00 GMT' } }))
    resolver.set('docs.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://docs.acme-web.com:${site.port}/report.pdf`])
    expect(response.status).toBe(200)
    const [result] = (await json(response)).results
    expect(result.content).toContain('Quarterly report — Zürich office')
    expect(result.last_updated).toBe('2026-11-03T10:00:00.000Z')
    expect(await spent(orgId)).toBe(PRICE)
    // A cold extraction worker starts within ~1-2 s idle, ~5 s with the machine's cores busy.
  }, 30_000)

  test('a PDF of exactly max_bytes is read; one byte more is refused, and not billed', async () => {
    // Before: a PDF of exactly max_bytes was refused as "larger than the page limit".
    const pdf = await Bun.file(new URL('../fixtures/documents/report.pdf', import.meta.url)).bytes()
    const { orgId, key } = await setup({ fetch: `max_bytes: ${pdf.byteLength}` })
    const site = serve((_, url) => new Response(url.pathname === '/exact.pdf' ? pdf : new Uint8Array([...pdf, 0x0a]), { headers: { 'content-type': 'application/pdf' } }))
    resolver.set('docs.acme-web.com', ['127.0.0.1'])
    const exact = await fetchUrls(key, [`http://docs.acme-web.com:${site.port}/exact.pdf`])
    expect(exact.status).toBe(200)
    expect((await json(exact)).results[0].content).toContain('Quarterly report — Zürich office')
    expect(await spent(orgId)).toBe(PRICE)
    const over = await fetchUrls(key, [`http://docs.acme-web.com:${site.port}/over.pdf`])
    expect(over.status).toBe(400)
    expect((await json(over)).error.message).toContain(`the PDF is larger than the ${pdf.byteLength}-byte page limit`)
    expect(await spent(orgId)).toBe(PRICE)
  }, 30_000)

  test('bytes labelled application/pdf that are not a readable PDF are refused, and not billed', async () => {
    const { orgId, key } = await setup()
    const site = serve(() => new Response(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), { headers: { 'content-type': 'application/pdf' } }))
    resolver.set('fake.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://fake.acme-web.com:${site.port}/x.pdf`])
    expect(response.status).toBe(400)
    expect((await json(response)).error.message).toContain('fake.acme-web.com')
    expect(await spent(orgId)).toBe(0n)
  })

  test('binary bytes labelled as text or HTML are refused, not returned as text, and not billed', async () => {
    // Before: a mislabelled binary came back as "\u0000\u0001…" content, billed as a page.
    const { orgId, key } = await setup()
    const binary = new Uint8Array(4096).map((_, index) => (index * 7919) % 256)
    const site = serve((_request, url) => new Response(binary, { headers: { 'content-type': url.pathname === '/a.html' ? 'text/html' : 'text/plain' } }))
    resolver.set('bin.acme-web.com', ['127.0.0.1'])
    for (const path of ['/a.txt', '/a.html']) {
      const response = await fetchUrls(key, [`http://bin.acme-web.com:${site.port}${path}`])
      expect(response.status).toBe(400)
      const error = (await json(response)).error
      expect(error.code).toBe('invalid_request')
      expect(error.message).toContain('binary')
    }
    expect(await spent(orgId)).toBe(0n)
  })

  test('an upstream error status is a 502; with another page retrieved, that page alone is billed', async () => {
    const { orgId, key } = await setup()
    const site = serve((_, url) => (url.pathname === '/ok' ? page('fine') : new Response('boom', { status: 500, headers: { 'content-type': 'text/plain' } })))
    resolver.set('mixed.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://mixed.acme-web.com:${site.port}/ok`, `http://mixed.acme-web.com:${site.port}/fail`])
    expect(response.status).toBe(502)
    const error = (await json(response)).error
    expect(error).toMatchObject({ code: 'provider_error', param: 'urls.1' })
    expect(error.message).toContain('HTTP 500')
    expect(error.message).toContain('1 of 2 pages were retrieved and billed')
    expect(await spent(orgId)).toBe(PRICE)
  })

  test('legacy charsets are decoded from the header or the page', async () => {
    const { key } = await setup()
    const latin1 = new Uint8Array([0x3c, 0x70, 0x3e, 0x63, 0x61, 0x66, 0xe9, 0x3c, 0x2f, 0x70, 0x3e]) // <p>café</p> in ISO-8859-1
    const site = serve(() => new Response(latin1, { headers: { 'content-type': 'text/html; charset=iso-8859-1' } }))
    resolver.set('old.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://old.acme-web.com:${site.port}/`])
    expect((await json(response)).results[0].content).toBe('café')
  })

  test('a header charset no encoding answers to counts as none: the page\'s <meta> decides', async () => {
    // Before: `charset=bogus-label` was taken as the encoding, failed, and the windows-1251 page came out as U+FFFD.
    const { key } = await setup()
    const cyrillic = Buffer.from([0xcf, 0xf0, 0xe8, 0xe2, 0xe5, 0xf2, 0x20, 0xec, 0xe8, 0xf0]) // Привет мир in windows-1251
    const page = Buffer.concat([Buffer.from('<html><head><meta charset="windows-1251"></head><body><p>'), cyrillic, Buffer.from('</p></body></html>')])
    const site = serve(() => new Response(page, { headers: { 'content-type': 'text/html; charset=bogus-label' } }))
    resolver.set('label.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, [`http://label.acme-web.com:${site.port}/`])
    expect((await json(response)).results[0].content).toBe('Привет мир')
  })

  test('a <meta> declaring UTF-16 means UTF-8 and x-user-defined means windows-1252; a header charset=utf-16 is honoured', async () => {
    // Before: an ASCII page whose <meta charset> said utf-16 was decoded as UTF-16 (CJK mojibake), and billed.
    // A prescan that read the meta as ASCII proves the page is not UTF-16 (WHATWG HTML, prescan).
    const { key } = await setup()
    const latin = (text: string) => Buffer.from(text, 'latin1')
    const pages: Record<string, Response> = {
      '/meta': new Response('<html><head><meta charset="utf-16"><title>Hello</title></head><body><p>Plain ASCII page</p></body></html>', { headers: { 'content-type': 'text/html' } }),
      '/equiv': new Response('<meta http-equiv="Content-Type" content="text/html; charset=UTF-16BE"><p>caf\u00e9 in UTF-8</p>', { headers: { 'content-type': 'text/html' } }),
      '/unicode': new Response('<meta charset=unicode><p>utf-16le alias</p>', { headers: { 'content-type': 'text/html' } }),
      '/user-defined': new Response(latin('<meta charset="x-user-defined"><p>caf\u00e9 \u0080</p>'), { headers: { 'content-type': 'text/html' } }),
      '/header': new Response(Buffer.from('hello in UTF-16LE', 'utf16le'), { headers: { 'content-type': 'text/plain; charset=utf-16' } }),
    }
    const site = serve((_request, url) => pages[url.pathname]!)
    resolver.set('meta.acme-web.com', ['127.0.0.1'])
    const read = async (paths: string[]) => {
      const response = await fetchUrls(key, paths.map(path => `http://meta.acme-web.com:${site.port}${path}`))
      return (await json(response)).results.map((result: { title: string; content: string }) => `${result.title} | ${result.content}`)
    }
    const untitled = (path: string, content: string) => `meta.acme-web.com:${site.port}${path} | ${content}`
    expect(await read(['/meta', '/equiv', '/unicode'])).toEqual(['Hello | Plain ASCII page', untitled('/equiv', 'café in UTF-8'), untitled('/unicode', 'utf-16le alias')])
    // windows-1252: 0xe9 is é and 0x80 the euro sign (x-user-defined would map them to U+F7xx).
    expect(await read(['/user-defined', '/header'])).toEqual([untitled('/user-defined', 'café €'), untitled('/header', 'hello in UTF-16LE')])
  })

  test('a byte order mark decides the encoding, over the header and the default (WHATWG decode)', async () => {
    // Before: a UTF-16 text page without a charset came back as UTF-8 mojibake with NULs, and billed.
    const { key } = await setup()
    const pages: Record<string, Response> = {
      '/le': new Response(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('hello from UTF-16LE', 'utf16le')]), { headers: { 'content-type': 'text/plain' } }),
      '/be': new Response(Buffer.from([0xfe, 0xff, ...Buffer.from('<p>hello from UTF-16BE</p>', 'utf16le').swap16()]), { headers: { 'content-type': 'text/html' } }),
      '/utf8': new Response(Buffer.from('\ufeff<p>café, says the BOM</p>'), { headers: { 'content-type': 'text/html; charset=iso-8859-1' } }),
    }
    const site = serve((_request, url) => pages[url.pathname]!)
    resolver.set('bom.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(key, ['/le', '/be', '/utf8'].map(path => `http://bom.acme-web.com:${site.port}${path}`))
    expect((await json(response)).results.map((result: { content: string }) => result.content)).toEqual(['hello from UTF-16LE', 'hello from UTF-16BE', 'café, says the BOM'])
  })
})
