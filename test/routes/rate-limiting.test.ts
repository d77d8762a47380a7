import { describe, expect, test } from 'bun:test'
import { buildTestApp, json } from '../support/harness'

// Rate limits are checked in the auth step (L10): management routes take the management
// buckets of the key and the organization; success responses carry X-RateLimit-*; a 429 adds
// Retry-After; inspection (GET /api/v1/rate-limits) consumes nothing.

describe('rate limiting in the auth step', () => {
  test('a management key bucket allows its burst, then 429 rate_limited with headers, then refills', async () => {
    const t = await buildTestApp()
    const org = await t.createOrg()
    const { burst, perSecond } = t.deps.config.limits.management.key
    for (let index = 0; index < burst; index += 1) {
      const response = await t.request('GET', '/api/v1/api-keys', { key: org.adminKey })
      expect(response.status).toBe(200)
      expect(response.headers.get('x-ratelimit-limit')).toBe(String(burst))
      expect(response.headers.get('x-ratelimit-remaining')).toBe(String(burst - index - 1))
      expect(Number(response.headers.get('x-ratelimit-reset'))).toBeGreaterThanOrEqual(Math.floor(t.clock.now() / 1000))
    }
    const refused = await t.request('GET', '/api/v1/api-keys', { key: org.adminKey })
    expect(refused.status).toBe(429)
    expect((await json(refused)).error.code).toBe('rate_limited')
    expect(refused.headers.get('retry-after')).toBe(String(Math.ceil(1 / perSecond)))
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0')
    expect(refused.headers.get('x-request-id')).toBeTruthy()

    // Inspection still works and shows the drained window without consuming anything.
    const snapshot = await json(await t.request('GET', '/api/v1/rate-limits', { key: org.adminKey }))
    expect(snapshot.management.key.remaining).toBe(0)
    expect(snapshot.inference.key.remaining).toBe(t.deps.config.limits.inference.key.burst)

    t.clock.advance(Math.ceil(1000 / perSecond))
    expect((await t.request('GET', '/api/v1/api-keys', { key: org.adminKey })).status).toBe(200)
    await t.close()
  })

  test('a refused request consumes nothing and writes nothing', async () => {
    const t = await buildTestApp()
    const org = await t.createOrg()
    const { burst } = t.deps.config.limits.management.key
    for (let index = 0; index < burst; index += 1) await t.request('GET', '/api/v1/api-keys', { key: org.adminKey })
    const before = (await t.deps.keys.list(org.orgId)).length
    const refused = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'blocked' } })
    expect(refused.status).toBe(429)
    expect((await t.deps.keys.list(org.orgId)).length).toBe(before)
    await t.close()
  })

  test('the organization bucket is shared by its keys', async () => {
    const t = await buildTestApp()
    const org = await t.createOrg()
    const orgBurst = t.deps.config.limits.management.org.burst
    const keyBurst = t.deps.config.limits.management.key.burst
    const keys = [org.adminKey]
    while (keys.length * keyBurst <= orgBurst) keys.push((await t.createMember(org, 'admin', { admin: true })).key)
    let allowed = 0
    for (const key of keys) {
      for (let index = 0; index < keyBurst; index += 1) {
        if ((await t.request('GET', '/api/v1/api-keys', { key })).status === 200) allowed += 1
      }
    }
    expect(allowed).toBe(orgBurst)
    // Another organization is unaffected.
    const other = await t.createOrg('other')
    expect((await t.request('GET', '/api/v1/api-keys', { key: other.adminKey })).status).toBe(200)
    await t.close()
  })

  test('unauthenticated requests are refused before any bucket is touched', async () => {
    const t = await buildTestApp()
    const org = await t.createOrg()
    for (let index = 0; index < 100; index += 1) expect((await t.request('GET', '/api/v1/api-keys')).status).toBe(401)
    expect((await t.request('GET', '/api/v1/api-keys', { key: org.adminKey })).status).toBe(200)
    await t.close()
  })
})
