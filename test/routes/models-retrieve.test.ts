import { afterEach, expect, test } from 'bun:test'
import { catalogFile } from '../support/catalog'
import { anthropicClient, openAIClient } from '../support/gateway'
import { buildConfiguredApp, json, type TestApp } from '../support/harness'

// GET /v1/models/{model} for catalog ids holding `/` (the config allows `meta-llama/llama-3.3-70b`).
// The JS SDKs encode the slash as %2F; curl users and clients that build the path by plain
// string formatting send it raw, and must reach the same entry rather than "no route".

let t: TestApp
afterEach(async () => {
  await t?.close()
})

const FILE = catalogFile(`  - id: meta-llama/llama-3.3-70b
    level: private
    backends: [{ provider: local, model: x }]
    price: { input_per_mtok: "0.40", output_per_mtok: "0.80" }
    context_length: 131072
    max_output_tokens: 8192
  - id: org/team/model-1
    backends: [{ provider: local, model: y }]
    price: { input_per_mtok: "0", output_per_mtok: "0" }
    context_length: 2048
    max_output_tokens: 2048`)

const ENTRY = { id: 'meta-llama/llama-3.3-70b', object: 'model', created: 0, owned_by: 'svc', privacy_level: 'private', context_length: 131072, max_output_tokens: 8192 }

test('a raw slash in the path reaches the id, as the SDKs\' %2F does', async () => {
  t = await buildConfiguredApp(FILE, { SVC_CONFIG: '/svc.yaml' })
  const base = t.listen()
  const fetchApp = (input: string | URL | Request, init?: RequestInit) => fetch(input, init)
  const openai = openAIClient(base, 'x', fetchApp)
  expect(await openai.models.retrieve('meta-llama/llama-3.3-70b')).toMatchObject(ENTRY)

  const raw = await fetch(`${base}/v1/models/meta-llama/llama-3.3-70b`)
  expect(raw.status).toBe(200)
  expect(await json(raw)).toEqual(ENTRY)
  expect((await json(await fetch(`${base}/v1/models/org/team/model-1`))).id).toBe('org/team/model-1')
  expect((await json(await fetch(`${base}/v1/models/org/team%2Fmodel-1`))).id).toBe('org/team/model-1')

  const anthropic = await fetch(`${base}/v1/models/meta-llama/llama-3.3-70b`, { headers: { 'anthropic-version': '2023-06-01' } })
  expect(await json(anthropic)).toMatchObject({ type: 'model', id: 'meta-llama/llama-3.3-70b' })
  const client = anthropicClient(base, 'x', fetchApp)
  expect((await client.models.retrieve('org/team/model-1')).id).toBe('org/team/model-1')
})

test('an unknown or malformed slash path is the 404 naming the id, never a 500', async () => {
  t = await buildConfiguredApp(FILE, { SVC_CONFIG: '/svc.yaml' })
  for (const path of ['/v1/models/meta-llama/nope', '/v1/models/meta-llama/%E0%A4%A', '/v1/models/meta-llama/llama-3.3-70b/extra']) {
    const response = await t.request('GET', path)
    expect(response.status).toBe(404)
    const body = await json(response)
    expect(body.error).toMatchObject({ code: 'not_found', param: 'model' })
    expect(body.error.message).toContain('meta-llama/')
  }
})
