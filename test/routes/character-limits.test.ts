import { afterEach, expect, test } from 'bun:test'
import Ajv2020 from 'ajv/dist/2020'
import { buildTestApp, json, type TestApp } from '../support/harness'

// A request body's limit in characters counts Unicode code points, as JSON Schema's maxLength
// (and so /openapi.json) counts them. Before, TypeBox checked each in UTF-16 units: 300 emoji
// in a web search query (documented maxLength 400) were "query: Expected string length less or
// equal to 400", 129 in a chat `user` (256) a 400 too.

let t: TestApp
afterEach(async () => {
  await t?.close()
})

// An astral-plane character: one code point, two UTF-16 units.
const EMOJI = '😀'
const hi = [{ role: 'user', content: 'hi' }]
const chat = { model: 'demo-anonymous', messages: hi }
const responses = { model: 'demo-anonymous', input: 'hi' }
const messages = { model: 'demo-anonymous', max_tokens: 16, messages: hi }
const fusion = { models: ['demo-anonymous', 'demo-private'], messages: hi }
const NOT_IN_CATALOG = /is not in the catalog/

/** Route, field (the error's param), limit, the body carrying `text` there, and what a body at the limit gets: 200, or a later check's refusal. */
const CASES: Array<[string, string, number, (text: string) => object, number | RegExp]> = [
  ['/v1/chat/completions', 'user', 256, text => ({ ...chat, user: text }), 200],
  ['/v1/chat/completions', 'safety_identifier', 256, text => ({ ...chat, safety_identifier: text }), 200],
  ['/v1/chat/completions', 'prompt_cache_key', 1024, text => ({ ...chat, prompt_cache_key: text }), 200],
  ['/v1/chat/completions', 'model', 256, text => ({ ...chat, model: text }), NOT_IN_CATALOG],
  ['/v1/chat/completions', 'response_format.json_schema.name', 64, text => ({ ...chat, response_format: { type: 'json_schema', json_schema: { name: text, schema: { type: 'object' } } } }), 200],
  ['/v1/responses', 'user', 256, text => ({ ...responses, user: text }), 200],
  ['/v1/responses', 'safety_identifier', 256, text => ({ ...responses, safety_identifier: text }), 200],
  ['/v1/responses', 'prompt_cache_key', 1024, text => ({ ...responses, prompt_cache_key: text }), 200],
  ['/v1/responses', 'model', 256, text => ({ ...responses, model: text }), NOT_IN_CATALOG],
  ['/v1/responses', 'input.0.content.0.filename', 1024, text => ({ ...responses, input: [{ role: 'user', content: [{ type: 'input_file', file_data: 'data:text/plain;base64,aGk=', filename: text }] }] }), 200],
  ['/v1/messages', 'metadata.user_id', 256, text => ({ ...messages, metadata: { user_id: text } }), 200],
  ['/v1/messages', 'tools.0.name', 128, text => ({ ...messages, tools: [{ name: text, input_schema: { type: 'object' } }] }), 200],
  ['/api/v1/chat/fusion', 'user', 256, text => ({ ...fusion, user: text }), 200],
  ['/api/v1/chat/fusion', 'judge', 256, text => ({ ...fusion, judge: text }), NOT_IN_CATALOG],
  ['/api/v1/chat/fusion', 'models.0', 256, text => ({ ...fusion, models: [text, 'demo-private'] }), NOT_IN_CATALOG],
  // No search backend here: past validation, the route says so (503).
  ['/api/v1/web/search', 'query', 400, text => ({ query: text }), 503],
  ['/api/v1/api-keys', 'expires_in', 64, text => ({ name: 'k', expires_in: text }), /expires_in must be one of/],
]

test('a limit in characters takes that many astral-plane characters, and one more is a 400 naming the field and the limit', async () => {
  t = await buildTestApp()
  const org = await t.createOrg()
  const spec = await json(await t.request('GET', '/openapi.json'))
  // Ajv compiles patterns with the `u` flag, as OpenAPI tools do: the document must mean the same.
  const ajv = new Ajv2020({ strict: false, validateFormats: false })
  for (const [path, field, limit, body, atLimit] of CASES) {
    const at = body(EMOJI.repeat(limit))
    const past = body(EMOJI.repeat(limit + 1))
    const accepted = await t.request('POST', path, { key: org.adminKey, body: at })
    const reply = await json(accepted)
    if (typeof atLimit === 'number') expect({ path, field, status: accepted.status }).toEqual({ path, field, status: atLimit })
    else expect({ path, field, status: accepted.status, message: reply.error.message }).toEqual({ path, field, status: 400, message: expect.stringMatching(atLimit) })

    const refused = await t.request('POST', path, { key: org.adminKey, body: past })
    const error = (await json(refused)).error
    // Anthropic's envelope has no param: the message names the field.
    const named = field.replaceAll('.', '\\.')
    const message = expect.stringMatching(new RegExp(`^(${named}: |Property '${named}' is invalid: )must be at most ${limit} characters$`))
    const expected = path === '/v1/messages' ? { message } : { param: field, message }
    expect({ path, status: refused.status, ...error }).toMatchObject({ path, status: 400, ...expected })

    // The published schema draws the same line (input items are documented only as typed objects).
    if (field.startsWith('input.')) continue
    const validate = ajv.compile(spec.paths[path].post.requestBody.content['application/json'].schema)
    expect({ path, field, at: validate(at), past: validate(past) }).toEqual({ path, field, at: true, past: false })
  }
})
