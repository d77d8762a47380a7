import { afterEach, beforeEach, expect, test } from 'bun:test'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import { loadConfig } from '../../src/config/load'
import { buildTestApp, type TestApp } from '../support/harness'
import { FakeUpstream } from '../support/fake-upstream'
import { connectMcp } from '../support/mcp'
import { codeFlowTokens } from '../support/oauth'

// A tool call refused by the upstream provider reaches the MCP client as the same refusal an
// HTTP client gets: an upstream 429 is -32003 with the upstream's own wait, not a default.

let t: TestApp
let upstream: FakeUpstream

beforeEach(async () => {
  upstream = await FakeUpstream.start()
  const yaml = `
providers: [{ id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }]
models:
  - { id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "3", output_per_mtok: "7" }, context_length: 8192, max_output_tokens: 128 }
plans: { payg: { monthly_allowance: "0", fusion: false } }
`
  const env = { SVC_CONFIG: '/virtual/gateway.yaml', UP_KEY: 'sk-up-0123456789' }
  t = await buildTestApp(env, loadConfig(env, () => yaml))
})

afterEach(async () => {
  await t.close()
  await upstream.close()
})

test('an upstream 429 with Retry-After: 30 is -32003 with retry_after_s 30, as the HTTP route says Retry-After: 30', async () => {
  const org = await t.createOrg('acme', 1_000_000_000n)
  const rateLimited = { kind: 'json' as const, status: 429, body: { error: { message: 'slow down' } }, headers: { 'retry-after': '30' } }
  upstream.enqueue(rateLimited, rateLimited)

  const http = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: { model: 'm', messages: [{ role: 'user', content: 'x' }] } })
  expect(http.status).toBe(429)
  expect(http.headers.get('retry-after')).toBe('30')

  const client = await connectMcp(t.listen(), (await codeFlowTokens(t, org.adminKey)).access_token)
  const refused = await client.callTool({ name: 'svc.chat', arguments: { model: 'm', prompt: 'x' } }).catch(caught => caught)
  expect(refused).toBeInstanceOf(McpError)
  expect(refused.code).toBe(-32003)
  expect(refused.data).toMatchObject({ code: 'rate_limited', retry_after_s: 30 })
  await client.close()
})
