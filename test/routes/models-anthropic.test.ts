import { afterEach, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { catalogFile } from '../support/catalog'
import { anthropicClient, handleFetch, openAIClient } from '../support/gateway'
import { buildConfiguredApp, json, type TestApp } from '../support/harness'

// GET /v1/models and GET /v1/models/{model} as the @anthropic-ai/sdk calls them (models.list,
// models.retrieve): the same paths as the OpenAI SDK, told apart by the `anthropic-version`
// header every Anthropic client sends. Anthropic's shape, its limit/after_id/before_id cursor
// pagination and its error envelope; the OpenAI answer is unchanged without the header.

let t: TestApp
afterEach(async () => {
  await t?.close()
})

/** Five callable ids: a, b, b:confidential, c, d (b also offered at the confidential level). */
const FILE = catalogFile(
  ['a', 'b', 'c', 'd']
    .map(
      id => `  - id: ${id}
    backends: [{ provider: local, model: ${id}-upstream }]
${id === 'b' ? '    confidential: [{ provider: tee, model: b-tee }]\n' : ''}    price: { input_per_mtok: "1", output_per_mtok: "2" }
    context_length: 200000
    max_output_tokens: 64000`,
    )
    .join('\n'),
  ['  - { id: tee, type: attested, base_url: "https://tee.example/v1", proof_format: dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2 }'],
)

async function fileApp(): Promise<TestApp> {
  return buildConfiguredApp(FILE, { SVC_CONFIG: '/svc.yaml' })
}

function anthropic(app: TestApp): Anthropic {
  return anthropicClient('http://gateway.test', 'not-needed-for-a-public-route', handleFetch(app))
}

const entry = (id: string, level = 'anonymous') => ({
  type: 'model' as const,
  id,
  display_name: id,
  created_at: '1970-01-01T00:00:00Z',
  max_input_tokens: 200000,
  max_tokens: 64000,
  lifecycle: 'active' as const,
  deprecated_at: null,
  retires_at: null,
  capabilities: null,
  line: null,
  privacy_level: level,
})

describe('the Anthropic SDK', () => {
  test('models.list: Anthropic entries and page fields, every callable id', async () => {
    t = await fileApp()
    const page = await anthropic(t).models.list()
    expect(page.data).toEqual([entry('a'), entry('b'), entry('b:confidential', 'confidential'), entry('c'), entry('d')])
    expect([page.has_more, page.first_id, page.last_id]).toEqual([false, 'a', 'd'])
  })

  test('models.list({limit}) pages forward with after_id, and the iterator walks every page', async () => {
    t = await fileApp()
    const client = anthropic(t)
    const first = await client.models.list({ limit: 2 })
    // The SDK's request id comes from `request-id`, on these answers too (QA: it was null).
    expect((await client.models.list({ limit: 2 }).withResponse()).request_id).toMatch(/^req_/)
    expect((await client.models.retrieve('a'))._request_id).toMatch(/^req_/)
    expect(first.data.map(model => model.id)).toEqual(['a', 'b'])
    expect([first.has_more, first.first_id, first.last_id]).toEqual([true, 'a', 'b'])
    const second = await first.getNextPage()
    expect(second.data.map(model => model.id)).toEqual(['b:confidential', 'c'])
    const ids: string[] = []
    for await (const model of client.models.list({ limit: 2 })) ids.push(model.id)
    expect(ids).toEqual(['a', 'b', 'b:confidential', 'c', 'd'])
  })

  test('before_id pages backward; the filter still applies', async () => {
    t = await fileApp()
    const client = anthropic(t)
    const back = await client.models.list({ before_id: 'd', limit: 2 })
    expect(back.data.map(model => model.id)).toEqual(['b:confidential', 'c'])
    expect([back.has_more, back.first_id, back.last_id]).toEqual([true, 'b:confidential', 'c'])
    const start = await client.models.list({ before_id: 'b', limit: 5 })
    expect([start.data.map(model => model.id), start.has_more]).toEqual([['a'], false])
    const confidential = await client.models.list({}, { query: { privacy_tier: 'confidential' } })
    expect(confidential.data).toEqual([entry('b:confidential', 'confidential')])
    const empty = await client.models.list({}, { query: { privacy_tier: 'encrypted' } })
    expect([empty.data, empty.has_more, empty.first_id, empty.last_id]).toEqual([[], false, null, null])
  })

  test('models.retrieve: the Anthropic entry; an unknown id is NotFoundError in the Anthropic envelope', async () => {
    t = await fileApp()
    const client = anthropic(t)
    expect(await client.models.retrieve('b:confidential')).toMatchObject(entry('b:confidential', 'confidential'))
    const missing = await client.models.retrieve('claude-nope').catch(error => error)
    expect(missing).toBeInstanceOf(Anthropic.NotFoundError)
    expect(missing.error).toMatchObject({ type: 'error', error: { type: 'not_found_error' } })
    expect(missing.error.error.message).toContain('claude-nope')
  })

  test.each([
    [{ limit: 0 }, 'limit'],
    [{ limit: 1001 }, 'limit'],
    [{ limit: 1.5 }, 'limit'],
    [{ after_id: 'nope' }, 'after_id'],
    [{ before_id: 'nope' }, 'before_id'],
    [{ after_id: 'a', before_id: 'c' }, 'before_id'],
  ])('models.list(%p) is a 400 BadRequestError naming %s', async (params, param) => {
    t = await fileApp()
    const error = await anthropic(t).models.list(params as never).catch(caught => caught)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    expect(error.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } })
    expect(error.error.error.message).toContain(param)
  })

  test('beta.models.list as earlier SDK releases (bundled in Claude Code) send it (?beta=true) pages the same', async () => {
    t = await fileApp()
    const page = await anthropic(t).beta.models.list({}, { query: { beta: 'true', limit: 2 } })
    expect(page.data.map(model => model.id)).toEqual(['a', 'b'])
    const ids: string[] = []
    for await (const model of anthropic(t).beta.models.list({}, { query: { beta: 'true', limit: 3 } })) ids.push(model.id)
    expect(ids).toEqual(['a', 'b', 'b:confidential', 'c', 'd'])
  })

  test('the lifecycle filter: every catalog model is active', async () => {
    t = await fileApp()
    const client = anthropic(t)
    const active = await client.models.list({ lifecycle: ['active', 'deprecated'], limit: 2 })
    expect([active.data.map(model => model.id), active.has_more]).toEqual([['a', 'b'], true])
    const ids: string[] = []
    for await (const model of client.models.list({ lifecycle: ['active'], limit: 2 })) ids.push(model.id)
    expect(ids).toEqual(['a', 'b', 'b:confidential', 'c', 'd'])
    const retired = await client.models.list({ lifecycle: ['retired'] })
    expect([retired.data, retired.has_more, retired.first_id]).toEqual([[], false, null])
    const bad = await client.models.list({ lifecycle: ['gone' as 'active'] }).catch(error => error)
    expect(bad).toBeInstanceOf(Anthropic.BadRequestError)
    expect(bad.error.error.message).toContain('lifecycle')
  })

  test('unknown query parameters are still refused, in the Anthropic envelope', async () => {
    t = await fileApp()
    const response = await t.request('GET', '/v1/models?page=2', { headers: { 'anthropic-version': '2023-06-01' } })
    expect(response.status).toBe(400)
    expect(await json(response)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringContaining('"page"') } })
  })
})

test('without anthropic-version the OpenAI answer is unchanged, and limit stays unknown there', async () => {
  t = await fileApp()
  const client = openAIClient('http://gateway.test', 'x', handleFetch(t))
  const page = await client.models.list()
  expect(page.data.map(model => model.id)).toEqual(['a', 'b', 'b:confidential', 'c', 'd'])
  expect(page.data[0]).toEqual({ id: 'a', object: 'model', created: 0, owned_by: 'svc', privacy_level: 'anonymous', context_length: 200000, max_output_tokens: 64000 } as never)
  expect((await t.request('GET', '/v1/models?limit=2')).status).toBe(400)
})
