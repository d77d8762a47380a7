import { afterEach, beforeEach, expect, test } from 'bun:test'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import { loadConfig } from '../../src/config/load'
import { MCP_ERROR } from '../../src/mcp/json-rpc'
import { FakeUpstream } from '../support/fake-upstream'
import { buildTestApp, type TestApp } from '../support/harness'
import { connectMcp } from '../support/mcp'
import { codeFlowTokens } from '../support/oauth'

// An upstream's refusal seen through MCP (official SDK client, a real upstream on port 0): its
// rate limit reaches the client as the route's 429 does, with the upstream's own Retry-After.

let t: TestApp
let upstream: FakeUpstream
let base: string
let token: string

beforeEach(async () => {
  upstream = await FakeUpstream.start()
  const yaml = [
    'providers:',
    `  - { id: busy, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: BUSY_KEY, retention: none }`,
    'models:',
    '  - { id: solo, backends: [{ provider: busy, model: model-a }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 16384, max_output_tokens: 2048 }',
    'plans: { payg: { monthly_allowance: "0", fusion: false } }',
  ].join('\n')
  const env = { SVC_CONFIG: '/virtual/gateway.yaml', BUSY_KEY: 'sk-busy' }
  t = await buildTestApp(env, loadConfig(env, () => yaml))
  base = t.listen()
  const org = await t.createOrg('acme', 1_000_000_000n)
  token = (await codeFlowTokens(t, org.adminKey)).access_token
})

afterEach(async () => {
  await upstream.close()
  await t.close()
})

test("svc.chat on a rate-limited upstream: JSON-RPC -32003 with the upstream's Retry-After, as the HTTP route's header", async () => {
  // Before, retry_after_s was always 1: the server read only a `Retry-After` header name, and
  // an upstream's wait is passed on as `retry-after`.
  const refusal = { kind: 'json' as const, status: 429, body: { error: { message: 'slow down' } }, headers: { 'retry-after': '30' } }
  upstream.enqueue(refusal, refusal)
  const client = await connectMcp(base, token)
  const limited = await client.callTool({ name: 'svc.chat', arguments: { model: 'solo', prompt: 'hi' } }).catch(caught => caught)
  expect(limited).toBeInstanceOf(McpError)
  expect(limited.code).toBe(MCP_ERROR.rateLimited)
  expect(limited.data).toMatchObject({ code: 'rate_limited', retry_after_s: 30 })
  await client.close()
  const key = (await t.createOrg('other', 1_000_000_000n)).adminKey
  const http = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'solo', messages: [{ role: 'user', content: 'hi' }] }),
  })
  expect(http.status).toBe(429)
  expect(http.headers.get('retry-after')).toBe('30')
})

test("an upstream's 429 is not counted as the gateway's refusal, and its X-RateLimit-* do not claim it", async () => {
  // Before, svc_refusals_total{code="rate_limited"} counted it (README scopes that to the
  // gateway's own buckets and concurrency gate), on the HTTP route; through MCP, no refusal
  // at all was counted, not even the gateway's own (request-log.test.ts).
  const refusal = { kind: 'json' as const, status: 429, body: { error: { message: 'slow down' } }, headers: { 'retry-after': '30' } }
  upstream.enqueue(refusal, refusal)
  const key = (await t.createOrg('other', 1_000_000_000n)).adminKey
  const http = await t.request('POST', '/v1/chat/completions', { key, body: { model: 'solo', messages: [{ role: 'user', content: 'hi' }] } })
  expect(http.status).toBe(429)
  expect(http.headers.get('retry-after')).toBe('30')
  // The headers are the gateway's key bucket after this admitted request, not a refusing limit.
  expect(Number(http.headers.get('x-ratelimit-remaining'))).toBeGreaterThan(0)
  const client = await connectMcp(base, token)
  expect(await client.callTool({ name: 'svc.chat', arguments: { model: 'solo', prompt: 'hi' } }).catch(caught => caught)).toBeInstanceOf(McpError)
  await client.close()
  expect(t.deps.metrics.registry.render().split('\n').filter(line => line.startsWith('svc_refusals_total'))).toEqual([])
})
