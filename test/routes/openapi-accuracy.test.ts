import { describe, expect, test } from 'bun:test'
// A full JSON Schema 2020-12 validator (OpenAPI 3.1's dialect): the keywords the generated
// document uses (anyOf, const, minimum, patterns…) are beyond test/support/json-schema.ts.
import Ajv2020 from 'ajv/dist/2020'
import { buildTestApp, json } from '../support/harness'

// What /openapi.json says, held against what the routes answer (QA found each of these wrong).

// strict: false, as the document carries TypeBox's `error` messages; formats are not checked.
const ajv = new Ajv2020({ strict: false, validateFormats: false })

/** The places where `value` breaks `schema` (empty: it conforms). */
function violations(schema: object, value: unknown): string[] {
  const validate = ajv.compile(schema)
  return validate(value) ? [] : (validate.errors ?? []).map(error => `${error.instancePath} ${error.message}`)
}

async function documentOf(t: Awaited<ReturnType<typeof buildTestApp>>): Promise<any> {
  return json(await t.request('GET', '/openapi.json'))
}

describe('/openapi.json says what the routes do', () => {
  test('the raw-slash model retrieval documents what GET /v1/models/{model} does: 400, and the Anthropic shape', async () => {
    const t = await buildTestApp()
    const spec = await documentOf(t)
    const byId = spec.paths['/v1/models/{model}'].get
    const slash = spec.paths['/v1/models/{model}/{rest}'].get
    expect(slash.responses).toEqual(byId.responses)
    const names = (operation: any) => operation.parameters.map((parameter: { in: string; name: string }) => `${parameter.in} ${parameter.name}`)
    expect(names(slash)).toEqual(['path model', 'path rest', 'header anthropic-version', 'query beta'])
    // The route answers as documented: an unknown query parameter is 400, an Anthropic client's 404 is in its envelope.
    const refused = await t.app.handle(new Request('http://localhost/v1/models/meta-llama/llama-3.3-70b?x=1'))
    expect(refused.status).toBe(400)
    expect(violations(slash.responses['400'].content['application/json'].schema, await refused.json())).toEqual([])
    const missing = await t.app.handle(new Request('http://localhost/v1/models/meta-llama/no-such', { headers: { 'anthropic-version': '2023-06-01' } }))
    expect(missing.status).toBe(404)
    const body = (await missing.json()) as { type: string }
    expect(body.type).toBe('error')
    expect(violations(slash.responses['404'].content['application/json'].schema, body)).toEqual([])
    await t.close()
  })
})
