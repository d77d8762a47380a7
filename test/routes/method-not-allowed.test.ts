import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { buildTestApp, json, type TestApp, type TestOrg } from '../support/harness'

// A known path asked with a method it does not take is 405 with `Allow` (RFC 9110 §15.5.6), in
// the envelope of the path's surface, as OpenAI's API answers; an unknown path stays 404.

let t: TestApp
let org: TestOrg
beforeAll(async () => {
  t = await buildTestApp()
  org = await t.createOrg()
})
afterAll(() => t.close())

const KEYS = '/api/v1/api-keys'

describe('a wrong method on a known path', () => {
  test('is 405 naming the methods the path takes, in each surface\'s envelope', async () => {
    const cases = [
      ['GET', '/v1/chat/completions', 'POST'],
      ['PUT', KEYS, 'GET, HEAD, POST'],
      ['GET', `${KEYS}/${org.adminKeyId}`, 'DELETE'],
      ['POST', '/v1/models/demo-anonymous', 'GET, HEAD'],
      ['DELETE', '/v1/models/org/model-with-slash', 'GET, HEAD'],
      ['OPTIONS', '/api/v1/billing/balance', 'GET, HEAD'],
      // The router serves a trailing slash too; /mcp refuses GET and DELETE itself (405, Allow: POST).
      ['GET', '/v1/chat/completions/', 'POST'],
      ['DELETE', '/api/v1/api-keys/', 'GET, HEAD, POST'],
      ['PUT', '/mcp', 'OPTIONS, POST'],
    ] as const
    for (const [method, path, allow] of cases) {
      const response = await t.request(method, path, { key: org.adminKey })
      expect([method, path, response.status, response.headers.get('allow')]).toEqual([method, path, 405, allow])
      const { error } = await json(response)
      // /mcp answers in JSON-RPC: the gateway's code is in error.data.
      expect(path === '/mcp' ? error.data.code : error.code).toBe('method_not_allowed')
      expect(error.message).toBe(`${method} is not allowed on ${path}; it takes ${allow}`)
    }
  })

  test("is counted under the route's own label, not as an unmatched path", async () => {
    const series = (route: string) => `svc_http_requests_total{route="${route}",method="PUT",status="405"}`
    const count = (route: string) => Number(t.deps.metrics.registry.render().split('\n').find(line => line.startsWith(`${series(route)} `))?.split(' ')[1] ?? 0)
    const before = count('/v1/models/:model')
    expect((await t.request('PUT', '/v1/models/demo-anonymous', { key: org.adminKey })).status).toBe(405)
    expect(count('/v1/models/:model')).toBe(before + 1)
    expect(count('unmatched')).toBe(0)
  })

  test('on /v1/messages it is the Anthropic envelope', async () => {
    const response = await t.request('GET', '/v1/messages', { key: org.adminKey })
    expect([response.status, response.headers.get('allow')]).toEqual([405, 'POST'])
    expect(await json(response)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: 'GET is not allowed on /v1/messages; it takes POST' } })
  })

  test('an unknown path is still 404', async () => {
    const response = await t.request('GET', '/v1/chat/completion', { key: org.adminKey })
    expect(response.status).toBe(404)
    expect(response.headers.get('allow')).toBeNull()
    expect((await json(response)).error.code).toBe('not_found')
  })

  test('the official SDKs see an APIError with status 405', async () => {
    const base = t.listen()
    const openai = new OpenAI({ apiKey: org.adminKey, baseURL: `${base}/v1`, maxRetries: 0 })
    const caught = await openai.get('/chat/completions').then(() => undefined, (error: unknown) => error)
    expect(caught).toBeInstanceOf(OpenAI.APIError)
    expect((caught as InstanceType<typeof OpenAI.APIError>).status).toBe(405)
    expect((caught as InstanceType<typeof OpenAI.APIError>).code).toBe('method_not_allowed')
    const anthropic = new Anthropic({ apiKey: org.adminKey, baseURL: base, maxRetries: 0 })
    const refused = await anthropic.get('/v1/messages').then(() => undefined, (error: unknown) => error)
    expect(refused).toBeInstanceOf(Anthropic.APIError)
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(405)
  })
})
