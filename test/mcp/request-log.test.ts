import { afterEach, beforeEach, expect, test } from 'bun:test'
import { createLogger } from '../../src/observability/logger'
import { FakeUpstream } from '../support/fake-upstream'
import { buildConfiguredApp, type TestApp, type TestOrg } from '../support/harness'
import { codeFlowTokens } from '../support/oauth'
import { poll } from '../support/poll'

// README "Metrics and logs": an MCP request's line names the caller (the route authenticates
// without the auth macro, which alone filled it before), and a tools/call's line carries the
// billed chat's model, backend, outcome, usage and charge, written when the JSON response or the
// progress stream ends (before, a streamed call's line left with the SSE headers, bare, although
// the chat was billed). Refusals inside a tool have an outcome and are counted as refusals.

let t: TestApp
let upstream: FakeUpstream
let org: TestOrg
let token: string
let lines: string[]

const usage = { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 }
const chunk = (content: string | null, finish: string | null = null) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'up', choices: [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish }] })}\n\n`
const usageChunk = `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'up', choices: [], usage })}\n\n`
const STREAM = chunk('he') + chunk('llo', 'stop') + usageChunk + 'data: [DONE]\n\n'

beforeEach(async () => {
  upstream = await FakeUpstream.start()
  lines = []
  const yaml = [
    'providers:',
    `  - { id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }`,
    'models:',
    '  - { id: solo, backends: [{ provider: up, model: model-a }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 16384, max_output_tokens: 2048 }',
    'plans: { payg: { monthly_allowance: "0", fusion: false } }',
    'limits:',
    '  inference: { key: { burst: 2, per_second: 0.001 }, org: { burst: 100, per_second: 1 } }',
  ]
  t = await buildConfiguredApp(yaml, { UP_KEY: 'sk-up' }, { logger: createLogger('info', line => lines.push(line)) })
  org = await t.createOrg('acme', 1_000_000_000n)
  token = (await codeFlowTokens(t, org.adminKey)).access_token
})

afterEach(async () => {
  await upstream.close()
  await t.close()
})

const HEADERS = { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' }

function mcp(id: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return t.app.handle(
    new Request('http://localhost/mcp', {
      method: 'POST', signal, body: JSON.stringify(body),
      headers: { ...HEADERS, authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-request-id': id },
    }),
  )
}

const chatCall = (id: number, progress: boolean) => ({
  jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'svc.chat', arguments: { model: 'solo', prompt: 'hi' }, ...(progress ? { _meta: { progressToken: 'p' } } : {}) },
})

const lineOf = (requestId: string) => lines.map(line => JSON.parse(line)).filter(line => line.msg === 'request' && line.request_id === requestId)

async function settledNanos(): Promise<string> {
  const result = await t.deps.database.client.execute("SELECT coalesce(sum(amount_nanos), 0) AS s FROM ledger_entries WHERE kind = 'settle'")
  return String(result.rows[0]!.s)
}

test('an MCP request names its organization and key, as the other routes do', async () => {
  const response = await mcp('req-mcp-init', { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } })
  expect(response.status).toBe(200)
  await response.text()
  expect(lineOf('req-mcp-init')).toEqual([expect.objectContaining({ route: '/mcp', status: 200, org_id: org.orgId, key_id: org.adminKeyId })])
})

test('a streamed tools/call is logged when its progress stream ends, with the chat it billed', async () => {
  upstream.enqueue({ kind: 'sse', body: STREAM })
  const response = await mcp('req-mcp-stream', chatCall(3, true))
  expect(response.headers.get('content-type')).toStartWith('text/event-stream')
  // The headers are out, the answer is not: no line yet.
  expect(lineOf('req-mcp-stream')).toEqual([])
  expect(await response.text()).toContain('"finish_reason":"stop"')
  const logged = await poll('the stream line', 400, 5, () => lineOf('req-mcp-stream')[0])
  expect(logged).toMatchObject({
    route: '/mcp', status: 200, org_id: org.orgId, key_id: org.adminKeyId, model: 'solo', backend: expect.stringContaining('model-a'),
    outcome: 'finished', stream: true, input_tokens: 11, output_tokens: 7, charged_nanos: await settledNanos(),
  })
  expect(lineOf('req-mcp-stream')).toHaveLength(1)
})

test('a JSON tools/call carries its chat; a refusal inside the tool is its outcome and a counted refusal', async () => {
  upstream.enqueue({ kind: 'json', body: { id: 'c1', object: 'chat.completion', created: 1, model: 'up', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage } })
  await (await mcp('req-mcp-json', chatCall(1, false))).text()
  expect(lineOf('req-mcp-json')[0]).toMatchObject({ model: 'solo', outcome: 'ok', stream: false, input_tokens: 11, output_tokens: 7, charged_nanos: await settledNanos() })

  // The key's bucket (burst 2) gives its last token to a second call, then refuses.
  upstream.enqueue({ kind: 'json', body: { id: 'c2', object: 'chat.completion', created: 1, model: 'up', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage } })
  await (await mcp('req-mcp-second', chatCall(2, false))).text()
  const refused = await mcp('req-mcp-refused', chatCall(3, false))
  expect(await refused.text()).toContain('-32003')
  expect(lineOf('req-mcp-refused')[0]).toMatchObject({ status: 200, outcome: 'rate_limited', org_id: org.orgId })
  expect(t.deps.metrics.registry.render()).toContain('svc_refusals_total{code="rate_limited"} 1')
})

test('a client that leaves a progress stream: the line says cancelled, once, when the call has ended', async () => {
  let release!: () => void
  const gate = new Promise<void>(resolve => (release = resolve))
  upstream.enqueue({ kind: 'sse', body: [chunk('he'), gate, chunk('llo', 'stop') + usageChunk + 'data: [DONE]\n\n'] })
  const abort = new AbortController()
  const response = await mcp('req-mcp-left', chatCall(4, true), abort.signal)
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let seen = ''
  while (!seen.includes('notifications/progress')) seen += decoder.decode((await reader.read()).value)
  abort.abort()
  await reader.cancel()
  release()
  const logged = await poll('the line of the stream left', 400, 5, () => lineOf('req-mcp-left')[0])
  expect(logged).toMatchObject({ status: 200, model: 'solo', outcome: 'cancelled', stream: true })
  expect(lineOf('req-mcp-left')).toHaveLength(1)
})

test("a batch's line carries every call's usage and charge, as the ledger booked them (before: the last call's alone)", async () => {
  const answer = (input: number, output: number) => ({
    kind: 'json' as const,
    body: { id: 'c1', object: 'chat.completion', created: 1, model: 'up', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output } },
  })
  upstream.enqueue(answer(11, 7), answer(5, 3))
  const response = await mcp('req-mcp-batch', [chatCall(1, false), chatCall(2, false)])
  expect(((await response.json()) as unknown[]).length).toBe(2)
  const line = lineOf('req-mcp-batch')[0]
  expect(line).toMatchObject({ input_tokens: 16, output_tokens: 10, charged_nanos: await settledNanos() })
  // 16 input tokens at 1 USD and 10 output tokens at 2 USD per million, in nanos.
  expect(line.charged_nanos).toBe(String(16n * 1000n + 10n * 2000n))
})
