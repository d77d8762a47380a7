import { describe, expect, test } from 'bun:test'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'
import { codeFlowTokens, pkce, postForm, REDIRECT, registerClient } from '../support/oauth'

// The error codes and statuses the RFCs prescribe where a nearby code would be easy to pick:
// the authorization endpoint's unsupported_response_type (RFC 6749 §4.1.2.1), invalid_client
// with a Basic challenge when a client authenticated in the Authorization header (§5.2), and
// invalid_client for an unknown or missing client on the revocation endpoint (RFC 7009 §2.1, §2.2.1).

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

/** An Authorization: Basic header (RFC 6749 §2.3.1: each part form-encoded, then base64). */
const basic = (clientId: string, secret = '') => ({ authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}` })

const expectBasicChallenge = async (response: Response) => {
  expect(response.status).toBe(401)
  expect(response.headers.get('www-authenticate')).toMatch(/^Basic realm="[^"]+"$/)
  expect(response.headers.get('cache-control')).toBe('no-store')
  expect((await json(response)).error).toBe('invalid_client')
}

describe('authorization endpoint', () => {
  // Shown on the gateway's error page, never redirected (see redirects.test.ts for why).
  const authorize = async (responseType: string | undefined) => {
    const clientId = await registerClient(t)
    const query = new URLSearchParams({ client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().challenge, code_challenge_method: 'S256', state: 's1' })
    if (responseType !== undefined) query.set('response_type', responseType)
    const response = await t.request('GET', `/oauth/authorize?${query}`)
    expect(response.status).toBe(400)
    expect(response.headers.get('location')).toBeNull()
    return (/\((\w+)\)/.exec(await response.text()) ?? [])[1]
  }

  test('a response_type other than code is unsupported_response_type; a missing one is invalid_request', async () => {
    expect(await authorize('token')).toBe('unsupported_response_type')
    expect(await authorize('code id_token')).toBe('unsupported_response_type')
    expect(await authorize(undefined)).toBe('invalid_request')
  })
})

describe('token endpoint: HTTP Basic client authentication', () => {
  test('an unknown client, a client secret, or an unreadable Basic header: 401 invalid_client with a Basic challenge', async () => {
    const form = { grant_type: 'refresh_token', refresh_token: 'svc_mcp_whatever' }
    await expectBasicChallenge(await postForm(t, '/oauth/token', form, basic('mcp_unknown')))
    // Public clients only: no secret was ever issued, so none can be right.
    const clientId = await registerClient(t)
    await expectBasicChallenge(await postForm(t, '/oauth/token', form, basic(clientId, 'guessed-secret')))
    await expectBasicChallenge(await postForm(t, '/oauth/token', form, { authorization: 'Basic not*base64' }))
    await expectBasicChallenge(await postForm(t, '/oauth/token', form, { authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` }))
  })

  test('Basic naming a registered client with no secret identifies it, like client_id in the body', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey)
    const refreshed = await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token }, basic(tokens.clientId))
    expect(refreshed.status).toBe(200)
    expect((await json(refreshed)).access_token).toMatch(/^svc_mcp_/)
  })

  test('Basic and a client_id naming another client is invalid_request (one client per request)', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey)
    const other = await registerClient(t)
    const response = await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: other }, basic(tokens.clientId))
    expect(response.status).toBe(400)
    expect((await json(response)).error).toBe('invalid_request')
  })

  test('without an Authorization header an unknown or missing client stays 401 invalid_client, with the Basic challenge', async () => {
    // Before: no WWW-Authenticate, which RFC 9110 §15.5.2 requires on every 401.
    for (const form of [{ client_id: 'mcp_unknown' }, {}]) {
      const response = await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: 'svc_mcp_whatever', ...form })
      expect(response.status).toBe(401)
      expect((await json(response)).error).toBe('invalid_client')
      expect(response.headers.get('www-authenticate')).toBe('Basic realm="svc-gateway"')
    }
  })
})

describe('revocation endpoint', () => {
  test('an unknown client_id is 401 invalid_client, whether or not the token is known', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey)
    for (const token of [tokens.refresh_token, 'svc_mcp_unknown']) {
      const response = await postForm(t, '/oauth/revoke', { token, client_id: 'mcp_unknown' })
      expect(response.status).toBe(401)
      expect((await json(response)).error).toBe('invalid_client')
      expect(response.headers.get('www-authenticate')).toBe('Basic realm="svc-gateway"')
    }
    // Nothing was revoked by those.
    expect((await t.deps.keys.verifyToken(tokens.access_token, true)).ok).toBe(true)
    await expectBasicChallenge(await postForm(t, '/oauth/revoke', { token: tokens.refresh_token }, basic('mcp_unknown')))
    expect((await postForm(t, '/oauth/revoke', { token: tokens.refresh_token }, basic(tokens.clientId))).status).toBe(200)
    expect((await t.deps.keys.verifyToken(tokens.access_token, true)).ok).toBe(false)
  })

  test('a missing client (no client_id, no Basic header) is 401 invalid_client and revokes nothing; an unknown token stays 200', async () => {
    // Before: the token alone revoked the authorization (200), which README and RFC 7009 §2.1 rule out.
    const tokens = await codeFlowTokens(t, org.adminKey)
    for (const token of [tokens.refresh_token, tokens.access_token, 'svc_mcp_unknown']) {
      await expectBasicChallenge(await postForm(t, '/oauth/revoke', { token, token_type_hint: 'refresh_token' }))
    }
    expect((await t.deps.keys.verifyToken(tokens.access_token, true)).ok).toBe(true)
    // The client identified: an unknown token is 200 (RFC 7009 §2.2), a known one is revoked.
    expect((await postForm(t, '/oauth/revoke', { token: 'svc_mcp_unknown', client_id: tokens.clientId })).status).toBe(200)
    expect((await postForm(t, '/oauth/revoke', { token: tokens.access_token, client_id: tokens.clientId })).status).toBe(200)
    expect((await t.deps.keys.verifyToken(tokens.access_token, true)).ok).toBe(false)
  })

  test('a token of another (registered) client is still refused with unauthorized_client', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey)
    const other = await registerClient(t)
    const response = await postForm(t, '/oauth/revoke', { token: tokens.refresh_token, client_id: other })
    expect(response.status).toBe(400)
    expect((await json(response)).error).toBe('unauthorized_client')
  })
})
