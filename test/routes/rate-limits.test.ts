import { afterEach, describe, expect, test } from 'bun:test'
import { buildConfiguredApp, buildTestApp, json, type TestApp } from '../support/harness'


let current: TestApp | undefined
afterEach(async () => {
  await current?.close()
  current = undefined
})

async function setup() {
  const t = await buildTestApp()
  current = t
  const limits = t.deps.limits
  const get = (key?: string, headers: Record<string, string> = {}) => t.request('GET', '/api/v1/rate-limits', { key, headers })
  return { t, limits, app: t.app, get }
}

describe('GET /api/v1/rate-limits happy', () => {
  test('shows the four windows and the concurrency gate from config', async () => {
    const { t, get } = await setup()
    const org = await t.createOrg()
    const response = await get(org.adminKey)
    expect(response.status).toBe(200)
    expect(response.headers.get('cache-control')).toBe('no-store')
    const resetAt = new Date(t.clock.now()).toISOString()
    const { limits } = t.deps.config
    const window = (rule: { burst: number; perSecond: number }) => ({
      limit: rule.burst,
      remaining: rule.burst,
      reset_at: resetAt,
      refill_per_second: rule.perSecond,
    })
    expect(await json(response)).toEqual({
      inference: { key: window(limits.inference.key), org: window(limits.inference.org) },
      management: { key: window(limits.management.key), org: window(limits.management.org) },
      concurrency: { in_use: 0, limit: limits.orgInferenceConcurrency },
    })
  })

  test('refill_per_second is the rate the bucket refills at (a rate between its 1e-6 steps is refused at boot: config tests)', async () => {
    const t = await buildConfiguredApp([
      'plans: { basic: { monthly_allowance: "0", fusion: false } }',
      'limits: { management: { key: { burst: 2, per_second: 0.012346 }, org: { burst: 100, per_second: 1 } } }',
    ])
    current = t
    const org = await t.createOrg()
    const principal = { orgId: org.orgId, keyId: org.adminKeyId }
    t.deps.limits.checkManagement(principal)
    const window = (await json(await t.request('GET', '/api/v1/rate-limits', { key: org.adminKey }))).management.key
    expect(window.refill_per_second).toBe(0.012346)
    // The reset it reports agrees: one token back at 0.012346/s.
    const seconds = (Date.parse(window.reset_at) - t.clock.now()) / 1000
    expect(Math.abs(seconds - 1 / 0.012346)).toBeLessThan(1)
  })

  test('100 calls leave every remaining unchanged', async () => {
    const { t, limits, get } = await setup()
    const org = await t.createOrg()
    const principal = { orgId: org.orgId, keyId: org.adminKeyId }
    // Drain a little of each window first, so "unchanged" is not just "full".
    limits.checkInference(principal)
    limits.checkInference(principal)
    limits.checkManagement(principal)
    const release = limits.acquireInferenceSlot(org.orgId)
    const first = await json(await get(org.adminKey))
    expect(first.inference.key.remaining).toBe(t.deps.config.limits.inference.key.burst - 2)
    expect(first.management.org.remaining).toBe(t.deps.config.limits.management.org.burst - 1)
    expect(first.concurrency.in_use).toBe(1)
    for (let i = 0; i < 100; i++) {
      const response = await get(org.adminKey)
      expect(response.status).toBe(200)
      expect(await json(response)).toEqual(first)
    }
    release()
  })

  test('an ordinary (non-admin) member key may read its own windows', async () => {
    const { t, limits, get } = await setup()
    const org = await t.createOrg()
    const member = await t.createMember(org, 'member')
    limits.checkInference({ orgId: org.orgId, keyId: member.keyId })
    const body = await json(await get(member.key))
    expect(body.inference.key.remaining).toBe(t.deps.config.limits.inference.key.burst - 1)
    expect(body.inference.org.remaining).toBe(t.deps.config.limits.inference.org.burst - 1)
    // The admin key of the same org has its own key window but shares the org window.
    const admin = await json(await get(org.adminKey))
    expect(admin.inference.key.remaining).toBe(t.deps.config.limits.inference.key.burst)
    expect(admin.inference.org.remaining).toBe(body.inference.org.remaining)
  })

  test('remaining refills with time and reset_at is an RFC 3339 whole second', async () => {
    const { t, limits, get } = await setup()
    const org = await t.createOrg()
    const principal = { orgId: org.orgId, keyId: org.adminKeyId }
    const rule = t.deps.config.limits.management.key
    for (let i = 0; i < rule.burst; i++) limits.checkManagement(principal)
    const drained = await json(await get(org.adminKey))
    expect(drained.management.key.remaining).toBe(0)
    expect(drained.management.key.reset_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/)
    expect(Date.parse(drained.management.key.reset_at)).toBe(t.clock.now() + Math.ceil((rule.burst / rule.perSecond) * 1000))
    t.clock.advance(Math.ceil(1000 / rule.perSecond))
    expect((await json(await get(org.adminKey))).management.key.remaining).toBe(1)
  })
})

describe('GET /api/v1/rate-limits errors', () => {
  test('no credential is 401 and an X-Org-ID mismatch is 403, in the /api/v1 envelope', async () => {
    const { t, get } = await setup()
    const org = await t.createOrg()
    const missing = await get()
    expect(missing.status).toBe(401)
    expect((await json(missing)).error.code).toBe('unauthorized')
    const mismatch = await get(org.adminKey, { 'x-org-id': 'another-org' })
    expect(mismatch.status).toBe(403)
    expect((await json(mismatch)).error.code).toBe('forbidden')
  })

  test('a revoked key is 401', async () => {
    const { t, get } = await setup()
    const org = await t.createOrg()
    const member = await t.createMember(org, 'member')
    await t.deps.keys.revoke(org.orgId, member.keyId)
    expect((await get(member.key)).status).toBe(401)
  })
})

describe('GET /api/v1/rate-limits docs', () => {
  test('is documented under "Rate limits" with a security requirement', async () => {
    const { app } = await setup()
    const route = app.routes.find(r => r.method === 'GET' && r.path === '/api/v1/rate-limits')
    const detail = (route?.hooks as { detail?: { tags?: string[]; security?: unknown[]; summary?: string } }).detail
    expect(detail?.tags).toContain('Rate limits')
    expect(detail?.security?.length).toBeGreaterThan(0)
    expect(detail?.summary).toBe('Get rate limits')
  })
})
