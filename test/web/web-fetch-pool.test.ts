import { afterEach, expect, test } from 'bun:test'
import { ExtractionError, type ExtractorPool } from '../../src/documents/types'
import { buildWebApp, pageServer } from '../support/fake-web'
import { createPlanOrg, json, type TestApp } from '../support/harness'

// A fetched PDF is read by the document extraction pool. When that pool could not take it (its
// queue full), was too slow (a job timeout) or was stopping, the web fetch answered 502
// provider_error ("outcome unknown: do not retry"), and billed the other pages of the call. The
// page arrived: the failure is the gateway's own, known, and an upload of the same PDF is told
// 429 rate_limited with Retry-After, or 503. The web fetch now answers the same, billing nothing,
// so the retry those statuses invite never pays twice. (Spec §2.5 has no per-URL error field in
// a 200, so the whole call answers the error, naming the URL.)

const CREDIT = 1_000_000_000n
let t: TestApp
const stops: Array<() => void> = []
afterEach(async () => {
  for (const stop of stops.splice(0)) stop()
  await t?.close()
})

/** A web app whose extractor fails every job with `failure`, and a site serving an HTML page and a PDF. */
async function setup(failure: ExtractionError) {
  const extractor: ExtractorPool = {
    extract: async () => {
      throw failure
    },
    stats: () => ({ workers: 1, busy: 1, queued: 64 }),
    close: async () => {},
  }
  const web = await buildWebApp({}, {}, { extractor })
  t = web.t
  const site = pageServer((_, url) =>
    url.pathname.endsWith('.pdf')
      ? new Response('%PDF-1.7 a report', { headers: { 'content-type': 'application/pdf' } })
      : new Response('<html><title>Home</title><body>welcome</body></html>', { headers: { 'content-type': 'text/html' } }),
  )
  stops.push(site.stop)
  web.resolver.set('docs.acme-web.com', ['127.0.0.1'])
  const org = await createPlanOrg(t, { name: 'pool', keyName: 'web', credit: CREDIT })
  const urls = [`http://docs.acme-web.com:${site.port}/`, `http://docs.acme-web.com:${site.port}/report.pdf`]
  const response = await t.request('POST', '/api/v1/web/fetch', { key: org.key, body: { urls } })
  return { response, org, site }
}

test('a PDF page the extraction pool has no room for is 429 rate_limited with Retry-After, as for an upload, and nothing is billed', async () => {
  const { response, org, site } = await setup(new ExtractionError('busy', 'the document extractor is at capacity; retry shortly'))
  expect(site.seen).toHaveLength(2)
  expect(response.status).toBe(429)
  expect(response.headers.get('retry-after')).toBe('1')
  expect(response.headers.get('x-ratelimit-limit')).toBe('64')
  expect(response.headers.get('x-ratelimit-remaining')).toBe('0')
  expect(Number(response.headers.get('x-ratelimit-reset'))).toBeGreaterThan(0)
  const error = (await json(response)).error
  expect(error).toMatchObject({ code: 'rate_limited', param: 'urls.1' })
  expect(error.message).toContain('report.pdf')
  expect(error.message).toContain('at capacity')
  expect(error.message).toContain('nothing was billed')
  expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(CREDIT)
  expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
})

test.each([
  ['an extraction timeout', new ExtractionError('timeout', 'document extraction took longer than 10000 ms'), 'too complex'],
  ['a pool shutting down', new ExtractionError('closed', 'the document extractor is shutting down'), 'shutting down'],
])('%s on a PDF page is 503 unavailable, as for an upload, and nothing is billed', async (_, failure, fragment) => {
  const { response, org } = await setup(failure)
  expect(response.status).toBe(503)
  const error = (await json(response)).error
  expect(error).toMatchObject({ code: 'unavailable', param: 'urls.1' })
  expect(error.message).toContain(fragment)
  expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(CREDIT)
})
