import { afterEach, describe, expect, test } from 'bun:test'
import { ExtractionError, type ExtractorPool } from '../../src/documents/types'
import { heldExtractor, parseCharges as documentCharges } from '../support/documents'
import { buildTestApp, json, type TestApp, type TestOrg } from '../support/harness'
import { verifyClean } from '../ledger/fixtures'
import { fixture, honestZipBomb, lyingZipBomb, plainZip, PNG } from './hostile'

// POST /api/v1/attachments/parse through app.handle with the real worker pool (spec §4.8).

const PRICE = 1_000_000n // the default documents.price_per_parse, 0.001 USD
let t: TestApp
afterEach(() => t?.close())

function form(...parts: Array<[string, Blob | string, string?]>): FormData {
  const data = new FormData()
  for (const [name, value, filename] of parts) {
    if (typeof value === 'string') data.append(name, value)
    else data.append(name, value, filename)
  }
  return data
}

const upload = async (org: TestOrg, body: FormData | string, headers: Record<string, string> = {}) =>
  t.request('POST', '/api/v1/attachments/parse', { key: org.adminKey, body, headers })

const parseCharges = (orgId: string) => documentCharges(t, orgId)

describe('POST /api/v1/attachments/parse', () => {
  test('every accepted format: text, type from content, token estimate, no-store, one unit billed each', async () => {
    t = await buildTestApp()
    const org = await t.createOrg()
    const cases: Array<[string, string, string]> = [
      ['notes.txt', 'text', 'Grüße, 日本語'],
      ['report.pdf', 'pdf', 'Grüße aus Zürich'],
      ['report.docx', 'docx', 'Bern\t1200\t4 %'],
      ['slides.pptx', 'pptx', '[Slide 3]\nSlide three: 次のステップ'],
      ['sheets.xlsx', 'xlsx', '[Sheet: Übersicht]\nName\tStadt\tMenge'],
      ['sheets.xls', 'xls', '[Sheet: Notes]\n東京\tdone ✓'],
    ]
    for (const [name, type, snippet] of cases) {
      const response = await upload(org, form(['file', new Blob([await fixture(name)]), name]))
      expect(response.status).toBe(200)
      expect(response.headers.get('cache-control')).toBe('no-store')
      const body = await json(response)
      expect(Object.keys(body).sort()).toEqual(['document_type', 'text', 'token_count'])
      expect(body.document_type).toBe(type)
      expect(body.text).toContain(snippet)
      expect(body.token_count).toBe(Math.ceil(Buffer.byteLength(body.text) / 4))
    }
    expect(await parseCharges(org.orgId)).toEqual(cases.map(() => PRICE))
  }, 30_000)

  test('over HTTP, where the client declares Content-Length (the whole-body read), as through app.handle', async () => {
    t = await buildTestApp()
    const org = await t.createOrg()
    const base = t.listen()
    const send = (body: FormData) => fetch(`${base}/api/v1/attachments/parse`, { method: 'POST', headers: { authorization: `Bearer ${org.adminKey}` }, body })
    const response = await send(form(['file', new Blob([await fixture('report.pdf')]), 'report.pdf']))
    expect(response.status).toBe(200)
    expect((await json(response)).text).toContain('Grüße aus Zürich')
    const second = await send(form(['file', new Blob(['a']), 'a.txt'], ['file', new Blob(['b']), 'b.txt']))
    expect(second.status).toBe(400)
    expect((await json(second)).error.message).toContain('exactly one "file" part')
    expect(await parseCharges(org.orgId)).toEqual([PRICE])
  })

  test('a scanned (text-less) PDF is 200 with empty text', async () => {
    t = await buildTestApp()
    const org = await t.createOrg()
    const response = await upload(org, form(['file', new Blob([await fixture('blank.pdf')]), 'scan.pdf']))
    expect(response.status).toBe(200)
    expect(await json(response)).toEqual({ text: '', token_count: 0, document_type: 'pdf' })
  })

  test('names and declared types are ignored: a DOCX called .pdf is a DOCX, a PDF called .txt is a PDF', async () => {
    t = await buildTestApp()
    const org = await t.createOrg()
    const docx = await upload(org, form(['file', new Blob([await fixture('report.docx')], { type: 'application/pdf' }), 'report.pdf']))
    expect((await json(docx)).document_type).toBe('docx')
    const pdf = await upload(org, form(['file', new Blob([await fixture('report.pdf')], { type: 'text/plain' }), 'notes.txt']))
    expect((await json(pdf)).document_type).toBe('pdf')
  })

  test('unreadable and hostile files are 400 with a clear message, and never billed', async () => {
    t = await buildTestApp()
    const org = await t.createOrg()
    const pdf = await fixture('report.pdf')
    const cases: Array<[Uint8Array, string, RegExp]> = [
      [new Uint8Array(0), 'empty.txt', /empty/],
      [PNG, 'photo.pdf', /PNG image/],
      [plainZip(), 'archive.docx', /zip archive/],
      [await fixture('encrypted.pdf'), 'secret.pdf', /encrypted/],
      [pdf.slice(0, 4000), 'cut.pdf', /truncated/],
      [await fixture('latin1.txt'), 'latin1.txt', /Latin-1/],
      [honestZipBomb(), 'bomb.docx', /zip bomb/],
      [lyingZipBomb(), 'liar.docx', /inflates to more than/],
    ]
    for (const [bytes, name, message] of cases) {
      const response = await upload(org, form(['file', new Blob([bytes]), name]))
      expect(response.status).toBe(400)
      const body = await json(response)
      expect(body.error.code).toBe('invalid_request')
      expect(body.error.message).toMatch(message)
    }
    expect(await parseCharges(org.orgId)).toEqual([])
    // The gateway is unharmed: the pool still serves.
    expect((await upload(org, form(['file', new Blob(['still fine']), 'a.txt']))).status).toBe(200)
  }, 30_000)

  test('while a zip bomb is being refused, other requests are answered', async () => {
    t = await buildTestApp()
    const org = await t.createOrg()
    const bomb = lyingZipBomb()
    const pending = upload(org, form(['file', new Blob([bomb]), 'bomb.docx']))
    // The event loop is free: the catalog answers while the worker inflates up to its cap.
    for (let index = 0; index < 20; index++) expect((await t.request('GET', '/v1/models')).status).toBe(200)
    const refused = await pending
    expect(refused.status).toBe(400)
    expect((await json(refused)).error.message).toMatch(/inflates to more than/)
  }, 30_000)

  describe('multipart edge cases', () => {
    test('one `file` part only: missing, second file, extra fields, a text value are 400', async () => {
      t = await buildTestApp()
      const org = await t.createOrg()
      const file = () => new Blob(['hello'])
      const cases: Array<[FormData, RegExp]> = [
        [form(), /no "file" part/],
        [form(['file', file(), 'a.txt'], ['file', file(), 'b.txt']), /exactly one "file" part/],
        [form(['file', file(), 'a.txt'], ['model', 'gpt-4o']), /unexpected form field.*"model"/],
        [form(['file', file(), 'a.txt'], ['trust_tier', 'high']), /"trust_tier"/],
        [form(['file', file(), 'a.txt'], ['parse_mode', 'fast']), /"parse_mode"/],
        [form(['document', file(), 'a.txt']), /unexpected form field.*"document"/],
        [form(['file', 'just a string']), /must be a file part/],
      ]
      for (const [body, message] of cases) {
        const response = await upload(org, body)
        expect(response.status).toBe(400)
        expect((await json(response)).error.message).toMatch(message)
      }
    })

    test('wrong content types, a missing or overlong boundary, a malformed body are 400', async () => {
      t = await buildTestApp()
      const org = await t.createOrg()
      const cases: Array<[string, Record<string, string>, RegExp]> = [
        ['{"file":"x"}', { 'content-type': 'application/json' }, /multipart\/form-data/],
        ['file=x', { 'content-type': 'application/x-www-form-urlencoded' }, /multipart\/form-data/],
        ['--x\r\n', { 'content-type': 'multipart/form-data' }, /no boundary/],
        ['--x\r\n', { 'content-type': `multipart/form-data; boundary=${'b'.repeat(71)}` }, /longer than 70/],
        ['not multipart at all', { 'content-type': 'multipart/form-data; boundary=abc' }, /malformed|no "file" part|no closing boundary/],
      ]
      for (const [body, headers, message] of cases) {
        const response = await upload(org, body, headers)
        expect(response.status).toBe(400)
        expect((await json(response)).error.message).toMatch(message)
      }
    })

    test('parts the form parser would drop still count: one with an empty name, one without Content-Disposition; a body cut before its closing boundary', async () => {
      t = await buildTestApp()
      const org = await t.createOrg()
      const part = (headers: string, body: string) => `--b0\r\n${headers}\r\n\r\n${body}\r\n`
      const file = part('Content-Disposition: form-data; name="file"; filename="a.txt"', 'hello')
      const headers = { 'content-type': 'multipart/form-data; boundary=b0' }
      const cases: Array<[string, RegExp]> = [
        [file + part('Content-Disposition: form-data; name=""', 'b') + '--b0--\r\n', /the form has 2 parts, of which 1 named/],
        [part('Content-Type: text/plain', 'zz') + file + '--b0--\r\n', /the form has 2 parts, of which 1 named/],
        [file, /malformed|no closing boundary/],
      ]
      for (const [body, message] of cases) {
        const response = await upload(org, body, headers)
        expect(response.status).toBe(400)
        expect((await json(response)).error.message).toMatch(message)
      }
      // A preamble and an epilogue are not parts.
      const ok = await upload(org, `a preamble\r\n${file}--b0--\r\nan epilogue`, headers)
      expect(ok.status).toBe(200)
      expect((await json(ok)).text).toBe('hello')
    })

    test('over 4 MiB is 413, refused from Content-Length or while a chunked body streams', async () => {
      t = await buildTestApp()
      const org = await t.createOrg()
      const big = form(['file', new Blob([new Uint8Array(4 * 1024 * 1024 + 1).fill(97)]), 'big.txt'])
      const declared = await upload(org, big)
      expect(declared.status).toBe(413)
      expect((await json(declared)).error.code).toBe('payload_too_large')

      // No Content-Length: the reader counts and cancels; the stream is never drained to its end.
      const boundary = 'chunkedboundary'
      let sent = 0
      const chunk = new Uint8Array(64 * 1024).fill(98)
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n\r\n`))
        },
        pull(controller) {
          sent += chunk.byteLength
          if (sent > 64 * 1024 * 1024) controller.close()
          else controller.enqueue(chunk)
        },
      })
      const response = await t.app.handle(new Request('http://localhost/api/v1/attachments/parse', {
        method: 'POST', body: stream, headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      }))
      expect(response.status).toBe(413)
      expect(sent).toBeLessThan(5 * 1024 * 1024)
      expect(await parseCharges(org.orgId)).toEqual([])
    })

    test('exactly 4 MiB of text is accepted', async () => {
      t = await buildTestApp()
      const org = await t.createOrg()
      const response = await upload(org, form(['file', new Blob([new Uint8Array(4 * 1024 * 1024).fill(97)]), 'max.txt']))
      expect(response.status).toBe(200)
      expect((await json(response)).token_count).toBe(1024 * 1024)
    })
  })

  describe('billing and capacity', () => {
    test('an unfunded organization and a key past its spend cap are refused before any extraction (no worker even starts)', async () => {
      t = await buildTestApp()
      const { org, ownerUserId } = await t.deps.orgs.createOrg({ name: 'broke', planId: 'payg' })
      const { secret } = await t.deps.keys.create({ orgId: org.id, userId: ownerUserId, name: 'k', admin: false, expiresAtMs: null, spendCap: null })
      const body = () => form(['file', new Blob([new TextEncoder().encode('hello')]), 'a.txt'])
      const unfunded = await t.request('POST', '/api/v1/attachments/parse', { key: secret, body: body() })
      expect(unfunded.status).toBe(429)
      expect((await json(unfunded)).error.code).toBe('insufficient_quota')

      const funded = await t.createOrg()
      const capped = await t.deps.keys.create({ orgId: funded.orgId, userId: funded.ownerUserId, name: 'capped', admin: false, expiresAtMs: null, spendCap: { period: 'daily', nanos: PRICE - 1n } })
      const overCap = await t.request('POST', '/api/v1/attachments/parse', { key: capped.secret, body: body() })
      expect(overCap.status).toBe(429)
      const refusal = (await json(overCap)).error
      expect(refusal.code).toBe('insufficient_quota')
      // A parse has a fixed price: no max_tokens to lower (the chat routes' hint).
      expect(refusal.message).toContain('the price of this call is fixed')
      expect(refusal.message).not.toContain('max_tokens')
      expect(t.deps.extractor.stats().workers).toBe(0)
      expect(await parseCharges(funded.orgId)).toEqual([])
    })

    test('a client that leaves before its document is read is not billed for it', async () => {
      // Before: the extraction finished after the client had gone and the unit was settled anyway.
      const { extractor, running, finish } = heldExtractor('done')
      t = await buildTestApp({}, undefined, { extractor })
      const org = await t.createOrg()
      const client = new AbortController()
      const request = new Request('http://localhost/api/v1/attachments/parse', {
        method: 'POST', headers: { authorization: `Bearer ${org.adminKey}` }, body: form(['file', new Blob(['hello']), 'a.txt']), signal: client.signal,
      })
      const answered = t.app.handle(request)
      await running
      client.abort()
      finish()
      await answered.catch(() => undefined)
      expect(await parseCharges(org.orgId)).toEqual([])
      await verifyClean(t)
    })

    test('a full extractor queue is 429 rate_limited with Retry-After; a timeout is 503; neither is billed', async () => {
      let failure: ExtractionError = new ExtractionError('busy', 'the document extractor is at capacity; retry shortly')
      const fake: ExtractorPool = {
        extract: async () => { throw failure },
        stats: () => ({ workers: 1, busy: 1, queued: 64 }),
        close: async () => {},
      }
      t = await buildTestApp({}, undefined, { extractor: fake })
      const org = await t.createOrg()
      const busy = await upload(org, form(['file', new Blob(['x']), 'a.txt']))
      expect(busy.status).toBe(429)
      expect((await json(busy)).error.code).toBe('rate_limited')
      expect(busy.headers.get('retry-after')).toBe('1')
      expect(busy.headers.get('x-ratelimit-limit')).toBe('64')
      expect(busy.headers.get('x-ratelimit-remaining')).toBe('0')
      failure = new ExtractionError('timeout', 'document extraction took longer than 10000 ms')
      const slow = await upload(org, form(['file', new Blob(['x']), 'a.txt']))
      expect(slow.status).toBe(503)
      expect((await json(slow)).error.code).toBe('unavailable')
      expect(await parseCharges(org.orgId)).toEqual([])
    })
  })
})
