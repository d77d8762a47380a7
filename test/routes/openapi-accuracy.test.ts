import { describe, expect, test } from 'bun:test'
// A full JSON Schema 2020-12 validator (OpenAPI 3.1's dialect): the keywords the generated
// document uses (anyOf, const, minimum, patterns…) are beyond test/support/json-schema.ts.
import Ajv2020 from 'ajv/dist/2020'
import { buildTestApp, createPlanOrg, json } from '../support/harness'
import { anthropicClient } from '../support/gateway'
import { startPassThroughGateway } from '../support/pass-through'

// What /openapi.json says, held against what the routes answer (QA found each of these wrong).

// strict: false, as the document carries OpenAPI's `x-` extensions; formats are not checked.
const ajv = new Ajv2020({ strict: false, validateFormats: false })

/** The places where `value` breaks `schema` (empty: it conforms). */
function violations(schema: object, value: unknown): string[] {
  const validate = ajv.compile(schema)
  return validate(value) ? [] : (validate.errors ?? []).map(error => `${error.instancePath} ${error.message}`)
}

/** Every schema object under `node`, with its path ("$.paths./v1/chat…"); example and default values are not schemas. */
function schemasIn(node: unknown, path = '$'): Array<[string, Record<string, any>]> {
  if (node === null || typeof node !== 'object') return []
  const object = node as Record<string, any>
  const isSchema = !Array.isArray(node) && ['type', 'anyOf', 'oneOf', 'allOf', 'properties', 'enum', 'const'].some(key => key in object)
  const found: Array<[string, Record<string, any>]> = isSchema ? [[path, object]] : []
  for (const [key, value] of Object.entries(object)) {
    // A map of property names (one may be named `default`) holds only schemas.
    if (isSchema && key === 'properties') for (const [name, child] of Object.entries(value)) found.push(...schemasIn(child, `${path}.properties.${name}`))
    else if (!['example', 'examples'].includes(key) && !(isSchema && ['default', 'const', 'enum'].includes(key))) found.push(...schemasIn(value, `${path}.${key}`))
  }
  return found
}

async function documentOf(t: Awaited<ReturnType<typeof buildTestApp>>): Promise<any> {
  return json(await t.request('GET', '/openapi.json'))
}

/**
 * The description of the schema node `body` meets at `where` (a dotted path), with those of the
 * union it is reached through and of the variant the value takes there (an object by its literal
 * properties: `type`, `role`; otherwise by its kind).
 */
function descriptionAt(schema: Record<string, any>, body: unknown, where: string): string {
  let node = schema
  let value: any = body
  for (const segment of where.split('.')) {
    node = Array.isArray(value) ? resolved(node, value).node.items : resolved(node, value).node.properties[segment]
    value = value[segment]
  }
  const { node: variant, descriptions } = resolved(node, value)
  return [...descriptions, variant.description].filter(Boolean).join(' ')
}

/** `node`, or the variant of its `anyOf` that `value` takes, with the descriptions passed on the way. */
function resolved(node: Record<string, any>, value: unknown): { node: Record<string, any>; descriptions: string[] } {
  const descriptions: string[] = []
  while (node.anyOf) {
    descriptions.push(node.description)
    node = node.anyOf.find((variant: Record<string, any>) => takes(variant, value))
  }
  return { node, descriptions }
}

function takes(variant: Record<string, any>, value: any): boolean {
  if (variant.type === 'array') return Array.isArray(value)
  if (variant.type !== 'object') return typeof value === variant.type
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  return Object.entries(variant.properties ?? {}).every(([name, property]: [string, any]) =>
    'const' in property ? value[name] === property.const : property.enum === undefined || property.enum.includes(value[name]))
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

  test("TypeBox's `error` messages are not published: they are not a JSON Schema keyword (QA)", async () => {
    const t = await buildTestApp()
    const carrying = schemasIn(await documentOf(t)).filter(([, schema]) => 'error' in schema && typeof schema.error !== 'object')
    expect(carrying.map(([path]) => path)).toEqual([])
    await t.close()
  })

  test('a nullable field with an enum or const takes null: the enum says so too', async () => {
    const t = await buildTestApp()
    const spec = await documentOf(t)
    const contradictions = schemasIn(spec)
      .filter(([, schema]) => [schema.type].flat().includes('null'))
      .filter(([, schema]) => (schema.enum !== undefined && !schema.enum.includes(null)) || (schema.const !== undefined && schema.const !== null))
      .map(([path]) => path)
    expect(contradictions).toEqual([])
    // The fields QA found, held against a validator: null is accepted, as the server accepts it.
    const body = (path: string) => spec.paths[path].post.requestBody.content['application/json'].schema
    const responses = body('/v1/responses').properties
    const fields: Array<[string, object, unknown]> = [
      ['chat n', body('/v1/chat/completions').properties.n, 1],
      ['responses reasoning.effort', responses.reasoning.properties.effort, 'low'],
      ['responses reasoning.summary', responses.reasoning.properties.summary, 'auto'],
      ['responses reasoning.generate_summary', responses.reasoning.properties.generate_summary, 'auto'],
      ['responses text.verbosity', responses.text.properties.verbosity, 'medium'],
      ['responses truncation', responses.truncation, 'disabled'],
      ...['/v1/messages', '/v1/messages/count_tokens'].map((path): [string, object, unknown] => [`${path} tools[].type`, body(path).properties.tools.items.anyOf[0].properties.type, 'custom']),
    ]
    for (const [name, schema, value] of fields) {
      expect([name, violations(schema, null), violations(schema, value)]).toEqual([name, [], []])
      expect([name, violations(schema, 'not-a-value').length > 0]).toEqual([name, true])
    }
    await t.close()
  })

  test('every default and example in the document is valid against its own schema; rate-limit headers are plain integers', async () => {
    const t = await buildTestApp()
    const spec = await documentOf(t)
    const invalid: string[] = []
    for (const [path, schema] of schemasIn(spec)) {
      const { default: fallback, examples, ...rest } = schema
      const values = [...(fallback === undefined ? [] : [fallback]), ...(Array.isArray(examples) ? examples : [])]
      for (const value of values) for (const problem of violations(rest, value)) invalid.push(`${path} ${JSON.stringify(value)}: ${problem}`)
    }
    expect(invalid).toEqual([])
    // `format: "integer"` is no format a validator or generator knows: headers are integers, said so plainly.
    const headers = Object.values(spec.paths).flatMap((item: any) => Object.values(item)).flatMap((operation: any) => Object.values(operation.responses ?? {}))
      .flatMap((response: any) => Object.entries(response.headers ?? {})) as Array<[string, { schema: object }]>
    expect(headers.length).toBeGreaterThan(0)
    expect(headers.filter(([, header]) => JSON.stringify(header.schema).includes('"format":"integer"')).map(([name]) => name)).toEqual([])
    const chat429 = spec.paths['/v1/chat/completions'].post.responses['429'].headers
    expect(chat429['Retry-After'].schema).toMatchObject({ type: 'integer', minimum: 1 })
    for (const name of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) expect(chat429[name].schema.type).toBe('integer')
    await t.close()
  })

  test("no request body's schema has a default: Elysia would copy the body to apply it, and the copy takes a __proto__ key as its prototype", async () => {
    // QA: POST /api/v1/api-keys and /api/v1/web/search (whose schemas had defaults) took
    // {"__proto__": {...}} past additionalProperties, reading the fields under it; a search was billed.
    const t = await buildTestApp()
    const spec = await documentOf(t)
    const bodies = Object.entries(spec.paths).flatMap(([path, item]: [string, any]) => Object.entries(item).map(([method, operation]: [string, any]) => [`${method} ${path}`, operation.requestBody] as const))
      .filter(([, body]) => body !== undefined)
    expect(bodies.length).toBeGreaterThan(5)
    const withDefault = bodies.flatMap(([where, body]) => schemasIn(body, where).filter(([, schema]) => 'default' in schema).map(([path]) => path))
    expect(withDefault).toEqual([])
    await t.close()
  })

  test('a documented value the server always refuses is named as such in its description', async () => {
    const t = await buildTestApp()
    const org = await t.createOrg()
    const spec = await documentOf(t)
    const model = ((await json(await t.request('GET', '/v1/models'))) as { data: Array<{ id: string }> }).data[0]!.id
    const chat = (extra: object) => ({ model, messages: [{ role: 'user', content: 'hi' }], ...extra })
    const chatPart = (part: object) => ({ model, messages: [{ role: 'user', content: [part] }] })
    const responses = (extra: object) => ({ model, input: 'hi', ...extra })
    const messages = (...content: object[]) => ({ model, max_tokens: 16, messages: [{ role: 'user', content }] })
    const document = (source: object, extra: object = {}) => messages({ type: 'document', source, ...extra })
    const toolResult = (content: object[]) => ({
      model, max_tokens: 16,
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'look', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content }] },
      ],
      tools: [{ name: 'look', input_schema: { type: 'object' } }],
    })
    const png = { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' }
    // Route, body, and where in it the refused value is: that node's description (or its union's) says 400.
    const refused: Array<[string, object, string]> = [
      ['/v1/chat/completions', chat({ presence_penalty: 0.5 }), 'presence_penalty'],
      ['/v1/chat/completions', chat({ frequency_penalty: -1 }), 'frequency_penalty'],
      ['/v1/chat/completions', chat({ logit_bias: { '50256': -100 } }), 'logit_bias'],
      ['/v1/chat/completions', chat({ prediction: { type: 'content', content: 'draft' } }), 'prediction'],
      ['/v1/chat/completions', chat({ audio: { voice: 'alloy', format: 'wav' } }), 'audio'],
      ['/v1/chat/completions', chatPart({ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }), 'messages.0.content.0'],
      ['/v1/chat/completions', chatPart({ type: 'file', file: { file_id: 'file-abc' } }), 'messages.0.content.0.file.file_id'],
      ['/v1/responses', responses({ truncation: 'auto' }), 'truncation'],
      ['/v1/responses', responses({ background: true }), 'background'],
      ['/v1/responses', responses({ max_tool_calls: 3 }), 'max_tool_calls'],
      ['/v1/responses', responses({ top_logprobs: 2 }), 'top_logprobs'],
      ['/v1/responses', responses({ reasoning: { effort: 'none' } }), 'reasoning.effort'],
      ['/v1/responses', responses({ tool_choice: { type: 'web_search' } }), 'tool_choice'],
      ['/v1/messages', messages({ type: 'image', source: { type: 'file', file_id: 'file_abc' } }), 'messages.0.content.0.source'],
      ['/v1/messages', document({ type: 'url', url: 'https://example.com/a.pdf' }), 'messages.0.content.0.source'],
      ['/v1/messages', document({ type: 'content', content: [{ type: 'text', text: 'x' }] }), 'messages.0.content.0.source'],
      ['/v1/messages', document({ type: 'file', file_id: 'file_abc' }), 'messages.0.content.0.source'],
      ['/v1/messages', document({ type: 'text', media_type: 'text/plain', data: 'x' }, { citations: { enabled: true } }), 'messages.0.content.0.citations'],
      ['/v1/messages', toolResult([{ type: 'image', source: png }]), 'messages.2.content.0.content'],
    ]
    for (const [path, body, where] of refused) {
      const response = await t.request('POST', path, { key: org.adminKey, body })
      const error = ((await response.json()) as { error: { param?: string; message: string } }).error
      // Anthropic's envelope has no param; the OpenAI one names the refused value or the part holding it.
      expect([where, response.status, error.param === undefined || `${where}.`.startsWith(`${error.param}.`)]).toEqual([where, 400, true])
      const schema = spec.paths[path].post.requestBody.content['application/json'].schema
      expect([where, descriptionAt(schema, body, where)]).toEqual([where, expect.stringContaining('400')])
    }
    await t.close()
  })

  test("metadata's documented limits are the ones the routes apply: 16 pairs, keys of 64 characters, values of 512", async () => {
    const t = await buildTestApp()
    const org = await t.createOrg()
    const spec = await documentOf(t)
    const pairs = (count: number, key = (i: number) => `k${i}`, value = 'v') => Object.fromEntries(Array.from({ length: count }, (_, i) => [key(i), value]))
    // Characters are code points, as OpenAI counts them: an emoji (two UTF-16 units) counts once.
    const emoji = '🔑'
    const accepted = [pairs(16, i => `${i}`.padEnd(64, 'k'), 'v'.repeat(512)), {}, { [emoji.repeat(64)]: emoji.repeat(512) }]
    const refused: Array<[unknown, string]> = [
      [pairs(17), 'metadata'], [{ ['k'.repeat(65)]: 'v' }, `metadata.${'k'.repeat(65)}`], [{ k: 'v'.repeat(513) }, 'metadata.k'],
      [{ [emoji.repeat(65)]: 'v' }, `metadata.${emoji.repeat(65)}`], [{ k: emoji.repeat(513) }, 'metadata.k'],
    ]
    const bases: Record<string, object> = { '/v1/chat/completions': { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] }, '/v1/responses': { model: 'demo-anonymous', input: 'hi' } }
    for (const [path, base] of Object.entries(bases)) {
      const schema = spec.paths[path].post.requestBody.content['application/json'].schema.properties.metadata
      expect([path, schema.description]).toEqual([path, expect.stringContaining('at most 16 pairs, keys of at most 64 characters, string values of at most 512 characters')])
      for (const metadata of accepted) {
        expect([path, violations(schema, metadata)]).toEqual([path, []])
        expect([path, (await t.request('POST', path, { key: org.adminKey, body: { ...base, metadata } })).status]).toEqual([path, 200])
      }
      for (const [metadata, param] of refused) {
        expect([path, param, violations(schema, metadata).length > 0]).toEqual([path, param, true])
        const response = await t.request('POST', path, { key: org.adminKey, body: { ...base, metadata } })
        expect([path, response.status, ((await response.json()) as { error: { param: string; message: string } }).error]).toEqual([path, 400, expect.objectContaining({ param, message: expect.stringMatching(/^metadata /) })])
      }
    }
    await t.close()
  })

  test('every JSON 401 documents the WWW-Authenticate challenge it carries', async () => {
    const t = await buildTestApp()
    const spec = await documentOf(t)
    const checked: string[] = []
    for (const [path, item] of Object.entries(spec.paths) as Array<[string, Record<string, any>]>) {
      for (const [method, operation] of Object.entries(item)) {
        const unauthorized = operation.responses?.['401']
        // The OAuth consent pages answer a failed sign-in with the page again (HTML), no challenge.
        if (unauthorized === undefined || unauthorized.content?.['text/html']) continue
        const challenge = unauthorized.headers?.['WWW-Authenticate']?.schema
        expect(challenge ? `${method} ${path}` : `${method} ${path} 401 lacks WWW-Authenticate`).toBe(`${method} ${path}`)
        const url = path.replace('{key_id}', '00000000-0000-7000-8000-000000000000').replace('{model}', 'x').replace('{rest}', 'x')
        const response = await t.app.handle(new Request(`http://localhost${url}`, { method: method.toUpperCase() }))
        // /metrics is off in this configuration (404), the OAuth token routes refuse the missing form first.
        if (response.status !== 401) continue
        expect([`${method} ${path}`, violations(challenge, response.headers.get('www-authenticate'))]).toEqual([`${method} ${path}`, []])
        checked.push(`${method} ${path}`)
      }
    }
    expect(checked).toEqual(expect.arrayContaining(['post /v1/chat/completions', 'get /api/v1/billing/balance', 'get /api/v1/rate-limits', 'post /mcp']))
    await t.close()
  })

  test('a 429 that can be insufficient_quota documents X-Should-Retry: false', async () => {
    const t = await buildTestApp()
    const spec = await documentOf(t)
    const retryHeader = (path: string, method: string) => spec.paths[path][method].responses['429'].headers['X-Should-Retry']?.schema
    // Billed routes, and key creation (refused to an organization with nothing left).
    const billed = [['/v1/chat/completions', 'post'], ['/v1/messages', 'post'], ['/v1/responses', 'post'], ['/api/v1/chat/fusion', 'post'], ['/api/v1/web/fetch', 'post'], ['/api/v1/web/search', 'post'], ['/api/v1/attachments/parse', 'post'], ['/api/v1/api-keys', 'post']]
    for (const [path, method] of billed) expect([path, violations(retryHeader(path!, method!) ?? false, 'false')]).toEqual([path, []])
    for (const [path, method] of [['/v1/messages/count_tokens', 'post'], ['/api/v1/api-keys', 'get'], ['/api/v1/billing/balance', 'get']]) expect([path, retryHeader(path!, method!)]).toEqual([path, undefined])
    // What an unfunded organization gets.
    const poor = await createPlanOrg(t, { name: 'poor', credit: 0n, admin: true })
    const refused = [
      await t.request('POST', '/v1/chat/completions', { key: poor.key, body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] } }),
      await t.request('POST', '/api/v1/api-keys', { key: poor.key, body: { name: 'k' } }),
    ]
    for (const response of refused) expect([response.status, ((await response.json()) as { error: { code: string } }).error.code, response.headers.get('x-should-retry')]).toEqual([429, 'insufficient_quota', 'false'])
    await t.close()
  })

  test('every tag an operation uses is listed with a description; rate-limit headers on every success of a rate-limited route', async () => {
    const t = await buildTestApp()
    const org = await t.createOrg()
    const spec = await documentOf(t)
    const listed = new Map((spec.tags as Array<{ name: string; description?: string }>).map(tag => [tag.name, tag.description]))
    const used = new Set(Object.values(spec.paths).flatMap((item: any) => Object.values(item)).flatMap((operation: any) => operation.tags ?? []))
    expect([...used].filter(tag => !listed.get(tag))).toEqual([])
    // The auth step sets X-RateLimit-* before the handler runs (src/http/auth.ts): every success of a route it limits carries them.
    const names = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']
    const missing: string[] = []
    for (const [path, item] of Object.entries(spec.paths) as Array<[string, Record<string, any>]>) {
      for (const [method, operation] of Object.entries(item)) {
        if (!operation.responses?.['429']?.headers?.['X-RateLimit-Limit']) continue
        for (const [status, response] of Object.entries(operation.responses) as Array<[string, any]>) {
          if (status.startsWith('2')) for (const name of names) if (!response.headers?.[name]) missing.push(`${method} ${path} ${status} ${name}`)
        }
      }
    }
    expect(missing).toEqual([])
    const balance = await t.request('GET', '/api/v1/billing/balance', { key: org.adminKey })
    const documented = spec.paths['/api/v1/billing/balance'].get.responses['200'].headers
    for (const name of names) expect([name, violations(documented[name].schema, Number(balance.headers.get(name)))]).toEqual([name, []])
    await t.close()
  })

  test("a Messages reply's usage is documented with its prompt-cache counts, and a reply with cache writes conforms", async () => {
    // QA: the usage schema listed only input_tokens and output_tokens; the cache counts (and
    // cache_creation's split by lifetime) a reply carries were undocumented.
    const { t, upstream, org } = await startPassThroughGateway('anthropic', 'backends: [{ provider: up, model: claude-x }], price: { input_per_mtok: "3", output_per_mtok: "7" }, context_length: 100000, max_output_tokens: 4096', 'openapi-usage', 'oau')
    try {
      const usage = { input_tokens: 4, cache_read_input_tokens: 10, cache_creation_input_tokens: 30, cache_creation: { ephemeral_5m_input_tokens: 10, ephemeral_1h_input_tokens: 20 }, output_tokens: 2 }
      upstream.enqueue({ kind: 'json', body: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-x', content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn', stop_sequence: null, usage } })
      const reply = await anthropicClient(t.listen(), org.adminKey).messages.create({ model: 'm', max_tokens: 50, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral', ttl: '1h' } }] }] })
      expect(reply.usage).toMatchObject(usage)
      const documented = (await documentOf(t)).paths['/v1/messages'].post.responses['200'].content['application/json'].schema.properties.usage
      expect(Object.keys(documented.properties).toSorted()).toEqual(['cache_creation', 'cache_creation_input_tokens', 'cache_read_input_tokens', 'input_tokens', 'output_tokens'])
      expect(documented.required.toSorted()).toEqual(['input_tokens', 'output_tokens'])
      // Every count the reply carries is a documented one, of its documented type.
      const closed = (schema: Record<string, any>): Record<string, any> => ({ ...schema, additionalProperties: false, properties: Object.fromEntries(Object.entries(schema.properties).map(([name, child]: [string, any]) => [name, child.type === 'object' ? closed(child) : child])) })
      expect(violations(closed(documented), reply.usage)).toEqual([])
    } finally {
      await upstream.close()
      await t.close()
    }
  })
})
