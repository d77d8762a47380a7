import { afterEach, expect, test } from 'bun:test'
import { buildTestApp, json, type TestApp } from '../support/harness'

// Routes that take no query parameter refuse one the way GET /api/v1/models refuses an unknown
// one (spec §4.11): 400 invalid_request naming it, never silently ignored.

let t: TestApp
afterEach(() => t.close())

const ROUTES = ['/api/v1/api-keys', '/api/v1/rate-limits', '/api/v1/billing/balance']

test.each(ROUTES)('GET %s refuses an unknown query parameter with 400 naming it, after the auth step', async path => {
  t = await buildTestApp()
  const org = await t.createOrg()
  for (const query of ['?limit=5', '?limit=5&privacy_tier=private']) {
    const response = await t.request('GET', `${path}${query}`, { key: org.adminKey })
    expect(response.status).toBe(400)
    const body = await json(response)
    expect(body.error).toMatchObject({ code: 'invalid_request', param: 'limit', message: 'unknown query parameter "limit" (this route takes none)' })
  }
  // The same words as the models route.
  const models = await json(await t.request('GET', '/api/v1/models?limit=5'))
  expect(models.error.message).toBe('unknown query parameter "limit" (only privacy_tier is accepted)')
  // A bad credential is still 401, whatever the query.
  expect((await t.request('GET', `${path}?limit=5`, { key: 'z_sk_malformed' })).status).toBe(401)
  // No query, or an empty one, is fine.
  expect((await t.request('GET', path, { key: org.adminKey })).status).toBe(200)
  expect((await t.request('GET', `${path}?`, { key: org.adminKey })).status).toBe(200)
})

test('GET /v1/models/{model} takes no query parameter; an Anthropic client may send beta=true', async () => {
  t = await buildTestApp()
  const refused = await t.request('GET', '/v1/models/demo-anonymous?bogus=1')
  expect(refused.status).toBe(400)
  expect((await json(refused)).error).toMatchObject({ code: 'invalid_request', param: 'bogus', message: 'unknown query parameter "bogus" (this route takes none)' })
  expect((await t.request('GET', '/v1/models/demo-anonymous?beta=true')).status).toBe(400)
  const anthropic = { 'anthropic-version': '2023-06-01' }
  expect((await t.request('GET', '/v1/models/demo-anonymous?beta=true', { headers: anthropic })).status).toBe(200)
  const anthropicRefused = await t.request('GET', '/v1/models/demo-anonymous?bogus=1', { headers: anthropic })
  expect(anthropicRefused.status).toBe(400)
  expect((await json(anthropicRefused)).error.message).toBe('unknown query parameter "bogus" (only beta is accepted)')
  expect((await t.request('GET', '/v1/models/demo-anonymous')).status).toBe(200)
})
