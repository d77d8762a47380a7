import { describe, expect, test } from 'bun:test'
import { createLogger } from '../../src/observability/logger'
import { createPlanOrg, json, type TestApp } from '../support/harness'
import { buildWebApp, type Egress, type FakeResolver } from '../support/fake-web'
import { CREDIT, PRICE, webFetchTools } from '../support/web-fetch'

// The SSRF defences through the HTTP route (not only the validator: litellm#37053), with the
// billing and connection evidence: a refused URL is never billed, and never opens a socket
// (no transport call, no request on any test server; names are not even looked up when the
// URL itself is refused). Caps and content types are in web-fetch-content.test.ts, billing
// order and limits in web-fetch-billing.test.ts.

let t: TestApp
let resolver: FakeResolver
let egress: Egress[]
const { serve, spent, fetchUrls, page, expectRefused } = webFetchTools(() => t)

async function setup(extra: Parameters<typeof buildWebApp>[0] = {}) {
  ;({ t, resolver, egress } = await buildWebApp(extra))
  return createPlanOrg(t, { name: 'ssrf', keyName: 'web', credit: CREDIT })
}

describe('a URL the policy refuses is never billed and never opens a socket', () => {
  test.each([
    ['loopback literal', 'http://127.0.0.1/', 'loopback'],
    ['metadata literal', 'http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['decimal loopback', 'http://2130706433/', 'dotted quad'],
    ['IPv4-mapped loopback', 'http://[::ffff:7f00:1]/', 'loopback'],
    ['NAT64 private', 'http://[64:ff9b::a00:1]/', 'NAT64'],
    ['localhost', 'http://localhost:8080/', 'local-use'],
    ['GCP metadata name', 'http://metadata.google.internal/', 'local-use'],
    ['credentials', 'https://user:pw@docs.acme-web.com/', 'credentials'],
    ['sensitive query key', 'https://docs.acme-web.com/?access_token=x', 'credential'],
    ['sensitive query key after a semicolon', 'https://docs.acme-web.com/?a=1;token=x', 'credential'],
    ['port 0', 'http://docs.acme-web.com:0/', 'port 0'],
    ['file scheme', 'file:///etc/passwd', 'http and https'],
    ['gopher', 'gopher://docs.acme-web.com:70/_x', 'http and https'],
    ['backslash confusion', 'http://docs.acme-web.com\\@127.0.0.1/', 'backslash'],
  ])('%s', async (_, url, fragment) => {
    const { orgId, key } = await setup()
    const site = serve(() => page('secret'))
    resolver.set('docs.acme-web.com', ['127.0.0.1'])
    // A good URL beside it changes nothing: every URL is checked before anything happens.
    const response = await fetchUrls(key, [`http://docs.acme-web.com:${site.port}/`, url])
    await expectRefused(response, orgId, fragment)
    expect((await json(await fetchUrls(key, [url]))).error.param).toBe('urls.0')
    expect(resolver.lookups).toEqual([])
    expect(egress).toEqual([])
    expect(site.seen).toEqual([])
  })
})

describe('names that resolve to non-public addresses', () => {
  test.each([
    ['a private answer', ['10.0.0.5'], 'wildcard.acme-web.com resolves to a private (RFC 1918) address'],
    ['a public answer mixed with a private one', ['127.0.0.1', '192.168.1.20'], 'resolves to a private (RFC 1918) address'],
    ['the metadata address', ['169.254.169.254'], 'link-local'],
    ['IPv6 loopback', ['::1'], 'loopback'],
    ['IPv4-mapped metadata', ['::ffff:a9fe:a9fe'], 'IPv4-mapped'],
    ['a ULA', ['fd00::1'], 'unique-local'],
    ['an unspecified address', ['0.0.0.0'], 'unspecified'],
    ['a loopback the allowance does not cover', ['127.0.0.2'], 'loopback'],
  ])('%s → 400 after one lookup, no connection, nothing billed, the address not named', async (_, answers, fragment) => {
    const { orgId, key } = await setup()
    const site = serve(() => page('internal'))
    resolver.set('wildcard.acme-web.com', answers)
    const response = await fetchUrls(key, [`http://wildcard.acme-web.com:${site.port}/`])
    // Before: "resolves to 10.0.0.5, a private …": any key could map internal DNS, unbilled (QA).
    expect(await response.clone().text()).not.toContain(answers.at(-1)!)
    await expectRefused(response, orgId, fragment)
    expect(resolver.lookups).toEqual(['wildcard.acme-web.com'])
    expect(egress).toEqual([])
    expect(site.seen).toEqual([])
  })

  test("in a chat, the model's Not fetched note names the kind of address, not the address; the log keeps it", async () => {
    const lines: Array<Record<string, unknown>> = []
    ;({ t, resolver, egress } = await buildWebApp({}, {}, { logger: createLogger('info', line => lines.push(JSON.parse(line))) }))
    const { key } = await createPlanOrg(t, { name: 'ssrf', keyName: 'web', credit: CREDIT })
    resolver.set('intranet.acme-web.com', ['10.1.2.3'])
    const response = await t.request('POST', '/v1/chat/completions', {
      key,
      body: { model: 'demo-web', web_fetch: true, messages: [{ role: 'user', content: 'Summarize http://intranet.acme-web.com/wiki' }] },
    })
    expect(response.status).toBe(200)
    // The demo model echoes the message it was given: the context block the model reads.
    const reply = (await json(response)).choices[0].message.content as string
    expect(reply).toContain('Not fetched: http://intranet.acme-web.com/wiki (intranet.acme-web.com resolves to a private (RFC 1918) address; only public addresses are fetched)')
    expect(reply).not.toContain('10.1.2.3')
    expect(egress).toEqual([])
    expect(lines).toContainEqual(expect.objectContaining({ host: 'intranet.acme-web.com', address: '10.1.2.3' }))
  })

  test('a wildcard-DNS name embedding the metadata address is refused by its answer', async () => {
    const { orgId, key } = await setup()
    resolver.set('169.254.169.254.nip.io', ['169.254.169.254'])
    await expectRefused(await fetchUrls(key, ['http://169.254.169.254.nip.io/latest/meta-data/']), orgId, 'link-local')
    expect(egress).toEqual([])
  })

  test('without the test-only allowance, a name resolving to loopback is refused like any other', async () => {
    const { orgId, key } = await setup({ allow: '[]' })
    const site = serve(() => page('local service'))
    resolver.set('docs.acme-web.com', ['127.0.0.1'])
    await expectRefused(await fetchUrls(key, [`http://docs.acme-web.com:${site.port}/`]), orgId, 'docs.acme-web.com resolves to a loopback address; only public addresses are fetched')
    expect(egress).toEqual([])
    expect(site.seen).toEqual([])
  })

  test('a name with no addresses is a 400 naming it, not billed', async () => {
    const { orgId, key } = await setup()
    await expectRefused(await fetchUrls(key, ['http://nowhere.acme-web.com/']), orgId, 'nowhere.acme-web.com does not resolve')
  })

  test('a DNS outage is a 503 that bills nothing', async () => {
    const { orgId, key } = await setup()
    resolver.set('flaky.acme-web.com', { ok: false, reason: 'failed', message: 'DNS lookup of flaky.acme-web.com failed (ESERVFAIL)' })
    const response = await fetchUrls(key, ['http://flaky.acme-web.com/'])
    expect(response.status).toBe(503)
    expect((await json(response)).error.message).toContain('nothing was billed')
    expect(await spent(orgId)).toBe(0n)
  })
})

describe('redirects are followed by hand, every hop checked again', () => {
  const redirectTo = (location: string, status = 302) => () => new Response(null, { status, headers: { location, 'set-cookie': 'session=abc' } })

  test.each([
    ['the metadata address', 'http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['a loopback literal', 'http://127.0.0.1:8080/', 'loopback'],
    ['an IPv6 loopback', 'http://[::1]/', 'loopback'],
    ['a local name', 'http://metadata.google.internal/computeMetadata/v1/', 'local-use'],
    ['a scheme-relative local name', '//printer.local/', 'local-use'],
    ['a file URL', 'file:///etc/passwd', 'http and https'],
    ['a gopher URL', 'gopher://127.0.0.1:6379/_FLUSHALL', 'http and https'],
    ['credentials in the Location', 'http://admin:admin@docs.acme-web.com/', 'credentials'],
    ['a token in the Location', 'http://docs.acme-web.com/p?access_token=LEAK_TOKEN', 'looks like a credential'],
    ['a decimal IP (normalised, then judged by its bytes)', 'http://2130706433/', 'loopback'],
  ])('a redirect to %s is refused: 400, nothing billed, no further connection', async (_, location, fragment) => {
    const { orgId, key } = await setup()
    const site = serve(redirectTo(location))
    resolver.set('hop.acme-web.com', ['127.0.0.1'])
    const refused = await fetchUrls(key, [`http://hop.acme-web.com:${site.port}/start`])
    // The refusal names the rule, never the secret it refuses (QA: it quoted the whole Location).
    expect(await refused.clone().text()).not.toMatch(/admin:admin|LEAK_TOKEN/)
    await expectRefused(refused, orgId, fragment)
    expect(egress.map(entry => entry.url)).toEqual([`http://127.0.0.1:${site.port}/start`])
  })

  test('a redirect to a name that resolves privately is refused after its lookup, without connecting', async () => {
    const { orgId, key } = await setup()
    const inner = serve(() => page('internal admin'))
    const site = serve(redirectTo(`http://admin.acme-web.com:${inner.port}/`, 307))
    resolver.set('hop.acme-web.com', ['127.0.0.1']).set('admin.acme-web.com', ['10.20.30.40'])
    const refused = await fetchUrls(key, [`http://hop.acme-web.com:${site.port}/`])
    expect(await refused.clone().text()).not.toContain('10.20.30.40')
    await expectRefused(refused, orgId, `redirects to http://admin.acme-web.com:${inner.port}/: admin.acme-web.com resolves to a private (RFC 1918) address`)
    expect(resolver.lookups).toEqual(['hop.acme-web.com', 'admin.acme-web.com'])
    expect(egress).toHaveLength(1)
    expect(inner.seen).toEqual([])
  })

  test('a chain of public hops is followed (relative Locations too); the result keeps the requested URL', async () => {
    const { orgId, key } = await setup()
    const end = serve(() => page('arrived'))
    const site = serve((_, url) => {
      if (url.pathname === '/one') return new Response(null, { status: 301, headers: { location: '/two' } })
      if (url.pathname === '/two') return new Response(null, { status: 308, headers: { location: `http://end.acme-web.com:${end.port}/final` } })
      return page('wrong')
    })
    resolver.set('hop.acme-web.com', ['127.0.0.1']).set('end.acme-web.com', ['127.0.0.1'])
    const url = `http://hop.acme-web.com:${site.port}/one`
    const response = await fetchUrls(key, [url])
    expect(response.status).toBe(200)
    expect((await json(response)).results[0]).toMatchObject({ url, content: 'arrived' })
    expect(egress.map(entry => entry.host)).toEqual([`hop.acme-web.com:${site.port}`, `hop.acme-web.com:${site.port}`, `end.acme-web.com:${end.port}`])
    expect(await spent(orgId)).toBe(PRICE)
  })

  test('more than the hop limit is refused and not billed', async () => {
    const { orgId, key } = await setup({ fetch: 'max_redirects: 2' })
    let hops = 0
    const site = serve(() => new Response(null, { status: 302, headers: { location: `/hop${++hops}` } }))
    resolver.set('loop.acme-web.com', ['127.0.0.1'])
    await expectRefused(await fetchUrls(key, [`http://loop.acme-web.com:${site.port}/`]), orgId, 'redirects more than 2 times')
    expect(site.seen).toHaveLength(3)
  })

  test('credentials never cross origins: cookies set on one hop are not sent to the next, and nothing carries Authorization', async () => {
    const { key } = await setup()
    const other = serve(() => page('other origin'))
    const site = serve(redirectTo(`http://other.acme-web.com:${other.port}/landing`))
    resolver.set('hop.acme-web.com', ['127.0.0.1']).set('other.acme-web.com', ['127.0.0.1'])
    const response = await t.request('POST', '/api/v1/web/fetch', {
      key,
      body: { urls: [`http://hop.acme-web.com:${site.port}/`] },
      headers: { cookie: 'client=secret', 'x-forwarded-for': '1.2.3.4' },
    })
    expect(response.status).toBe(200)
    for (const seen of [...site.seen, ...other.seen]) {
      expect(seen.headers.cookie).toBeUndefined()
      expect(seen.headers.authorization).toBeUndefined()
      expect(seen.headers['x-forwarded-for']).toBeUndefined()
      expect(JSON.stringify(seen.headers)).not.toContain(key)
    }
    expect(other.seen).toHaveLength(1)
  })
})

describe('DNS rebinding: the checked address is the one connected to', () => {
  test('a second, private answer is never used: one lookup, one connection to the checked address', async () => {
    const { orgId, key } = await setup()
    const site = serve(() => page('public content'))
    resolver.set('rebind.acme-web.com', ['127.0.0.1'], ['10.0.0.9'])
    const response = await fetchUrls(key, [`http://rebind.acme-web.com:${site.port}/`])
    expect(response.status).toBe(200)
    expect(resolver.lookups).toEqual(['rebind.acme-web.com'])
    expect(egress.map(entry => entry.url)).toEqual([`http://127.0.0.1:${site.port}/`])
    expect(await spent(orgId)).toBe(PRICE)
  })

  test('a redirect back to the same name resolves again, and the rebound private answer is refused', async () => {
    const { orgId, key } = await setup()
    const site = serve((_, url) => (url.pathname === '/' ? new Response(null, { status: 302, headers: { location: '/again' } }) : page('should not be read')))
    resolver.set('rebind.acme-web.com', ['127.0.0.1'], ['10.0.0.9'])
    const refused = await fetchUrls(key, [`http://rebind.acme-web.com:${site.port}/`])
    expect(await refused.clone().text()).not.toContain('10.0.0.9')
    await expectRefused(refused, orgId, 'rebind.acme-web.com resolves to a private (RFC 1918) address')
    expect(resolver.lookups).toEqual(['rebind.acme-web.com', 'rebind.acme-web.com'])
    expect(site.seen.map(seen => seen.path)).toEqual(['/'])
  })
})
