import { describe, expect, test } from 'bun:test'
import { hashSecret } from '../../src/keys/token'
import { throttleKeyOf } from '../../src/oauth/server'
import { buildTestApp, eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'
import { approve, authorizeQuery, codeFlowTokens, pkce, postForm, readConsentPage, REDIRECT, registerClient } from '../support/oauth'

// The authorization server through app.handle: discovery, registration, code + PKCE, refresh
// rotation, revocation, and the misuse cases of OAuth 2.1 §7 and RFC 8252.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

const chat = (token: string) => t.request('POST', '/v1/chat/completions', { key: token, body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] } })

describe('discovery', () => {
  test('authorization-server metadata (RFC 8414), at the root and the path-suffixed form', async () => {
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/oauth-authorization-server/mcp']) {
      const metadata = await json(await t.request('GET', path))
      expect(metadata.issuer).toBe('http://localhost')
      expect(metadata.authorization_endpoint).toBe('http://localhost/oauth/authorize')
      expect(metadata.token_endpoint).toBe('http://localhost/oauth/token')
      expect(metadata.registration_endpoint).toBe('http://localhost/oauth/register')
      expect(metadata.revocation_endpoint).toBe('http://localhost/oauth/revoke')
      expect(metadata.device_authorization_endpoint).toBe('http://localhost/oauth/device_authorization')
      expect(metadata.code_challenge_methods_supported).toEqual(['S256'])
      expect(metadata.token_endpoint_auth_methods_supported).toEqual(['none'])
      expect(metadata.grant_types_supported).toContain('urn:ietf:params:oauth:grant-type:device_code')
    }
  })

  test('protected-resource metadata (RFC 9728) for /mcp and for the API', async () => {
    const mcp = await json(await t.request('GET', '/.well-known/oauth-protected-resource/mcp'))
    expect(mcp).toMatchObject({ resource: 'http://localhost/mcp', authorization_servers: ['http://localhost'], scopes_supported: ['mcp:inference'] })
    const api = await json(await t.request('GET', '/.well-known/oauth-protected-resource'))
    expect(api).toMatchObject({ resource: 'http://localhost', scopes_supported: ['cli:inference'] })
  })

  test('a configured issuer is used instead of the request origin', async () => {
    const configured = await buildTestApp({ SVC_CONFIG: '/virtual.yaml' }, (await import('../../src/config/load')).loadConfig({ SVC_CONFIG: '/virtual.yaml' }, () => 'plans: { pro: { monthly_allowance: "1", fusion: true } }\noauth: { issuer: "https://gw.example.com" }'))
    const metadata = await json(await configured.request('GET', '/.well-known/oauth-authorization-server'))
    expect(metadata.issuer).toBe('https://gw.example.com')
    expect(metadata.token_endpoint).toBe('https://gw.example.com/oauth/token')
    await configured.close()
  })
})

describe('registration (RFC 7591)', () => {
  test('a public client is registered; confidential auth methods become none', async () => {
    const response = await t.request('POST', '/oauth/register', { body: { client_name: 'Claude', redirect_uris: [REDIRECT, 'cursor://anysphere.cursor-retrieval/oauth/callback'], token_endpoint_auth_method: 'client_secret_basic' } })
    expect(response.status).toBe(201)
    const client = await json(response)
    expect(client.client_id).toMatch(/^mcp_/)
    expect(client.token_endpoint_auth_method).toBe('none')
    expect(client.client_secret).toBeUndefined()
    expect(client.redirect_uris).toHaveLength(2)
  })

  test('unsafe or malformed redirect URIs are refused with invalid_redirect_uri', async () => {
    for (const uri of ['http://evil.example.com/cb', 'javascript:alert(1)', 'data:text/html,x', 'https://a.example/cb#frag', 'not a url', 'https://user:pw@a.example/cb']) {
      const response = await t.request('POST', '/oauth/register', { body: { redirect_uris: [uri] } })
      expect(response.status).toBe(400)
      expect((await json(response)).error).toBe('invalid_redirect_uri')
    }
    const missing = await t.request('POST', '/oauth/register', { body: { client_name: 'x' } })
    expect((await json(missing)).error).toBe('invalid_redirect_uri')
    const badGrant = await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT], grant_types: ['password'] } })
    expect((await json(badGrant)).error).toBe('invalid_client_metadata')
    const notJson = await t.request('POST', '/oauth/register', { body: 'redirect_uris=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
    expect((await json(notJson)).error).toBe('invalid_client_metadata')
  })
  test('mistyped optional metadata is invalid_client_metadata naming the field; unknown fields are ignored (RFC 7591 §2, §3.2.2)', async () => {
    const cases: Array<[string, unknown]> = [['token_endpoint_auth_method', 5], ['scope', 5], ['client_uri', 5], ['logo_uri', {}], ['contacts', 'a'], ['contacts', [1]], ['jwks', 'x']]
    for (const [field, value] of cases) {
      const response = await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT], [field]: value } })
      expect(response.status).toBe(400)
      const body = await json(response)
      expect(body.error).toBe('invalid_client_metadata')
      expect(body.error_description).toContain(field)
    }
    const valid = await t.request('POST', '/oauth/register', {
      body: { redirect_uris: [REDIRECT], scope: 'mcp:inference', client_uri: 'https://app.example', contacts: ['ops@app.example'], x_vendor_extension: { any: 1 } },
    })
    expect(valid.status).toBe(201)
  })
})

describe('anonymous writes are throttled', () => {
  test('registration: a burst of 30 per address, then 429 with Retry-After until the bucket refills', async () => {
    for (let index = 0; index < 30; index++) await registerClient(t)
    const refused = await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] } })
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('10')
    expect((await json(refused)).error).toBe('invalid_request')
    t.clock.advance(10_000)
    await registerClient(t)
  })

  test('device authorization has its own bucket: a registration flood does not lock `svc login` out', async () => {
    for (let index = 0; index < 31; index++) await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] } })
    const deviceAuthorization = () => postForm(t, '/oauth/device_authorization', { client_id: 'svc-cli' })
    for (let index = 0; index < 30; index++) expect((await deviceAuthorization()).status).toBe(200)
    const refused = await deviceAuthorization()
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('10')
  })

  test('IPv6 peers are throttled by their /64; IPv4 and IPv4-mapped addresses as they are', () => {
    expect(throttleKeyOf('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64')
    expect(throttleKeyOf('2001:DB8:0001:0002::9')).toBe('2001:db8:1:2::/64')
    expect(throttleKeyOf('fe80::1%eth0')).toBe('fe80:0:0:0::/64')
    expect(throttleKeyOf('2001:db8:1:3::1')).not.toBe(throttleKeyOf('2001:db8:1:2::1'))
    expect(throttleKeyOf('203.0.113.7')).toBe('203.0.113.7')
    expect(throttleKeyOf('::ffff:203.0.113.7')).toBe('::ffff:203.0.113.7')
    expect(throttleKeyOf('1::2::3')).toBe('1::2::3')
  })
})

describe('authorization code + PKCE', () => {
  test('the consent page names the client and scope, and sets a SameSite=Strict CSRF cookie; it cannot be framed', async () => {
    const clientId = await registerClient(t, { client_name: 'Evil <script>alert(1)</script>' })
    const page = await t.request('GET', authorizeQuery({ clientId, challenge: pkce().challenge }))
    expect(page.status).toBe(200)
    expect(page.headers.get('x-frame-options')).toBe('DENY')
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
    expect(page.headers.get('set-cookie')).toContain('SameSite=Strict')
    const { html, fields } = await readConsentPage(page)
    expect(html).toContain('Evil &#60;script&#62;')
    expect(html).not.toContain('<script>')
    expect(html).toContain('mcp:inference')
    expect(fields.csrf).toMatch(/^[A-Za-z0-9_-]{43}$/)
  })

  test('approve → code → tokens; the svc_mcp_ token works on /mcp only; the key’s secret is not stored, its id is', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey)
    expect(tokens.access_token).toMatch(/^svc_mcp_/)
    expect(tokens.refresh_token).toMatch(/^svc_mcp_/)
    expect(tokens.scope).toBe('mcp:inference')
    expect(tokens.expires_in).toBe(3600)
    expect((await chat(tokens.access_token)).status).toBe(401)
    // The grant records which key signed in (its id: the key bounds the tokens)…
    const grants = await t.deps.database.client.execute('select key_id from oauth_grants')
    expect(grants.rows.map(row => row.key_id)).toEqual([org.adminKeyId])
    // …but nothing of its secret: no OAuth table holds it or its hash.
    const keyHash = hashSecret(org.adminKey)
    for (const table of ['oauth_clients', 'oauth_codes', 'oauth_grants', 'oauth_tokens', 'oauth_device_codes']) {
      const dump = JSON.stringify((await t.deps.database.client.execute(`select * from ${table}`)).rows, (_k, v) => (typeof v === 'bigint' ? String(v) : v))
      expect(dump.includes(org.adminKey) || dump.includes(keyHash)).toBe(false)
      // Tokens are stored hashed only.
      expect(dump.includes(tokens.access_token) || dump.includes(tokens.refresh_token)).toBe(false)
    }
  })

  test('the redirect carries state and iss; deny redirects with access_denied', async () => {
    const clientId = await registerClient(t)
    const ok = await approve(t, { clientId, challenge: pkce().challenge, state: 'xyz' }, org.adminKey)
    expect(ok.origin + ok.pathname).toBe(REDIRECT)
    expect(ok.searchParams.get('state')).toBe('xyz')
    expect(ok.searchParams.get('iss')).toBe('http://localhost')
    const denied = await approve(t, { clientId, challenge: pkce().challenge, state: 'abc' }, '', 'deny')
    expect(denied.searchParams.get('error')).toBe('access_denied')
    expect(denied.searchParams.get('state')).toBe('abc')
    expect(denied.searchParams.get('code')).toBeNull()
  })

  test('a wrong, revoked or missing API key re-renders the page with 403 (no challenge to name) and issues nothing', async () => {
    const clientId = await registerClient(t)
    const member = await t.createMember(org, 'member')
    await t.deps.keys.revoke(org.orgId, member.keyId)
    for (const key of ['', 'z_sk_nope', member.key]) {
      const page = await t.request('GET', authorizeQuery({ clientId, challenge: pkce().challenge }))
      const { fields, cookie } = await readConsentPage(page)
      const response = await postForm(t, '/oauth/authorize', { ...fields, api_key: key, decision: 'approve' }, { cookie })
      expect(response.status).toBe(403)
      expect(response.headers.get('www-authenticate')).toBeNull()
      expect(await response.text()).toContain('role="alert"')
    }
  })

  test('CSRF: a post without the cookie, with another cookie, or from a foreign Origin is refused', async () => {
    const clientId = await registerClient(t)
    const page = await t.request('GET', authorizeQuery({ clientId, challenge: pkce().challenge }))
    const { fields, cookie } = await readConsentPage(page)
    const form = { ...fields, api_key: org.adminKey, decision: 'approve' }
    expect((await postForm(t, '/oauth/authorize', form)).status).toBe(403)
    expect((await postForm(t, '/oauth/authorize', form, { cookie: `svc_oauth_csrf=${'A'.repeat(43)}` })).status).toBe(403)
    expect((await postForm(t, '/oauth/authorize', form, { cookie, origin: 'https://evil.example' })).status).toBe(403)
    expect((await postForm(t, '/oauth/authorize', form, { cookie })).status).toBe(303)
  })

  test('redirect URI misuse: unregistered URIs are never redirected to; loopback IPs may change port only', async () => {
    const clientId = await registerClient(t, { redirect_uris: ['http://127.0.0.1:1234/cb', 'https://app.example/cb', 'http://localhost:5555/cb'] })
    const { challenge } = pkce()
    const shown = async (redirectUri: string) => t.request('GET', authorizeQuery({ clientId, challenge, redirectUri }))
    for (const bad of ['https://evil.example/cb', 'https://app.example/cb/../x', 'https://app.example/cb?x=1', 'http://127.0.0.1:1234/other', 'http://localhost:6666/cb', 'https://app.example:8443/cb']) {
      const response = await shown(bad)
      expect(response.status).toBe(400)
      expect(response.headers.get('location')).toBeNull()
    }
    for (const good of ['http://127.0.0.1:40000/cb', 'https://app.example/cb', 'http://localhost:5555/cb']) expect((await shown(good)).status).toBe(200)
    // An unknown client is shown an error page, never redirected.
    const unknown = await t.request('GET', authorizeQuery({ clientId: 'mcp_unknown', challenge }))
    expect(unknown.status).toBe(400)
  })

  test('PKCE misuse: plain or missing challenges are refused; a wrong or missing verifier gets no token', async () => {
    const clientId = await registerClient(t)
    const { verifier, challenge } = pkce()
    for (const params of [{ method: 'plain' }, { challenge: 'short' }]) {
      const response = await t.request('GET', authorizeQuery({ clientId, challenge, ...params }))
      expect(response.status).toBe(400)
      expect(response.headers.get('location')).toBeNull()
      expect(await response.text()).toContain('(invalid_request)')
    }
    const exchange = async (form: Record<string, string | undefined>) => postForm(t, '/oauth/token', { grant_type: 'authorization_code', redirect_uri: REDIRECT, client_id: clientId, ...form })
    const code1 = (await approve(t, { clientId, challenge }, org.adminKey)).searchParams.get('code')!
    expect((await json(await exchange({ code: code1, code_verifier: pkce().verifier }))).error).toBe('invalid_grant')
    const code2 = (await approve(t, { clientId, challenge }, org.adminKey)).searchParams.get('code')!
    expect((await json(await exchange({ code: code2, code_verifier: undefined }))).error).toBe('invalid_request')
    const code3 = (await approve(t, { clientId, challenge }, org.adminKey)).searchParams.get('code')!
    expect((await json(await exchange({ code: code3, code_verifier: verifier, redirect_uri: 'http://127.0.0.1:7777/other' }))).error).toBe('invalid_grant')
    // A missing redirect_uri is a missing required parameter (RFC 6749 §5.2); before: invalid_grant.
    expect(await json(await exchange({ code: code3, code_verifier: verifier, redirect_uri: undefined }))).toEqual({ error: 'invalid_request', error_description: 'redirect_uri is required: the one of the authorization request' })
    const other = await registerClient(t)
    expect((await json(await exchange({ code: code3, code_verifier: verifier, client_id: other }))).error).toBe('invalid_grant')
    expect((await exchange({ code: code3, code_verifier: verifier })).status).toBe(200)
  })

  test('code replay: the second exchange fails and revokes the tokens of the first', async () => {
    const clientId = await registerClient(t)
    const { verifier, challenge } = pkce()
    const code = (await approve(t, { clientId, challenge }, org.adminKey)).searchParams.get('code')!
    const form = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier }
    const first = await json(await postForm(t, '/oauth/token', form))
    expect(first.access_token).toMatch(/^svc_mcp_/)
    const replay = await postForm(t, '/oauth/token', form)
    expect(replay.status).toBe(400)
    expect((await json(replay)).error).toBe('invalid_grant')
    const refresh = await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: clientId })
    expect((await json(refresh)).error).toBe('invalid_grant')
    expect((await t.deps.keys.verifyToken(first.access_token, true)).ok).toBe(false)
  })

  test('an expired code is refused (FakeClock)', async () => {
    const clientId = await registerClient(t)
    const { verifier, challenge } = pkce()
    const code = (await approve(t, { clientId, challenge }, org.adminKey)).searchParams.get('code')!
    t.clock.advance(60_000)
    const response = await postForm(t, '/oauth/token', { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier })
    expect((await json(response)).error).toBe('invalid_grant')
  })

  test('scopes: one known scope per token; cli:inference through the code flow gives svc_cli_', async () => {
    const clientId = await registerClient(t)
    for (const scope of ['admin', 'mcp:inference cli:inference']) {
      const response = await t.request('GET', authorizeQuery({ clientId, challenge: pkce().challenge, scope }))
      expect(response.status).toBe(400)
      expect(await response.text()).toContain('(invalid_scope)')
    }
    const cli = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    expect(cli.access_token).toMatch(/^svc_cli_/)
    expect((await chat(cli.access_token)).status).toBe(200)
  })
})

describe('tokens: expiry, refresh rotation, revocation', () => {
  test('an access token expires (FakeClock); the refresh token gives a new pair and is spent', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    t.clock.advance(3600_000)
    const expired = await chat(tokens.access_token)
    expect(expired.status).toBe(401)
    expect((await json(expired)).error.message).toContain('expired')
    const refreshed = await json(await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: tokens.clientId }))
    expect(refreshed.access_token).toMatch(/^svc_cli_/)
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token)
    expect((await chat(refreshed.access_token)).status).toBe(200)
  })

  test('refresh-token reuse revokes the whole authorization (the rotated tokens too)', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    const form = { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: tokens.clientId }
    const rotated = await json(await postForm(t, '/oauth/token', form))
    // Past the 30 s in which its client may present it again (refresh-reuse.test.ts).
    t.clock.advance(30_000)
    const reuse = await postForm(t, '/oauth/token', form)
    expect((await json(reuse)).error).toBe('invalid_grant')
    expect((await chat(rotated.access_token)).status).toBe(401)
    const next = await postForm(t, '/oauth/token', { ...form, refresh_token: rotated.refresh_token })
    expect((await json(next)).error).toBe('invalid_grant')
  })

  test('refresh by another client, or for another scope, is refused; an expired refresh token too', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey)
    const other = await registerClient(t)
    expect((await json(await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: other }))).error).toBe('invalid_grant')
    expect((await json(await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: tokens.clientId, scope: 'cli:inference' }))).error).toBe('invalid_scope')
    t.clock.advance(30 * 86_400_000)
    expect((await json(await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: tokens.clientId }))).error).toBe('invalid_grant')
  })

  test('revocation (RFC 7009): revoking the refresh token ends the access token at once; unknown tokens are 200', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    expect((await chat(tokens.access_token)).status).toBe(200)
    const revoked = await postForm(t, '/oauth/revoke', { token: tokens.refresh_token, client_id: tokens.clientId })
    expect(revoked.status).toBe(200)
    const after = await chat(tokens.access_token)
    expect(after.status).toBe(401)
    expect((await json(after)).error.message).toContain('revoked')
    expect((await postForm(t, '/oauth/revoke', { token: 'svc_cli_unknown', client_id: tokens.clientId })).status).toBe(200)
    expect((await json(await postForm(t, '/oauth/revoke', { client_id: tokens.clientId }))).error).toBe('invalid_request')
  })

  test('purging removes expired codes and tokens, keeps live ones and spent refresh tokens until they expire', async () => {
    const old = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: old.refresh_token, client_id: old.clientId })
    const count = async (table: string) => Number((await t.deps.database.client.execute(`select count(*) as n from ${table}`)).rows[0]!.n)
    expect(await t.deps.oauth.purgeExpired()).toBe(0)
    // Two hours on: both access tokens are gone, the refresh tokens (30 days) stay; the code is not a day old yet.
    t.clock.advance(2 * 3600_000)
    const live = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    expect(await t.deps.oauth.purgeExpired()).toBe(2)
    expect(await count('oauth_tokens')).toBe(4)
    // The spent refresh token still trips reuse detection.
    expect((await json(await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: old.refresh_token, client_id: old.clientId }))).error).toBe('invalid_grant')
    expect((await chat(live.access_token)).status).toBe(200)
    // 31 days on: everything of both authorizations is gone.
    t.clock.advance(31 * 86_400_000)
    await t.deps.oauth.purgeExpired()
    expect([await count('oauth_tokens'), await count('oauth_codes'), await count('oauth_grants')]).toEqual([0, 0, 0])
  })

  test('token endpoint errors are RFC 6749 §5.2 JSON with no-store', async () => {
    const response = await postForm(t, '/oauth/token', { grant_type: 'password', username: 'a', password: 'b' })
    expect(response.status).toBe(400)
    expect(response.headers.get('cache-control')).toBe('no-store')
    expect(await json(response)).toMatchObject({ error: 'unsupported_grant_type' })
    expect((await json(await postForm(t, '/oauth/token', { grant_type: 'authorization_code', code: 'x', client_id: 'nope' }))).error).toBe('invalid_client')
    const jsonBody = await t.request('POST', '/oauth/token', { body: { grant_type: 'authorization_code' } })
    expect((await json(jsonBody)).error).toBe('invalid_request')
    const repeated = await t.app.handle(new Request('http://localhost/oauth/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=a&grant_type=b' }))
    expect((await json(repeated)).error).toBe('invalid_request')
    // A parameter named after Object.prototype's members is an unknown parameter, not a repeated one
    // (before: `toString=x` was "parameter "toString" is repeated").
    const named = await t.app.handle(new Request('http://localhost/oauth/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'toString=x&constructor=y&grant_type=password' }))
    expect(await json(named)).toMatchObject({ error: 'unsupported_grant_type' })
  })
})
