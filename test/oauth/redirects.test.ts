import { describe, expect, test } from 'bun:test'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'
import { approve, authorizeQuery, pkce, postForm, readConsentPage, registerClient } from '../support/oauth'

// Where the authorization endpoint sends a browser. Anyone may register a client anonymously, so
// the gateway must not bounce a link to a registered URI before the person has seen the consent
// page (an open redirector: RFC 9700 §4.11.2, OAuth 2.1 §7.12.2), must show where it will go as
// the browser will read it, and must keep the registered URI's query as written (RFC 6749 §3.1.2).

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

const PHISH = 'https://phish.example/login'

describe('authorization-request errors are the gateway page, never a redirect', () => {
  test('GET: a missing or wrong response_type, bad PKCE, scope or resource answer 400 with the page headers', async () => {
    const clientId = await registerClient(t, { redirect_uris: [PHISH] })
    const { challenge } = pkce()
    const base = { response_type: 'code', client_id: clientId, redirect_uri: PHISH, code_challenge: challenge, code_challenge_method: 'S256', state: 's' }
    const cases: Array<[Record<string, string | undefined>, string]> = [
      [{ client_id: clientId, redirect_uri: PHISH }, 'invalid_request'], // the bare link of the QA report
      [{ ...base, response_type: 'token' }, 'unsupported_response_type'],
      [{ ...base, code_challenge_method: 'plain' }, 'invalid_request'],
      [{ ...base, code_challenge: 'short' }, 'invalid_request'],
      [{ ...base, scope: 'admin' }, 'invalid_scope'],
      [{ ...base, resource: 'https://elsewhere.example/mcp' }, 'invalid_target'],
    ]
    for (const [params, code] of cases) {
      const query = new URLSearchParams(Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined))
      const response = await t.request('GET', `/oauth/authorize?${query}`)
      expect(response.status).toBe(400)
      expect(response.headers.get('location')).toBeNull()
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8')
      expect(response.headers.get('x-frame-options')).toBe('DENY')
      expect(response.headers.get('cache-control')).toBe('no-store')
      expect(response.headers.get('content-security-policy')).toContain("default-src 'none'")
      expect(await response.text()).toContain(`(${code})`)
    }
  })

  test('POST: tampered request fields are the page too; only Approve or Deny after the page redirects', async () => {
    const clientId = await registerClient(t, { redirect_uris: [PHISH] })
    const { fields, cookie } = await readConsentPage(await t.request('GET', authorizeQuery({ clientId, challenge: pkce().challenge, redirectUri: PHISH })))
    for (const tampered of [{ response_type: 'token' }, { code_challenge_method: 'plain' }]) {
      const response = await postForm(t, '/oauth/authorize', { ...fields, ...tampered, decision: 'deny' }, { cookie, origin: 'http://localhost' })
      expect(response.status).toBe(400)
      expect(response.headers.get('location')).toBeNull()
    }
    const denied = await postForm(t, '/oauth/authorize', { ...fields, decision: 'deny' }, { cookie, origin: 'http://localhost' })
    expect(denied.status).toBe(303)
    expect(denied.headers.get('location')).toStartWith(`${PHISH}?error=access_denied&`)
  })
})

describe('registration: redirect URI schemes are an allowlist', () => {
  test('OS protocol handlers and other schemes are refused; https, loopback http, reverse-DNS and known app schemes are not', async () => {
    for (const uri of ['ms-msdt:/id', 'search-ms:query=x', 'chrome://settings', 'ftp://x.example/', 'intent://x', 'ws://127.0.0.1/', 'mailto:a@b.example', 'https://a.example/cb\n', 'https://a.example/c b', 'java\tscript:alert(1)']) {
      const response = await t.request('POST', '/oauth/register', { body: { redirect_uris: [uri] } })
      expect(response.status).toBe(400)
      expect((await json(response)).error).toBe('invalid_redirect_uri')
    }
    for (const uri of ['https://app.example/cb', 'http://127.0.0.1:9/cb', 'com.example.app:/oauth/cb', 'cursor://anysphere.cursor-retrieval/oauth/callback', 'vscode://publisher.extension/cb']) {
      expect((await t.request('POST', '/oauth/register', { body: { redirect_uris: [uri] } })).status).toBe(201)
    }
  })
})

describe('the consent page shows the destination as the browser reads it', () => {
  test('a lookalike Unicode host is shown in punycode', async () => {
    const lookalike = 'https://\u0430pple.com/oauth/callback' // Cyrillic а
    const clientId = await registerClient(t, { client_name: 'Apple', redirect_uris: [lookalike] })
    const { html } = await readConsentPage(await t.request('GET', authorizeQuery({ clientId, challenge: pkce().challenge, redirectUri: lookalike })))
    expect(html).toContain('you return to <code>https://xn--pple-43d.com/oauth/callback</code>')
    // Only the hidden form field keeps the string as sent (the request must round-trip).
    expect(html.replace(/<input type="hidden"[^>]*>/g, '')).not.toContain('\u0430pple')
  })
})

describe('the redirect keeps the registered query as written (RFC 6749 §3.1.2)', () => {
  test('parameters are appended; only their values are encoded; the code exchanges with the URI as registered', async () => {
    const registered = 'https://app.example/cb?x=~&flag&p=a%20b'
    const clientId = await registerClient(t, { redirect_uris: [registered] })
    const { verifier, challenge } = pkce()
    const location = await approve(t, { clientId, challenge, redirectUri: registered, state: 'a b&c=d' }, org.adminKey)
    const code = location.searchParams.get('code')!
    expect(location.href).toBe(`${registered}&code=${code}&state=a%20b%26c%3Dd&iss=http%3A%2F%2Flocalhost`)
    const tokens = await postForm(t, '/oauth/token', { grant_type: 'authorization_code', code, redirect_uri: registered, client_id: clientId, code_verifier: verifier })
    expect(tokens.status).toBe(200)
  })

  test('an empty query or none: the parameters follow `?` once', async () => {
    for (const [registered, prefix] of [['https://app.example/cb?', 'https://app.example/cb?error='], ['com.example.app:/cb', 'com.example.app:/cb?error=']]) {
      const clientId = await registerClient(t, { redirect_uris: [registered] })
      expect((await approve(t, { clientId, challenge: pkce().challenge, redirectUri: registered }, '', 'deny')).href).toStartWith(prefix!)
    }
  })
})
