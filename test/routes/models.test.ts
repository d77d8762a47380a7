import { afterEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { catalogFile } from '../support/catalog'
import { handleFetch, openAIClient } from '../support/gateway'
import { buildConfiguredApp, buildTestApp, json, type TestApp } from '../support/harness'

// GET /v1/models and GET /api/v1/models (spec §2.7, §4.11, §7): public, identical with or
// without credentials or X-Org-ID, filtered by ?privacy_tier=, 400 on an unknown tier or any
// other query parameter (OpenAI envelope on /v1, ours on /api/v1).

let t: TestApp
afterEach(async () => {
  await t?.close()
})

const DEMO_CAPABILITIES = { tools: true, reasoning: true, vision: false, file_input: false, supports_web_fetch: false, supports_web_search: false }
const DEMO_PRICING = {
  input_per_mtok_nanos: '100000000',
  output_per_mtok_nanos: '400000000',
  cached_input_per_mtok_nanos: '100000000',
  cache_write_input_per_mtok_nanos: '125000000',
  cache_write_1h_input_per_mtok_nanos: '200000000',
  reasoning_per_mtok_nanos: '400000000',
}

/** A config file with three models on two providers (one private-capable). */
const FILE = catalogFile(
  `  - id: llama-3.3-70b
    level: private
    backends: [{ provider: local, model: meta-llama/Llama-3.3-70B-Instruct }]
    price: { input_per_mtok: "0.40", output_per_mtok: "0.80", cached_input_per_mtok: "0.000000001", reasoning_per_mtok: "1.25", cache_write_input_per_mtok: "0.45", cache_write_1h_input_per_mtok: "0.7" }
    context_length: 131072
    max_output_tokens: 8192
    capabilities: { tools: true, reasoning: false, vision: false, file_input: true, supports_web_fetch: true, supports_web_search: true }
  - id: gpt-x
    backends: [{ provider: cloud, model: gpt-x-2025 }]
    price: { input_per_mtok: "2.5", output_per_mtok: "10" }
    context_length: 128000
    max_output_tokens: 16384
    capabilities: { vision: true }
  - id: tiny
    backends: [{ provider: local, model: tiny }]
    price: { input_per_mtok: "0", output_per_mtok: "0" }
    context_length: 2048
    max_output_tokens: 2048`,
  ['  - { id: cloud, type: openai-compatible, base_url: "https://cloud.example/v1", api_key_env: CLOUD_KEY }'],
)

async function fileApp(): Promise<TestApp> {
  return buildConfiguredApp(FILE, { SVC_CONFIG: '/svc.yaml', CLOUD_KEY: 'secret' })
}

async function ok(response: Response): Promise<any> {
  const text = await response.text()
  expect(`${response.status} ${text}`).toStartWith('200 ')
  expect(response.headers.get('content-type')).toStartWith('application/json')
  expect(response.headers.get('x-request-id')).toBeTruthy()
  return JSON.parse(text)
}

describe('happy', () => {
  test('GET /v1/models: the embedded default in the OpenAI list shape', async () => {
    t = await buildTestApp()
    expect(await ok(await t.request('GET', '/v1/models'))).toEqual({
      object: 'list',
      data: [
        { id: 'demo-anonymous', object: 'model', created: 0, owned_by: 'svc', privacy_level: 'anonymous', context_length: 32768, max_output_tokens: 4096 },
        { id: 'demo-private', object: 'model', created: 0, owned_by: 'svc', privacy_level: 'private', context_length: 32768, max_output_tokens: 4096 },
        { id: 'demo-alt', object: 'model', created: 0, owned_by: 'svc', privacy_level: 'anonymous', context_length: 32768, max_output_tokens: 4096 },
      ],
    })
  })

  test('GET /api/v1/models: levels, capabilities, prices in nanos, limits', async () => {
    t = await buildTestApp()
    expect(await ok(await t.request('GET', '/api/v1/models'))).toEqual({
      data: [
        { id: 'demo-anonymous', object: 'model', privacy_levels: ['anonymous'], capabilities: DEMO_CAPABILITIES, pricing: DEMO_PRICING, context_length: 32768, max_output_tokens: 4096 },
        { id: 'demo-private', object: 'model', privacy_levels: ['private'], capabilities: DEMO_CAPABILITIES, pricing: DEMO_PRICING, context_length: 32768, max_output_tokens: 4096 },
        { id: 'demo-alt', object: 'model', privacy_levels: ['anonymous'], capabilities: DEMO_CAPABILITIES, pricing: DEMO_PRICING, context_length: 32768, max_output_tokens: 4096 },
      ],
    })
  })

  test('a config file: every model in order; prices exact to the nano; absent cached/reasoning/cache-write prices fall back', async () => {
    t = await fileApp()
    const body = await ok(await t.request('GET', '/api/v1/models'))
    expect(body.data.map((entry: any) => [entry.id, entry.privacy_levels])).toEqual([
      ['llama-3.3-70b', ['private']],
      ['gpt-x', ['anonymous']],
      ['tiny', ['anonymous']],
    ])
    expect(body.data[0]).toMatchObject({
      capabilities: { tools: true, reasoning: false, vision: false, file_input: true, supports_web_fetch: true, supports_web_search: true },
      pricing: {
        input_per_mtok_nanos: '400000000',
        output_per_mtok_nanos: '800000000',
        cached_input_per_mtok_nanos: '1',
        cache_write_input_per_mtok_nanos: '450000000',
        cache_write_1h_input_per_mtok_nanos: '700000000',
        reasoning_per_mtok_nanos: '1250000000',
      },
      context_length: 131072,
      max_output_tokens: 8192,
    })
    expect(body.data[1]).toMatchObject({
      capabilities: { tools: false, reasoning: false, vision: true, file_input: false, supports_web_fetch: false, supports_web_search: false },
    })
    // Unset write prices are 1.25× and 2× the input price.
    expect(body.data[1].pricing).toEqual({
      input_per_mtok_nanos: '2500000000',
      output_per_mtok_nanos: '10000000000',
      cached_input_per_mtok_nanos: '2500000000',
      cache_write_input_per_mtok_nanos: '3125000000',
      cache_write_1h_input_per_mtok_nanos: '5000000000',
      reasoning_per_mtok_nanos: '10000000000',
    })
    expect(body.data[2].pricing).toEqual({
      input_per_mtok_nanos: '0',
      output_per_mtok_nanos: '0',
      cached_input_per_mtok_nanos: '0',
      cache_write_input_per_mtok_nanos: '0',
      cache_write_1h_input_per_mtok_nanos: '0',
      reasoning_per_mtok_nanos: '0',
    })
    // Upstream names, provider ids and keys are the operator's business, never the catalog's.
    const text = JSON.stringify(body) + JSON.stringify(await ok(await t.request('GET', '/v1/models')))
    for (const secret of ['meta-llama/Llama', 'gpt-x-2025', 'cloud.example', '127.0.0.1', 'secret', '"local"']) expect(text).not.toContain(secret)
  })

  test.each([
    ['anonymous', ['gpt-x', 'tiny']],
    ['private', ['llama-3.3-70b']],
    ['confidential', []],
    ['encrypted', []],
  ])('?privacy_tier=%s filters both lists', async (tier, ids) => {
    t = await fileApp()
    const openAI = await ok(await t.request('GET', `/v1/models?privacy_tier=${tier}`))
    expect(openAI.object).toBe('list')
    expect(openAI.data.map((entry: any) => entry.id)).toEqual(ids)
    for (const entry of openAI.data) expect(entry.privacy_level).toBe(tier)
    const api = await ok(await t.request('GET', `/api/v1/models?privacy_tier=${tier}`))
    expect(api.data.map((entry: any) => entry.id)).toEqual(ids)
  })

  test('the official openai SDK lists the models', async () => {
    t = await buildTestApp()
    const client = openAIClient('http://gateway.test', 'not-needed-for-a-public-route', handleFetch(t))
    const ids: string[] = []
    for await (const model of client.models.list()) {
      expect(model.object).toBe('model')
      expect(typeof model.created).toBe('number')
      ids.push(model.id)
    }
    expect(ids).toEqual(['demo-anonymous', 'demo-private', 'demo-alt'])
    // models.retrieve: the listed entry; an id the gateway does not serve is 404 in the envelope.
    const listed = (await json(await t.request('GET', '/v1/models'))).data.find((model: { id: string }) => model.id === 'demo-private')
    expect(await client.models.retrieve('demo-private')).toEqual(listed)
    const missing = await client.models.retrieve('gpt-nope').catch(error => error)
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError)
    expect([missing.status, missing.code, missing.param]).toEqual([404, 'not_found', 'model'])
  })
})

describe('errors', () => {
  test.each(['bogus', '', 'Private', 'tee', 'anonymous,private'])('?privacy_tier=%p is 400 in the envelope of each surface', async tier => {
    t = await buildTestApp()
    const openAI = await t.request('GET', `/v1/models?privacy_tier=${encodeURIComponent(tier)}`)
    expect(openAI.status).toBe(400)
    expect(await json(openAI)).toEqual({
      error: { message: 'privacy_tier must be one of anonymous, private, confidential, encrypted', type: 'invalid_request_error', param: 'privacy_tier', code: 'invalid_request' },
    })
    const api = await t.request('GET', `/api/v1/models?privacy_tier=${encodeURIComponent(tier)}`)
    expect(api.status).toBe(400)
    expect(await json(api)).toEqual({
      error: { code: 'invalid_request', message: 'privacy_tier must be one of anonymous, private, confidential, encrypted', param: 'privacy_tier', request_id: api.headers.get('x-request-id') },
    })
  })

  test.each([
    ['?tier=private', 'tier'],
    ['?privacy_tier=private&limit=5', 'limit'],
    ['?PRIVACY_TIER=private', 'PRIVACY_TIER'],
    ['?privacy_tier=private&privacy_tier=anonymous', 'privacy_tier'],
    ['?=x', ''],
  ])('%s is 400 naming %p', async (query, param) => {
    t = await buildTestApp()
    for (const path of ['/v1/models', '/api/v1/models']) {
      const response = await t.request('GET', `${path}${query}`)
      expect(response.status).toBe(400)
      const body = await json(response)
      expect(body.error.param).toBe(param)
      expect(body.error.message).toMatch(param === 'privacy_tier' ? /privacy_tier may be given once/ : /unknown query parameter/)
    }
  })

  test('other methods are 405, naming GET', async () => {
    t = await buildTestApp()
    for (const [method, path] of [['POST', '/v1/models'], ['DELETE', '/api/v1/models']] as const) {
      const response = await t.request(method, path, { body: method === 'POST' ? {} : undefined })
      expect([response.status, response.headers.get('allow')]).toEqual([405, 'GET, HEAD'])
    }
  })
})

describe('auth', () => {
  test('identical with or without credentials, whatever they are, and with any X-Org-ID', async () => {
    t = await buildTestApp()
    const org = await t.createOrg()
    const other = await t.createOrg('other')
    const member = await t.createMember(org, 'member')
    await t.deps.keys.revoke(org.orgId, member.keyId)
    const variants: Array<Record<string, string>> = [
      {},
      { authorization: `Bearer ${org.adminKey}` },
      { 'x-api-key': org.adminKey },
      { authorization: `Bearer ${member.key}` }, // revoked
      { authorization: 'Bearer z_sk_not-a-real-key' },
      { authorization: 'Basic abc' },
      { authorization: `Bearer ${org.adminKey}`, 'x-org-id': other.orgId },
      { 'x-org-id': 'org_nobody' },
      { cookie: 'session=x' },
    ]
    for (const path of ['/v1/models', '/api/v1/models', '/v1/models?privacy_tier=private', '/api/v1/models?privacy_tier=anonymous']) {
      const bodies = new Set<string>()
      for (const headers of variants) {
        const response = await t.request('GET', path, { headers })
        expect(response.status).toBe(200)
        // No auth step ran: no rate-limit window was consulted.
        expect(response.headers.get('x-ratelimit-limit')).toBeNull()
        bodies.add(await response.text())
      }
      expect(bodies.size).toBe(1)
    }
  })

  test('takes nothing from any bucket: a thousand calls never hit 429', async () => {
    t = await buildTestApp()
    const org = await t.createOrg()
    for (let index = 0; index < 1000; index++) {
      const response = await t.request('GET', index % 2 ? '/v1/models' : '/api/v1/models', { key: org.adminKey })
      if (response.status !== 200) throw new Error(`call ${index}: ${response.status}`)
    }
    // The key's management window is untouched.
    const limits = await json(await t.request('GET', '/api/v1/rate-limits', { key: org.adminKey }))
    expect(limits.management.key.remaining).toBe(limits.management.key.limit)
  })

  test('no prepaid balance is needed (an unfunded organization sees the same catalog)', async () => {
    t = await buildTestApp()
    const broke = await t.createOrg('broke', 0n)
    const anonymous = await (await t.request('GET', '/api/v1/models')).text()
    expect(await (await t.request('GET', '/api/v1/models', { key: broke.adminKey })).text()).toBe(anonymous)
  })
})

test('both routes are documented under the Models tag with typed responses', async () => {
  t = await buildTestApp()
  const spec = await json(await t.request('GET', '/openapi.json'))
  for (const path of ['/v1/models', '/api/v1/models']) {
    const operation = spec.paths[path].get
    expect(operation.tags).toEqual(['Models'])
    expect(operation.summary).toBeTruthy()
    expect(operation.security).toBeUndefined()
    expect(operation.responses['200'].content['application/json'].schema).toBeTruthy()
    expect(operation.responses['400'].content['application/json'].schema).toBeTruthy()
    // /v1/models also documents an Anthropic client's paging (test/routes/openapi.test.ts).
    expect(operation.parameters.map((parameter: any) => [parameter.in, parameter.name])[0]).toEqual(['query', 'privacy_tier'])
  }
  expect(spec.paths['/api/v1/models'].get.parameters).toHaveLength(1)
})
