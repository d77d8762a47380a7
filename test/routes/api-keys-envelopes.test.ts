import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { KEYS, keysApi } from '../support/api-keys'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'

// Request ids and unknown routes around key management (spec §3.1, §5), and the official openai
// SDK parsing our error envelopes.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))
const { create, createOk, revoke, expectApiError } = keysApi(() => ({ t, org }))

describe('request ids', () => {
  test('every response carries x-request-id, and errors repeat it in the body', async () => {
    const key = await createOk({ name: 'rid' })
    const plain = await createOk({ name: 'plain' })
    const responses: Response[] = [
      await create({ name: 'ok' }),
      await t.request('GET', KEYS, { key: org.adminKey }),
      await revoke(key.id),
      await create({ name: '' }),
      await t.request('GET', KEYS),
      await t.request('GET', KEYS, { key: plain.token }),
      await revoke(key.id),
      await create('x'.repeat(20_000)),
      await t.request('GET', '/api/v1/nope'),
      await t.request('GET', '/v1/nope'),
    ]
    expect(responses.map(response => response.status)).toEqual([201, 200, 204, 400, 401, 403, 404, 413, 404, 404])
    const ids = responses.map(response => response.headers.get('x-request-id'))
    for (const id of ids) expect(id).toMatch(/^req_[0-9a-f]{32}$/)
    expect(new Set(ids).size).toBe(ids.length)
    for (const response of responses.slice(3, 9)) expect((await json(response)).error.request_id).toBe(response.headers.get('x-request-id')!)
  })

  test('a well-formed incoming x-request-id is kept; a malformed one, or one holding a credential, is replaced', async () => {
    const kept = await create({ name: '' }, org.adminKey, { 'x-request-id': 'trace-01.abc:XYZ_9' })
    expect(kept.headers.get('x-request-id')).toBe('trace-01.abc:XYZ_9')
    expect((await json(kept)).error.request_id).toBe('trace-01.abc:XYZ_9')
    // A credential as the id would be stored on ledger entries and sent upstream in the clear.
    for (const bad of ['has space', 'x'.repeat(129), 'semi;colon', '<script>', '', org.adminKey, `trace.svc_mcp_${'a'.repeat(43)}`]) {
      const response = await t.request('GET', KEYS, { headers: { 'x-request-id': bad } })
      expect(response.status).toBe(401)
      const id = response.headers.get('x-request-id')!
      expect(id).toMatch(/^req_[0-9a-f]{32}$/)
      expect((await json(response)).error.request_id).toBe(id)
    }
  })
})

describe('unknown routes', () => {
  test('/api/v1 gets the api envelope', async () => {
    for (const [method, path] of [
      ['GET', '/api/v1/nope'],
      ['POST', '/api/v1/nope'],
      ['DELETE', `${KEYS}/${org.adminKeyId}/extra`],
    ] as const) {
      const error = await expectApiError(await t.request(method, path, { key: org.adminKey }), 404, 'not_found')
      expect(error.message).toContain(path)
    }
  })

  test('/v1 gets the OpenAI envelope', async () => {
    const response = await t.request('GET', '/v1/nope')
    expect(response.status).toBe(404)
    expect(response.headers.get('x-request-id')).toBeTruthy()
    const body = await json(response)
    expect(body).toEqual({ error: { message: 'no route for GET /v1/nope', type: 'invalid_request_error', param: null, code: 'not_found' } })
  })

  describe('the official openai SDK parses our envelopes', () => {
    let server: ReturnType<typeof Bun.serve>
    beforeEach(() => {
      server = Bun.serve({ port: 0, fetch: t.app.fetch })
    })
    afterEach(() => {
      server.stop(true)
    })

    test('a 404 on /v1 is a NotFoundError with our code and request id', async () => {
      const client = new OpenAI({ apiKey: org.adminKey, baseURL: `${server.url.origin}/v1`, maxRetries: 0 })
      const error = await client.files.list().then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(error).toBeInstanceOf(OpenAI.NotFoundError)
      const apiError = error as InstanceType<typeof OpenAI.APIError>
      expect(apiError.status).toBe(404)
      expect(apiError.code).toBe('not_found')
      expect(apiError.type).toBe('invalid_request_error')
      expect(apiError.param).toBeNull()
      expect(apiError.requestID).toMatch(/^req_[0-9a-f]{32}$/)
      expect(apiError.message).toContain('no route for GET /v1/files')
    })

    test('a bad credential is an AuthenticationError; an invalid field is a BadRequestError naming it', async () => {
      const base = `${server.url.origin}/api/v1`
      const bad = new OpenAI({ apiKey: 'z_sk_not-a-real-key', baseURL: base, maxRetries: 0 })
      const unauthorized = await bad.get('/api-keys').then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(unauthorized).toBeInstanceOf(OpenAI.AuthenticationError)
      expect((unauthorized as InstanceType<typeof OpenAI.APIError>).status).toBe(401)
      expect((unauthorized as InstanceType<typeof OpenAI.APIError>).code).toBe('unauthorized')

      const client = new OpenAI({ apiKey: org.adminKey, baseURL: base, maxRetries: 0 })
      const invalid = await client.post('/api-keys', { body: { name: 'x', spend_cap_period: 'daily', spend_cap_nanos: '1.5' } }).then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(invalid).toBeInstanceOf(OpenAI.BadRequestError)
      expect((invalid as InstanceType<typeof OpenAI.APIError>).code).toBe('invalid_request')
      expect((invalid as InstanceType<typeof OpenAI.APIError>).param).toBe('spend_cap_nanos')

      // And the happy path decodes too.
      const created = (await client.post('/api-keys', { body: { name: 'via sdk' } })) as { key: { token: string; name: string } }
      expect(created.key.name).toBe('via sdk')
      expect(created.key.token).toStartWith('z_sk_')
    })
  })
})
