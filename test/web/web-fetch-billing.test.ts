import { describe, expect, test } from 'bun:test'
import { createPlanOrg, json, type TestApp } from '../support/harness'
import { buildWebApp, type Egress, type FakeResolver } from '../support/fake-web'
import { CREDIT, PRICE, webFetchTools } from '../support/web-fetch'

// Who pays for a fetched page and when it is refused: the plan allowance before prepaid balance,
// unfunded organizations, key spend caps and rate limits.

let t: TestApp
let resolver: FakeResolver
let egress: Egress[]
const { serve, spent, fetchUrls, page } = webFetchTools(() => t)

async function setup(extra: Parameters<typeof buildWebApp>[0] = {}) {
  ;({ t, resolver, egress } = await buildWebApp(extra))
  return createPlanOrg(t, { name: 'ssrf', keyName: 'web', credit: CREDIT })
}

describe('billing order and limits', () => {
  test('the plan allowance is used before prepaid balance', async () => {
    ;({ t, resolver, egress } = await buildWebApp())
    const org = await t.createOrg('pro', CREDIT) // the default plan: pro, allowance 0.003 USD
    const site = serve(() => page('x'))
    resolver.set('docs.acme-web.com', ['127.0.0.1'])
    const url = `http://docs.acme-web.com:${site.port}/`
    const before = await t.deps.balance(org.orgId)
    expect((await fetchUrls(org.adminKey, [url])).status).toBe(200)
    const first = await t.deps.balance(org.orgId)
    expect(first.prepaidNanos).toBe(before.prepaidNanos)
    expect(first.availableNanos).toBe(before.availableNanos - PRICE)
    expect((await fetchUrls(org.adminKey, [url])).status).toBe(200)
    // 0.001 USD of allowance was left: the other half of the second charge is prepaid.
    expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(before.prepaidNanos - 1_000_000n)
  })

  test('an unfunded organization is refused with 429 before any connection', async () => {
    ;({ t, resolver, egress } = await buildWebApp())
    const { key: secret } = await createPlanOrg(t, { name: 'poor', credit: 0n })
    const site = serve(() => page('x'))
    resolver.set('docs.acme-web.com', ['127.0.0.1'])
    const response = await fetchUrls(secret, [`http://docs.acme-web.com:${site.port}/`])
    expect(response.status).toBe(429)
    expect((await json(response)).error.code).toBe('insufficient_quota')
    expect(egress).toEqual([])
  })

  test('a key spend cap stops fetching once reached (overall cap: the key expires)', async () => {
    const { orgId, ownerUserId } = await setup()
    const { secret } = await t.deps.keys.create({ orgId, userId: ownerUserId, name: 'capped', admin: false, expiresAtMs: null, spendCap: { period: 'overall', nanos: PRICE } })
    const site = serve(() => page('x'))
    resolver.set('docs.acme-web.com', ['127.0.0.1'])
    const url = `http://docs.acme-web.com:${site.port}/`
    expect((await fetchUrls(secret, [url])).status).toBe(200)
    const refused = await fetchUrls(secret, [url])
    expect([401, 429]).toContain(refused.status)
    expect(site.seen).toHaveLength(1)
    expect(await spent(orgId)).toBe(PRICE)
  })

  test('inference rate limits apply', async () => {
    const { key } = await setup({ limits: '{ inference: { key: { burst: 2, per_second: 0.001 }, org: { burst: 100, per_second: 1 } } }' })
    const site = serve(() => page('x'))
    resolver.set('docs.acme-web.com', ['127.0.0.1'])
    const url = `http://docs.acme-web.com:${site.port}/`
    expect((await fetchUrls(key, [url])).status).toBe(200)
    expect((await fetchUrls(key, [url])).status).toBe(200)
    const limited = await fetchUrls(key, [url])
    expect(limited.status).toBe(429)
    expect((await json(limited)).error.code).toBe('rate_limited')
    expect(limited.headers.get('retry-after')).toBeTruthy()
  })
})
