import { describe, expect, test } from 'bun:test'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'
import { approve, approveDevice, authorizeQuery, codeFlowTokens, pkce, postForm, REDIRECT, registerClient } from '../support/oauth'

// Resource indicators (RFC 8707). The gateway has two protected resources, each advertised by its
// RFC 9728 document: /mcp (mcp:inference, svc_mcp_ tokens) and the API root (cli:inference,
// svc_cli_ tokens). A `resource` must name one of them, and the one of the scope asked for:
// otherwise the client would get a token its resource refuses, usable on the other one.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

const MCP = 'http://localhost/mcp'
const API = 'http://localhost'
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'

const chat = (token: string) => t.request('POST', '/v1/chat/completions', { key: token, body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] } })

/** The authorization page's status and, on a 400, the error code it names. */
async function authorize(clientId: string, params: { scope?: string; resource?: string }): Promise<{ status: number; error?: string; location: string | null }> {
  const response = await t.request('GET', authorizeQuery({ clientId, challenge: pkce().challenge, ...params }))
  const error = /\((\w+)\)/.exec(await response.text())?.[1]
  return { status: response.status, error: response.status === 400 ? error : undefined, location: response.headers.get('location') }
}

describe('the authorization request', () => {
  test('a resource must name this gateway', async () => {
    const clientId = await registerClient(t)
    expect(await authorize(clientId, { resource: 'https://other.example/mcp' })).toMatchObject({ status: 400, error: 'invalid_target' })
    expect((await authorize(clientId, { resource: `${API}/v1` })).error).toBe('invalid_target')
    expect((await authorize(clientId, { resource: MCP })).status).toBe(200)
  })

  test('a resource may repeat (RFC 8707 §2): copies of one are that one, two different ones are invalid_target', async () => {
    // Before: any repeated parameter was refused, a resource named twice too ("A parameter is repeated.").
    const clientId = await registerClient(t)
    const query = authorizeQuery({ clientId, challenge: pkce().challenge, resource: MCP })
    expect((await t.request('GET', `${query}&resource=${encodeURIComponent(MCP)}`)).status).toBe(200)
    // Regression QA: spellings parseResource reads as one resource were refused as two.
    for (const spelling of [`${MCP}/`, 'HTTP://LOCALHOST/mcp', 'http://localhost:80/mcp']) expect((await t.request('GET', `${query}&resource=${encodeURIComponent(spelling)}`)).status).toBe(200)
    const two = await t.request('GET', `${query}&resource=${encodeURIComponent(API)}`)
    expect(two.status).toBe(400)
    expect(await two.text()).toContain('(invalid_target): resource names more than one resource')
    const body = (...resources: string[]) => `grant_type=refresh_token&client_id=${clientId}&refresh_token=x${resources.map(each => `&resource=${encodeURIComponent(each)}`).join('')}`
    const token = (text: string) => t.app.handle(new Request('http://localhost/oauth/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: text }))
    // Copies of one resource pass the form: the unknown refresh token is what fails.
    expect((await json(await token(body(MCP, MCP)))).error).toBe('invalid_grant')
    expect((await json(await token(body(API, `${API}/`)))).error).toBe('invalid_grant')
    expect(await json(await token(body(MCP, API)))).toMatchObject({ error: 'invalid_target' })
  })

  test('each advertised resource goes with the scope its metadata names, and only with it', async () => {
    const clientId = await registerClient(t)
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const metadata = await json(await t.request('GET', path))
      const [scope] = metadata.scopes_supported as string[]
      const otherScope = scope === 'mcp:inference' ? 'cli:inference' : 'mcp:inference'
      expect((await authorize(clientId, { scope, resource: metadata.resource })).status).toBe(200)
      // The QA report's pairs: cli:inference for /mcp, mcp:inference for the API root. An error
      // page, never a redirect to the client (see redirects.test.ts).
      expect(await authorize(clientId, { scope: otherScope, resource: metadata.resource })).toEqual({ status: 400, error: 'invalid_target', location: null })
    }
  })

  test('the consent post is checked the same way (a tampered form is the error page)', async () => {
    const clientId = await registerClient(t)
    const { challenge } = pkce()
    const form = { response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 's', scope: 'cli:inference', resource: MCP, csrf: 'x', decision: 'approve', api_key: org.adminKey }
    const response = await postForm(t, '/oauth/authorize', form, { origin: 'http://localhost' })
    expect(response.status).toBe(400)
    expect(response.headers.get('location')).toBeNull()
    expect(await response.text()).toContain('(invalid_target)')
  })

  test('a resource without a scope gets that resource’s scope: the API root gives a working svc_cli_ token', async () => {
    const clientId = await registerClient(t)
    const { verifier, challenge } = pkce()
    const code = (await approve(t, { clientId, challenge, resource: `${API}/` }, org.adminKey)).searchParams.get('code')!
    const tokens = await json(await postForm(t, '/oauth/token', { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: API }))
    expect(tokens.scope).toBe('cli:inference')
    expect(tokens.access_token).toMatch(/^svc_cli_/)
    expect((await chat(tokens.access_token)).status).toBe(200)
  })
})

describe('the token endpoint', () => {
  /** Authorizes `scope` (naming `authorized` as the resource, if given), then exchanges the code naming `resource`. */
  async function exchange(resource: string, authorized?: string, scope = 'mcp:inference') {
    const clientId = await registerClient(t)
    const { verifier, challenge } = pkce()
    const code = (await approve(t, { clientId, challenge, scope, resource: authorized }, org.adminKey)).searchParams.get('code')!
    const send = (named: string | undefined) => postForm(t, '/oauth/token', { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource: named })
    return { response: await send(resource), send }
  }

  test('the code exchange may spell the same resource differently (trailing slash, host case)', async () => {
    // Before: compared as raw strings, `…/mcp` then `…/mcp/` was invalid_target at the exchange.
    const { response } = await exchange('http://LOCALHOST/mcp/', MCP)
    expect(response.status).toBe(200)
    expect((await json(response)).access_token).toMatch(/^svc_mcp_/)
  })

  test('a code exchange naming the other resource of this gateway is refused', async () => {
    const { response } = await exchange(`${API}/`, MCP)
    expect(response.status).toBe(400)
    expect((await json(response)).error).toBe('invalid_target')
  })

  test('a code authorized without a resource is refused for the resource of another scope, and is not spent', async () => {
    const { response, send } = await exchange(MCP, undefined, 'cli:inference')
    expect(response.status).toBe(400)
    const body = await json(response)
    expect(body.error).toBe('invalid_target')
    expect(body.error_description).toContain('cli:inference')
    const retried = await send(API)
    expect(retried.status).toBe(200)
    expect((await json(retried)).access_token).toMatch(/^svc_cli_/)
  })

  test('a refresh naming the resource of another scope is refused, and the refresh token is not spent', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey, 'mcp:inference')
    const refresh = (resource: string) => postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: tokens.clientId, resource })
    const refused = await refresh(API)
    expect(refused.status).toBe(400)
    expect((await json(refused)).error).toBe('invalid_target')
    const refreshed = await refresh(`${MCP}/`)
    expect(refreshed.status).toBe(200)
    expect((await json(refreshed)).access_token).toMatch(/^svc_mcp_/)
  })

  test('a device-code poll naming the resource of another scope is refused, and the approval is not spent', async () => {
    const deviceCode = await approveDevice(t, org.adminKey)
    const poll = (resource: string) => postForm(t, '/oauth/token', { grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: 'svc-cli', resource })
    const refused = await poll(MCP)
    expect(refused.status).toBe(400)
    expect((await json(refused)).error).toBe('invalid_target')
    const tokens = await json(await poll(API))
    expect(tokens.access_token).toMatch(/^svc_cli_/)
  })
})
