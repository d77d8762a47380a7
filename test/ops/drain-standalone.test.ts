import { afterEach, expect, test } from 'bun:test'
import { createLogger } from '../../src/observability/logger'
import { heldExtractor, parseCharges } from '../support/documents'
import { buildWebApp, pageServer } from '../support/fake-web'
import { buildTestApp, createPlanOrg, json } from '../support/harness'
import { poll } from '../support/poll'

// The drain's deadline (main.ts: lifecycle.abortAll) cuts every billed call still running. A
// standalone document parse and standalone web fetches and searches were not tracked: the drain
// neither counted nor cut them, so they ran on past the deadline, were charged, and the exit did
// not wait for them. Cut like a collected chat answer: 503 `unavailable`, nothing charged, the
// slot and the hold freed, logged `aborted`.

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** An extractor whose jobs wait until released (at the latest after the test). */
function heldPdfExtractor() {
  const held = heldExtractor('late text', 'pdf')
  cleanups.push(held.finish)
  return held
}

/** The `request` log lines a logger wrote, by request id. */
function requestLines(lines: string[]) {
  return (id: string) => lines.map(line => JSON.parse(line)).find(line => line.msg === 'request' && line.request_id === id)
}

test('the drain deadline cuts a standalone document parse: 503 unavailable, nothing charged, logged aborted', async () => {
  const { extractor, jobs } = heldPdfExtractor()
  const lines: string[] = []
  const t = await buildTestApp({}, undefined, { extractor, logger: createLogger('info', line => lines.push(line)) })
  cleanups.push(() => t.close())
  const org = await t.createOrg()
  const before = await t.deps.balance(org.orgId)
  const form = new FormData()
  form.append('file', new File(['%PDF-1.7 held'], 'a.pdf'))
  const answer = t.request('POST', '/api/v1/attachments/parse', { key: org.adminKey, body: form, headers: { 'x-request-id': 'req-cut-parse' } })
  await poll('the parse to reach the extractor', 200, 10, () => (jobs() === 1 ? true : undefined))
  expect(t.deps.lifecycle.inFlight).toBe(1)
  t.deps.lifecycle.drain()
  t.deps.lifecycle.abortAll()
  const response = await answer
  expect(response.status).toBe(503)
  expect((await json(response)).error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('shutting down') })
  expect(t.deps.lifecycle.inFlight).toBe(0)
  expect(await parseCharges(t, org.orgId)).toEqual([])
  expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(before.prepaidNanos)
  expect(requestLines(lines)('req-cut-parse')).toMatchObject({ status: 503, outcome: 'aborted' })
})

test('a parse whose client left is logged 499 cancelled, not 503, and is not charged', async () => {
  // Before: the line said 503 unavailable, an error nobody received (a chat logs 499 here).
  const { extractor, jobs } = heldPdfExtractor()
  const lines: string[] = []
  const t = await buildTestApp({}, undefined, { extractor, logger: createLogger('info', line => lines.push(line)) })
  cleanups.push(() => t.close())
  const org = await t.createOrg()
  const form = new FormData()
  form.append('file', new File(['hello'], 'a.txt'))
  const client = new AbortController()
  const answered = t.app.handle(new Request('http://localhost/api/v1/attachments/parse', {
    method: 'POST', headers: { authorization: `Bearer ${org.adminKey}`, 'x-request-id': 'req-left-parse' }, body: form, signal: client.signal,
  }))
  await poll('the parse to reach the extractor', 200, 10, () => (jobs() === 1 ? true : undefined))
  client.abort()
  await answered.catch(() => undefined)
  await poll('the request line', 200, 10, () => requestLines(lines)('req-left-parse'))
  expect(requestLines(lines)('req-left-parse')).toMatchObject({ status: 499, outcome: 'cancelled' })
  expect(await parseCharges(t, org.orgId)).toEqual([])
  expect(t.deps.lifecycle.inFlight).toBe(0)
})

test('the drain deadline cuts a standalone web fetch and a web search: 503, nothing charged, the slot freed', async () => {
  let release!: () => void
  const held = new Promise<void>(resolve => (release = resolve))
  const site = pageServer(async () => {
    await held
    return new Response('<html><title>t</title><body>late page</body></html>', { headers: { 'content-type': 'text/html' } })
  })
  let searches = 0
  const search = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch() {
      searches += 1
      await held
      return Response.json({ results: [{ url: 'https://bun.sh/', title: 'Bun', content: 'late' }] })
    },
  })
  cleanups.push(() => {
    release()
    site.stop()
    search.stop(true)
  })
  const lines: string[] = []
  const web = await buildWebApp({ search: `{ backend: searxng, base_url: "http://127.0.0.1:${search.port}" }` }, {}, { logger: createLogger('info', line => lines.push(line)) })
  cleanups.push(() => web.t.close())
  const t = web.t
  const org = await createPlanOrg(t, { name: 'web', keyName: 'web' })
  web.resolver.set('docs.example-web.com', ['127.0.0.1'])
  const before = await t.deps.balance(org.orgId)
  const fetched = t.request('POST', '/api/v1/web/fetch', { key: org.key, body: { urls: [`http://docs.example-web.com:${site.port}/`] }, headers: { 'x-request-id': 'req-cut-fetch' } })
  const searched = t.request('POST', '/api/v1/web/search', { key: org.key, body: { query: 'bun' }, headers: { 'x-request-id': 'req-cut-search' } })
  await poll('the fetch and the search to reach their servers', 200, 10, () => (site.seen.length === 1 && searches === 1 ? true : undefined))
  expect(t.deps.lifecycle.inFlight).toBe(2)
  t.deps.lifecycle.drain()
  t.deps.lifecycle.abortAll()
  for (const [response, id] of [[await fetched, 'req-cut-fetch'], [await searched, 'req-cut-search']] as const) {
    expect(response.status).toBe(503)
    expect((await json(response)).error.code).toBe('unavailable')
    expect(requestLines(lines)(id)).toMatchObject({ status: 503, outcome: 'aborted' })
  }
  expect(t.deps.lifecycle.inFlight).toBe(0)
  expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
  expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(before.prepaidNanos)
  const logged = lines.map(line => JSON.parse(line))
  expect(logged.filter(line => line.msg === 'web_fetch' || line.msg === 'web_search').map(line => [line.msg, line.outcome, line.units]).sort()).toEqual([['web_fetch', 'aborted', 0], ['web_search', 'aborted', 0]])
})

test('the drain deadline cuts a web fetch whose PDF is in an extraction worker: it stops waiting for the job', async () => {
  const { extractor, jobs } = heldPdfExtractor()
  const site = pageServer(() => new Response('%PDF-1.7 held', { headers: { 'content-type': 'application/pdf' } }))
  cleanups.push(() => site.stop())
  const web = await buildWebApp({}, {}, { extractor })
  cleanups.push(() => web.t.close())
  const t = web.t
  const org = await createPlanOrg(t, { name: 'web', keyName: 'web' })
  web.resolver.set('docs.example-web.com', ['127.0.0.1'])
  const before = await t.deps.balance(org.orgId)
  const fetched = t.request('POST', '/api/v1/web/fetch', { key: org.key, body: { urls: [`http://docs.example-web.com:${site.port}/a.pdf`] } })
  await poll('the PDF to reach the extractor', 200, 10, () => (jobs() === 1 ? true : undefined))
  expect(t.deps.lifecycle.inFlight).toBe(1)
  t.deps.lifecycle.drain()
  t.deps.lifecycle.abortAll()
  const response = await fetched
  expect(response.status).toBe(503)
  expect((await json(response)).error.code).toBe('unavailable')
  expect(t.deps.lifecycle.inFlight).toBe(0)
  expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(before.prepaidNanos)
})
