import { expect, test } from 'bun:test'
import { createLogger } from '../../src/observability/logger'
import { buildWebApp, pageServer, searxngServer, storyPage } from '../support/fake-web'
import { buildTestApp, createPlanOrg } from '../support/harness'

// README: every request writes one `"msg":"request"` line (and counts in the metrics). The
// /docs/ redirect is answered before routing: before, it wrote no line and no metric, and any
// path ending in /docs/ (or a query ending so) was redirected too, unlogged.

test('the /docs/ redirect is logged and counted; other paths ending in /docs/ are plain unmatched 404s', async () => {
  const lines: string[] = []
  const t = await buildTestApp({}, undefined, { logger: createLogger('info', line => lines.push(line)) })
  try {
    const slash = await t.request('GET', '/docs/', { headers: { 'x-request-id': 'req-docs-slash' } })
    expect(slash.status).toBe(308)
    expect(slash.headers.get('location')).toBe('/docs')
    for (const [path, id] of [['/v1/chat/completions/docs/', 'req-hostile-1'], ['/healthz?x=/docs/', 'req-hostile-2']] as const) {
      const response = await t.request('GET', path, { headers: { 'x-request-id': id } })
      expect(response.status).not.toBe(308)
    }
    const logged = lines.map(line => JSON.parse(line)).filter(line => line.msg === 'request')
    expect(logged.find(line => line.request_id === 'req-docs-slash')).toMatchObject({ route: '/docs/', method: 'GET', status: 308 })
    expect(logged.find(line => line.request_id === 'req-hostile-1')).toMatchObject({ route: 'unmatched', status: 404 })
    expect(logged.find(line => line.request_id === 'req-hostile-2')).toMatchObject({ route: '/healthz', status: 200 })
    const series = t.deps.metrics.registry.render()
    expect(series).toContain('svc_http_requests_total{route="/docs/",method="GET",status="308"} 1')
  } finally {
    await t.close()
  }
})

test("a standalone document parse's line carries its outcome and its charge (QA: billed, but the line had neither)", async () => {
  const lines: string[] = []
  const t = await buildTestApp({}, undefined, { logger: createLogger('info', line => lines.push(line)) })
  try {
    const org = await t.createOrg()
    const body = new FormData()
    body.append('file', new Blob(['some notes']), 'notes.txt')
    const response = await t.request('POST', '/api/v1/attachments/parse', { key: org.adminKey, body, headers: { 'x-request-id': 'req-parse-line' } })
    expect(response.status).toBe(200)
    const booked = (await t.deps.database.client.execute({ sql: "SELECT amount_nanos FROM ledger_entries WHERE request_id = ? AND kind = 'settle'", args: ['req-parse-line'] })).rows
    expect(booked).toHaveLength(1)
    const line = lines.map(entry => JSON.parse(entry)).find(entry => entry.msg === 'request' && entry.request_id === 'req-parse-line')
    expect(line).toMatchObject({ route: '/api/v1/attachments/parse', status: 200, outcome: 'ok' })
    expect(BigInt(line.charged_nanos)).toBe(BigInt(booked[0]!.amount_nanos as bigint))
  } finally {
    await t.close()
  }
})

test("standalone web fetch and search lines carry their outcome and charge (before: units on the service's line only)", async () => {
  const searx = searxngServer()
  const site = pageServer(() => storyPage('/'))
  const lines: string[] = []
  const { t, resolver } = await buildWebApp({ search: searx.config }, {}, { logger: createLogger('info', line => lines.push(line)) })
  try {
    const { key } = await createPlanOrg(t, { name: 'web-log' })
    resolver.set('docs.acme-web.com', ['127.0.0.1'])
    const fetched = await t.request('POST', '/api/v1/web/fetch', { key, body: { urls: [`http://docs.acme-web.com:${site.port}/`] }, headers: { 'x-request-id': 'req-web-fetch-line' } })
    expect(fetched.status).toBe(200)
    const searched = await t.request('POST', '/api/v1/web/search', { key, body: { query: 'bun' }, headers: { 'x-request-id': 'req-web-search-line' } })
    expect(searched.status).toBe(200)
    for (const id of ['req-web-fetch-line', 'req-web-search-line']) {
      const booked = (await t.deps.database.client.execute({ sql: "SELECT amount_nanos FROM ledger_entries WHERE request_id = ? AND kind = 'settle'", args: [id] })).rows
      expect(booked).toHaveLength(1)
      const line = lines.map(entry => JSON.parse(entry)).find(entry => entry.msg === 'request' && entry.request_id === id)
      expect(line).toMatchObject({ status: 200, outcome: 'ok' })
      expect(BigInt(line.charged_nanos)).toBe(BigInt(booked[0]!.amount_nanos as bigint))
    }
  } finally {
    site.stop()
    searx.stop()
    await t.close()
  }
})
