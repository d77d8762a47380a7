import { afterAll, beforeAll, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { buildTestApp, type TestApp } from '../support/harness'
import { codeFlowTokens } from '../support/oauth'

// Params that do not fit a method's shape are the caller's mistake: JSON-RPC -32602 (invalid
// params) naming the field in words. Before, tools/call without params, initialize without (or
// with a mistyped) protocolVersion or capabilities, and tools/list with a numeric cursor were
// answered -32603 (internal error) with zod's JSON dump of issues as the message.

const YAML = `
providers: [{ id: demo, type: demo, retention: none }]
models:
  - { id: demo-anonymous, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 4096 }
plans: { payg: { monthly_allowance: "0", fusion: false } }
`

let t: TestApp
let base: string
let token: string

beforeAll(async () => {
  const env = { SVC_CONFIG: '/virtual/gateway.yaml' }
  t = await buildTestApp(env, loadConfig(env, () => YAML))
  base = t.listen()
  token = (await codeFlowTokens(t, (await t.createOrg('acme', 1_000_000_000n)).adminKey)).access_token
})

afterAll(() => t.close())

async function errorOf(method: string, params?: unknown): Promise<{ code: number; message: string }> {
  const response = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, ...(params === undefined ? {} : { params }) }),
  })
  expect(response.status).toBe(200)
  const reply = (await response.json()) as { id: number; error: { code: number; message: string } }
  expect(reply.id).toBe(1)
  return reply.error
}

const clientInfo = { name: 'raw', version: '0' }

test.each([
  ['tools/call without params', 'tools/call', undefined, 'Invalid params: params: expected object, received undefined'],
  ['tools/call without a name', 'tools/call', { arguments: {} }, 'Invalid params: params.name: expected string, received undefined'],
  ['initialize without protocolVersion', 'initialize', { capabilities: {}, clientInfo }, 'Invalid params: params.protocolVersion: expected string, received undefined'],
  ['initialize with a numeric protocolVersion', 'initialize', { protocolVersion: 20250618, capabilities: {}, clientInfo }, 'Invalid params: params.protocolVersion: expected string, received number'],
  ['initialize with capabilities a string', 'initialize', { protocolVersion: '2025-06-18', capabilities: 'all', clientInfo }, 'Invalid params: params.capabilities: expected object, received string'],
  ['initialize without params', 'initialize', undefined, 'Invalid params: params: expected object, received undefined'],
  ['tools/list with a numeric cursor', 'tools/list', { cursor: 5 }, 'Invalid params: params.cursor: expected string, received number'],
  // The list is one page: no cursor was handed out (MCP, "Pagination": invalid cursors SHOULD be -32602). QA.
  ['tools/list with a cursor never handed out', 'tools/list', { cursor: 'bogus' }, 'Invalid params: cursor: tools/list has one page and hands out no cursor'],
])('%s: -32602 naming the field', async (_name, method, params, message) => {
  const error = await errorOf(method, params)
  expect(error.code).toBe(-32602)
  // The message as sent, without the SDK's "MCP error -32602: " (which SDK clients add once themselves).
  expect(error.message).toBe(message)
})

test('well-formed requests are answered as before', async () => {
  const response = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
  })
  expect(((await response.json()) as any).result.tools).toHaveLength(5)
})

// MCP 2025-11-25 (Tasks): a receiver that does not declare the task capability for a request type
// MUST process it normally, ignoring the task metadata. This server declares none; the SDK's
// protocol layer answered such a tools/call -32603 "Server does not support task creation".
test('a tools/call carrying params.task runs as a normal call, alone or in a batch', async () => {
  const call = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'svc.list_models', arguments: {}, task: { ttl: 60000 } } })
  const post = (body: unknown) =>
    fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify(body),
    })
  const reply = (await (await post(call(1))).json()) as any
  expect(reply.error).toBeUndefined()
  // The tool's own result, not a CreateTaskResult.
  expect(reply.result.task).toBeUndefined()
  expect(reply.result.content[0].text).toContain('demo-anonymous')
  const batch = (await (await post([call(2), { ...call(3), params: { name: 'svc.list_models', task: {} } }])).json()) as any[]
  expect(batch.map(answer => [answer.id, answer.error, answer.result.content[0].text.includes('demo-anonymous')])).toEqual([[2, undefined, true], [3, undefined, true]])
})

// What tools/list advertises is what tools/call takes (QA): svc.chat_fusion's web flags said
// `default: true`, and a client filling in defaults sent the explicit true that requires the tool
// of every participant; prompt and system limits were UTF-16 units under JSON Schema's
// character-counting maxLength, and the prompt's maximum was the whole body's cap.
test('svc.chat_fusion advertises no default for its web flags, and no tool a prompt or system size in UTF-16 units', async () => {
  const response = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
  })
  const tools = ((await response.json()) as { result: { tools: Array<{ name: string; inputSchema: { properties: Record<string, Record<string, unknown>> } }> } }).result.tools
  const fusion = tools.find(tool => tool.name === 'svc.chat_fusion')!.inputSchema.properties
  // Left out: on where a participant supports it; true: required of every participant (README).
  expect([fusion.web_search!.default, fusion.web_fetch!.default]).toEqual([undefined, undefined])
  for (const tool of tools) for (const name of ['prompt', 'system']) expect(tool.inputSchema.properties[name]?.maxLength).toBeUndefined()
})

test('a system prompt of 600,000 emoji (1.2 M UTF-16 units, within the body cap) is taken', async () => {
  const response = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'svc.chat', arguments: { model: 'demo-anonymous', prompt: 'hi', system: '😀'.repeat(600_000), max_tokens: 1 } } }),
  })
  const reply = (await response.json()) as { result: { isError?: boolean; content: Array<{ text: string }> } }
  expect(reply.result.content[0]!.text).not.toContain('Expected string length')
})
