import { afterEach, expect, test } from 'bun:test'
import { buildTestApp, json, type TestApp } from '../support/harness'

// A 400 names the field and what is wrong with it. A value that no variant of a union accepts
// is explained by the variant it was meant for (before: "Property 'max_tokens' should be one
// of: 'integer', 'null'" for max_tokens 0, and "'messages.0' should be one of: 'object',
// 'object', 'object', 'object'" for any bad message).

let t: TestApp
afterEach(async () => {
  await t?.close()
})

const message = (extra: Record<string, unknown>) => ({ role: 'user', content: 'hi', ...extra })

test('union failures are explained by the variant the value was meant for', async () => {
  t = await buildTestApp()
  const org = await t.createOrg()
  const cases: Array<[string, Record<string, unknown>, string, string]> = [
    ['/v1/chat/completions', { max_tokens: 0 }, 'max_tokens', "Property 'max_tokens' is invalid: expected integer to be greater or equal to 1"],
    ['/v1/chat/completions', { temperature: 5 }, 'temperature', "Property 'temperature' is invalid: expected number to be less or equal to 2"],
    ['/v1/chat/completions', { messages: [message({ role: 'wizard' })] }, 'messages.0.role', `Property 'messages.0.role' should be one of`],
    ['/v1/chat/completions', { messages: [message({ content: 5 })] }, 'messages.0.content', "Property 'messages.0.content' should be one of"],
    ['/v1/chat/completions', { messages: [{ role: 'tool', content: 'x' }] }, 'messages.0.tool_call_id', "Property 'messages.0.tool_call_id' is missing"],
  ]
  for (const [path, extra, param, start] of cases) {
    const body = { model: 'demo-anonymous', messages: [message({})], ...extra }
    const response = await t.request('POST', path, { key: org.adminKey, body })
    const error = (await json(response)).error
    expect({ path, extra, status: response.status, param: error.param }).toEqual({ path, extra, status: 400, param })
    expect(error.message).toStartWith(start)
  }
  const role = await json(await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: { model: 'demo-anonymous', messages: [message({ role: 'wizard' })] } }))
  for (const name of ['"system"', '"user"', '"assistant"', '"tool"']) expect(role.error.message).toContain(name)
})

test('a bad literal inside the variant meant is blamed where it is, not taken for another variant', async () => {
  // Before: an image part's detail "ultra" ruled the image part out, as if `detail` were its
  // discriminator: "Property 'messages.0.content.0.type' should be one of "text", "auto", "low",
  // "high", "file", "input_audio"".
  t = await buildTestApp()
  const org = await t.createOrg()
  const image = (type: string) => ({ type, image_url: { url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'ultra' } })
  const cases: Array<[object, string, string]> = [
    [image('image_url'), 'messages.0.content.0.image_url.detail', `Property 'messages.0.content.0.image_url.detail' should be one of "auto", "low", "high"`],
    // A part type that is no type: the types, and only them.
    [image('picture'), 'messages.0.content.0.type', `Property 'messages.0.content.0.type' should be one of "text", "image_url", "file", "input_audio"`],
  ]
  for (const [part, param, expected] of cases) {
    const body = { model: 'demo-anonymous', messages: [message({ content: [part] })] }
    const response = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body })
    const error = (await json(response)).error
    expect({ status: response.status, param: error.param, message: error.message }).toEqual({ status: 400, param, message: expected })
  }
})

test('no regular expression, "[object Object]" or variant list reaches a client: the field and what it takes', async () => {
  // Before: "Property 'tools.0.function.name' is invalid: expected string to match '^[A-Za-z0-9_-]{1,64}$'",
  // "Expected property 'model' to be string but found: [object Object]", "'messages.0' should be one of object".
  t = await buildTestApp()
  const org = await t.createOrg()
  const chat = { model: 'demo-anonymous', messages: [message({})] }
  const cases: Array<[string, Record<string, unknown>, string, string]> = [
    ['/v1/chat/completions', { ...chat, tools: [{ type: 'function', function: { name: 'bad name!' } }] }, 'tools.0.function.name', 'tool function names must be 1-64 letters, digits, underscores or dashes'],
    ['/v1/responses', { model: 'demo-anonymous', input: 'hi', text: { format: { type: 'json_schema', name: 'bad name!', schema: {} } } }, 'text.format.name', 'text.format.name must be 1-64 letters, digits, underscores or dashes'],
    ['/v1/chat/completions', { ...chat, model: { id: 'demo-anonymous' } }, 'model', 'model: Expected string'],
    ['/v1/chat/completions', { ...chat, messages: [5] }, 'messages.0', "Property 'messages.0' should be an object"],
    ['/api/v1/chat/fusion', { models: ['demo-anonymous', ['demo-private']], messages: [message({})] }, 'models.1', 'models.1: Expected string'],
  ]
  for (const [path, body, param, expected] of cases) {
    const response = await t.request('POST', path, { key: org.adminKey, body })
    const error = (await json(response)).error
    expect({ path, status: response.status, param: error.param, message: error.message }).toEqual({ path, status: 400, param, message: expected })
  }
  // Anthropic's envelope has no param: the message names the field and the form it takes.
  const server = await t.request('POST', '/v1/messages', { key: org.adminKey, body: { model: 'demo-anonymous', max_tokens: 16, messages: [message({})], tools: [{ type: 'code_execution', name: 'code_execution' }] } })
  expect(server.status).toBe(400)
  expect((await json(server)).error.message).toBe(`Property 'tools.0.type' is invalid: must be a dated server tool type such as web_search_20250305, web_fetch or web_search (the gateway's own), or "custom" (or none) for a tool of your own`)
  // A tool that says it is custom is judged as a custom tool, never blamed for its type: the
  // server-tool variant (a pattern on type, and name) once won whenever it had no more errors.
  const cases2: Array<[Record<string, unknown>, string]> = [
    [{ type: 'custom', name: 5, description: 5, cache_control: 5, input_schema: { type: 'object' } }, "Property 'tools.0.name' is invalid: expected string"],
    [{ type: 'custom', name: 5 }, "Property 'tools.0.input_schema' is missing"],
  ]
  for (const [tool, expected] of cases2) {
    const custom = await t.request('POST', '/v1/messages', { key: org.adminKey, body: { model: 'demo-anonymous', max_tokens: 16, messages: [message({})], tools: [tool] } })
    expect(custom.status).toBe(400)
    expect((await json(custom)).error.message).toBe(expected)
  }
})

test('a JSON object with its own "toString" or "valueOf" key is a 400, wherever validation meets it', async () => {
  // Before: Elysia's message for an invalid value (`found: ${value}`) threw on such an object: a 500,
  // or app.handle rejected outright when the object was not the first failure (found by the fuzz test).
  t = await buildTestApp()
  const org = await t.createOrg()
  const hostile = { toString: '', valueOf: 1 }
  const first = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: { model: [hostile], messages: [message({})] } })
  expect(first.status).toBe(400)
  expect((await json(first)).error.message).toBe('the request body holds an object with a key named "toString" or "valueOf" where another kind of value is expected')
  // Not the first failure: the first one is named as usual.
  const later = await t.request('POST', '/v1/messages', { key: org.adminKey, body: { model: [hostile], messages: [message({})] } })
  expect(later.status).toBe(400)
  expect((await json(later)).error.message).toBe('max_tokens is required: a positive integer')
  for (const path of ['/v1/messages/count_tokens', '/v1/responses', '/api/v1/api-keys', '/api/v1/web/fetch', '/api/v1/chat/fusion']) {
    const response = await t.request('POST', path, { key: org.adminKey, body: { model: hostile, name: hostile, urls: [hostile], input: [hostile], models: [hostile], messages: [hostile] } })
    expect({ path, status: response.status }).toEqual({ path, status: 400 })
  }
})
