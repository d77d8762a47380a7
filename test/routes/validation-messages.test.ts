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
