import { describe, expect, test } from 'bun:test'
import { switchable } from '../support/database-outage'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'
import { schemaErrors } from '../support/json-schema'
import { approve, authorizeQuery, pkce, postForm, readConsentPage, REDIRECT, registerClient } from '../support/oauth'

// The OAuth routes write their responses by hand, so nothing ties them to /openapi.json but
// this: real responses of each route, checked against the schema documented for their status
// (every field sent must be documented, every documented required field sent).

let t: TestApp
let org: TestOrg
let spec: any

eachTestWithOrg(async (app, created) => {
  ;[t, org] = [app, created]
  spec = await json(await t.request('GET', '/openapi.json'))
})

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'

/** Checks one real response against the document: its status is listed, and its body matches that entry. Returns the JSON body. */
async function expectDocumented(method: string, path: string, response: Response): Promise<any> {
  const operation = spec.paths[path]?.[method.toLowerCase()]
  expect(operation ? path : `${method} ${path} is not documented`).toBe(path)
  const documented = operation.responses[String(response.status)]
  expect(documented ? response.status : `${method} ${path} answered ${response.status}, which is not documented`).toBe(response.status)
  const body = await response.text()
  if (!documented.content) {
    expect(body).toBe('')
    return
  }
  const type = (response.headers.get('content-type') ?? '').split(';')[0]!
  expect(Object.keys(documented.content)).toContain(type)
  if (type !== 'application/json') return
  expect(schemaErrors(documented.content[type].schema, JSON.parse(body))).toEqual([])
  return JSON.parse(body)
}

describe('documented responses of the OAuth routes', () => {
  test('discovery documents', async () => {
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/oauth-authorization-server/mcp', '/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      await expectDocumented('GET', path, await t.request('GET', path))
    }
  })

  test('registration: 201, 400 and the 429 with Retry-After', async () => {
    await expectDocumented('POST', '/oauth/register', await t.request('POST', '/oauth/register', { body: { client_name: 'Doc', redirect_uris: [REDIRECT] } }))
    await expectDocumented('POST', '/oauth/register', await t.request('POST', '/oauth/register', { body: { redirect_uris: ['javascript:alert(1)'] } }))
    let response = await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] } })
    while (response.status === 201) response = await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] } })
    expect(response.status).toBe(429)
    expect(spec.paths['/oauth/register'].post.responses['429'].headers['Retry-After']).toBeTruthy()
    expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0)
    await expectDocumented('POST', '/oauth/register', response)
  })

  test('token: 200 from the code flow and a refresh, 400, 401 and 401 with a Basic challenge', async () => {
    const clientId = await registerClient(t)
    const { verifier, challenge } = pkce()
    const code = (await approve(t, { clientId, challenge }, org.adminKey)).searchParams.get('code')!
    const issued = await postForm(t, '/oauth/token', { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier })
    const tokens = await expectDocumented('POST', '/oauth/token', issued)
    await expectDocumented('POST', '/oauth/token', await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId }))
    await expectDocumented('POST', '/oauth/token', await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId }))
    await expectDocumented('POST', '/oauth/token', await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: 'x', client_id: 'mcp_nobody' }))
    const basic = await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: 'x' }, { authorization: `Basic ${btoa('mcp_nobody:')}` })
    expect(basic.headers.get('www-authenticate')).toStartWith('Basic ')
    expect(spec.paths['/oauth/token'].post.responses['401'].headers['WWW-Authenticate']).toBeTruthy()
    await expectDocumented('POST', '/oauth/token', basic)
  })

  test('device authorization: 200, 400, 401 and the 429 with Retry-After; the device grant\'s token errors', async () => {
    const started = await postForm(t, '/oauth/device_authorization', { client_id: 'svc-cli' })
    const { device_code } = await expectDocumented('POST', '/oauth/device_authorization', started)
    await expectDocumented('POST', '/oauth/device_authorization', await postForm(t, '/oauth/device_authorization', { client_id: 'svc-cli', scope: 'admin' }))
    await expectDocumented('POST', '/oauth/device_authorization', await postForm(t, '/oauth/device_authorization', { client_id: 'nobody' }))
    await expectDocumented('POST', '/oauth/token', await postForm(t, '/oauth/token', { grant_type: DEVICE_GRANT, device_code, client_id: 'svc-cli' }))
    let response = await postForm(t, '/oauth/device_authorization', { client_id: 'svc-cli' })
    while (response.status === 200) response = await postForm(t, '/oauth/device_authorization', { client_id: 'svc-cli' })
    expect(response.status).toBe(429)
    expect(spec.paths['/oauth/device_authorization'].post.responses['429'].headers['Retry-After']).toBeTruthy()
    await expectDocumented('POST', '/oauth/device_authorization', response)
  })

  test('revocation: an empty 200 (no JSON is documented), 400 and 401', async () => {
    const clientId = await registerClient(t)
    const revoked = await postForm(t, '/oauth/revoke', { token: 'svc_mcp_unknown', client_id: clientId })
    expect(spec.paths['/oauth/revoke'].post.responses['200'].content).toBeUndefined()
    await expectDocumented('POST', '/oauth/revoke', revoked)
    await expectDocumented('POST', '/oauth/revoke', await postForm(t, '/oauth/revoke', { client_id: clientId }))
    await expectDocumented('POST', '/oauth/revoke', await postForm(t, '/oauth/revoke', { token: 'svc_mcp_unknown', client_id: 'mcp_nobody' }))
  })

  test('the pages: GET /oauth/authorize and GET /oauth/device document the query parameters they read', async () => {
    const authorize = spec.paths['/oauth/authorize'].get
    const parameters = authorize.parameters as Array<{ name: string; in: string; required: boolean; schema: any }>
    expect(parameters.every(parameter => parameter.in === 'query')).toBe(true)
    expect(parameters.map(parameter => parameter.name)).toEqual(['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method', 'scope', 'state', 'resource'])
    expect(parameters.filter(parameter => parameter.required).map(parameter => parameter.name)).toEqual(['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method'])
    // A request made of the required parameters (at their documented values) gets the page.
    const clientId = await registerClient(t)
    const values: Record<string, string> = { response_type: parameters[0]!.schema.enum[0], client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().challenge, code_challenge_method: parameters[4]!.schema.enum[0] }
    const page = await t.request('GET', `/oauth/authorize?${new URLSearchParams(values)}`)
    expect(page.status).toBe(200)
    await expectDocumented('GET', '/oauth/authorize', page)
    // Without one of them: the error page (never a redirect to the client).
    await expectDocumented('GET', '/oauth/authorize', await t.request('GET', `/oauth/authorize?${new URLSearchParams({ ...values, code_challenge_method: 'plain' })}`))

    const device = spec.paths['/oauth/device'].get
    expect(device.parameters.map((parameter: any) => [parameter.name, parameter.in, parameter.required])).toEqual([['user_code', 'query', false]])
    const { user_code } = await json(await postForm(t, '/oauth/device_authorization', { client_id: 'svc-cli' }))
    await expectDocumented('GET', '/oauth/device', await t.request('GET', `/oauth/device?user_code=${user_code}`))
    await expectDocumented('GET', '/oauth/device', await t.request('GET', '/oauth/device?user_code=BBBB-BBBB'))
  })

  test('with the database down: a documented 503, in the OAuth error shape where OAuth clients parse it', async () => {
    const clientId = await registerClient(t)
    const { fields, cookie } = await readConsentPage(await t.request('GET', authorizeQuery({ clientId, challenge: pkce().challenge })))
    const { user_code } = await json(await postForm(t, '/oauth/device_authorization', { client_id: 'svc-cli' }))
    const device = await readConsentPage(await t.request('GET', `/oauth/device?user_code=${user_code}`))
    const token = (await t.deps.oauth.tokens.issue({ clientId, userId: org.ownerUserId, orgId: org.orgId, scope: 'mcp:inference', resource: null, keyId: org.adminKeyId })).tokens
    t.clock.advance(60_000) // past the registration throttle's window
    const database = switchable(t.deps.database.client)
    database.set('unreachable')
    try {
      const json503 = [
        ['/oauth/register', await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] } })],
        ['/oauth/token', await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: token.refresh_token, client_id: clientId })],
        ['/oauth/device_authorization', await postForm(t, '/oauth/device_authorization', { client_id: 'svc-cli' })],
        ['/oauth/revoke', await postForm(t, '/oauth/revoke', { token: token.access_token, client_id: clientId })],
      ] as const
      for (const [path, response] of json503) {
        expect({ path, status: response.status }).toEqual({ path, status: 503 })
        expect(await expectDocumented('POST', path, response)).toEqual({ error: 'temporarily_unavailable', error_description: expect.stringContaining('database') })
      }
      // The pages a person's browser shows: the sign-in is neither refused nor accepted.
      const pages: Array<[string, string, Response]> = [
        ['GET', '/oauth/authorize', await t.request('GET', authorizeQuery({ clientId, challenge: pkce().challenge }))],
        ['POST', '/oauth/authorize', await postForm(t, '/oauth/authorize', { ...fields, api_key: org.adminKey, decision: 'approve' }, { cookie, origin: 'http://localhost' })],
        ['GET', '/oauth/device', await t.request('GET', `/oauth/device?user_code=${user_code}`)],
        ['POST', '/oauth/device', await postForm(t, '/oauth/device', { ...device.fields, api_key: org.adminKey, decision: 'approve' }, { cookie: device.cookie, origin: 'http://localhost' })],
      ]
      for (const [method, path, response] of pages) {
        expect({ path, status: response.status }).toEqual({ path, status: 503 })
        await expectDocumented(method, path, response)
      }
    } finally {
      database.set('ok')
    }
  })

  test('no OAuth JSON response is documented as an empty object', () => {
    for (const [path, item] of Object.entries(spec.paths) as Array<[string, Record<string, any>]>) {
      for (const [method, operation] of Object.entries(item)) {
        if (!operation.tags?.includes('OAuth')) continue
        for (const [status, reply] of Object.entries(operation.responses) as Array<[string, any]>) {
          const schema = reply.content?.['application/json']?.schema
          if (!schema) continue
          const name = `${method.toUpperCase()} ${path} ${status}`
          expect(Object.keys(schema.properties ?? {}).length ? name : `${name} documents no properties`).toBe(name)
        }
      }
    }
  })
})
