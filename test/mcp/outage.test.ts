import { afterEach, beforeEach, expect, test } from 'bun:test'
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { loadConfig } from '../../src/config/load'
import { McpService } from '../../src/mcp/server'
import { switchable } from '../support/database-outage'
import { buildTestApp, json, type TestApp } from '../support/harness'
import { connectMcp } from '../support/mcp'
import { codeFlowTokens } from '../support/oauth'

// Failures of POST /mcp that are not refusals of the request itself (the token store is
// unreachable, an unexpected error) answer in JSON-RPC shape, as every other /mcp error does,
// under their HTTP status: an MCP client classifies them by status (the official SDK) or reads a
// JSON-RPC error object, never the /api/v1 envelope. A bad credential stays 401 with its challenge.

// No credential cache, so every request reads the token from the database.
const YAML = `
providers: [{ id: demo, type: demo, retention: none }]
models:
  - { id: demo-anonymous, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 4096 }
plans: { payg: { monthly_allowance: "0", fusion: false } }
auth: { cache_ttl_ms: 0 }
`

let t: TestApp
let base: string
let token: string
let client: Client

beforeEach(async () => {
  const env = { SVC_CONFIG: '/virtual/gateway.yaml' }
  t = await buildTestApp(env, loadConfig(env, () => YAML))
  base = t.listen()
  const org = await t.createOrg('acme', 1_000_000_000n)
  token = (await codeFlowTokens(t, org.adminKey)).access_token
  client = await connectMcp(base, token)
})

afterEach(async () => {
  await client.close()
  await t.close()
})

const post = (body: unknown, bearer = token) =>
  fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify(body),
  })

test('a database outage is 503 with a JSON-RPC error, which the official SDK reports as a 503; recovery by itself', async () => {
  const wire = switchable(t.deps.database.client)
  wire.set('unreachable')
  try {
    const response = await post({ jsonrpc: '2.0', id: 7, method: 'tools/list' })
    expect(response.status).toBe(503)
    expect(response.headers.get('content-type')).toBe('application/json')
    expect(response.headers.get('www-authenticate')).toBeNull()
    const requestId = response.headers.get('x-request-id')
    // The credential is checked before the body is read, so the request's id is not known yet.
    expect(await json(response)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32603, message: 'the database is unavailable; retry shortly', data: { code: 'unavailable', status: 503, request_id: requestId } },
    })
    // The SDK client: an HTTP error it can classify (503, not 401: no new OAuth flow), carrying the JSON-RPC error.
    const failure = await client.listTools().then(() => undefined, (error: unknown) => error)
    expect(failure).toBeInstanceOf(StreamableHTTPError)
    expect((failure as StreamableHTTPError).code).toBe(503)
    expect((failure as Error).message).toContain('"code":-32603')
    // A credential refused without the database (not an MCP token) is still 401 with the OAuth challenge.
    const refused = await post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, 'z_sk_not_an_mcp_token')
    expect(refused.status).toBe(401)
    expect(refused.headers.get('www-authenticate')).toContain('resource_metadata=')
    expect((await json(refused)).error.code).toBe(-32001)
  } finally {
    wire.set('ok')
  }
  expect((await client.listTools()).tools.length).toBeGreaterThan(0)
})

test('a failure after the body is read answers that request: its id, in JSON-RPC shape', async () => {
  // An unexpected fault past the body (the SDK failing to load, say): the error handler renders it.
  // The service is built inside createApp, so the fault goes on its prototype, for this test only.
  const handle = McpService.prototype.handle
  McpService.prototype.handle = () => Promise.reject(new Error('boom'))
  try {
    const response = await post({ jsonrpc: '2.0', id: 'req-42', method: 'tools/list' })
    expect(response.status).toBe(500)
    const body = await json(response)
    expect(body).toMatchObject({ jsonrpc: '2.0', id: 'req-42', error: { code: -32603, message: 'internal error', data: { code: 'internal_error', status: 500 } } })
    expect(JSON.stringify(body)).not.toContain('boom')
    // A batch or a notification has no single id to answer.
    expect((await json(await post([{ jsonrpc: '2.0', id: 1, method: 'ping' }]))).id).toBeNull()
    expect((await json(await post({ jsonrpc: '2.0', method: 'notifications/initialized' }))).id).toBeNull()
  } finally {
    McpService.prototype.handle = handle
  }
})
