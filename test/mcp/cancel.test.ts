import { afterEach, beforeEach, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { loadConfig } from '../../src/config/load'
import { chunk, DONE, openAIUsage } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { buildTestApp, type TestApp, type TestOrg } from '../support/harness'
import { codeFlowTokens } from '../support/oauth'
import { poll } from '../support/poll'

// notifications/cancelled (MCP, "Cancellation"). The official SDK client's AbortSignal on
// callTool sends it as a POST of its own and keeps the original request open. Before, each POST
// had its own SDK Server, so the cancel reached one with nothing in flight, and the tools only
// watched the HTTP request's signal: the call ran upstream to its end and was billed in full.

const TEXT = 'The quick brown fox jumps over the dog. ' // 40 bytes: 10 tokens counted
const INPUT = 100
/** At 1 USD per million tokens, input and output: 1,000 nanos a token. */
const nanos = (tokens: number) => BigInt(tokens) * 1000n

let t: TestApp
let upstream: FakeUpstream
let base: string
let org: TestOrg
let token: string
/** Opens the upstream's gate (a stream held after its first output); every test opens it at the end. */
let openGate: () => void
let gate: Promise<void>

beforeEach(async () => {
  upstream = await FakeUpstream.start()
  const yaml = [
    'providers:',
    `  - { id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }`,
    'models:',
    '  - { id: slow, backends: [{ provider: up, model: x }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 16384, max_output_tokens: 2048 }',
    'plans: { payg: { monthly_allowance: "0", fusion: false } }',
  ].join('\n')
  const env = { SVC_CONFIG: '/virtual/gateway.yaml', UP_KEY: 'sk-up-0123456789' }
  t = await buildTestApp(env, loadConfig(env, () => yaml))
  base = t.listen()
  org = await t.createOrg('acme', 1_000_000_000n)
  token = (await codeFlowTokens(t, org.adminKey)).access_token
  gate = new Promise(resolve => (openGate = resolve))
})

afterEach(async () => {
  openGate()
  await upstream.close()
  await t.close()
})

/** A stream that reports its input count, sends TEXT, then waits for the gate before finishing. */
function heldStream() {
  const usage = (outputTokens: number) => ({ usage: openAIUsage({ inputTokens: INPUT, outputTokens }) })
  return {
    kind: 'sse' as const,
    body: [chunk({ role: 'assistant', content: '' }, null, usage(0)), chunk({ content: TEXT }), gate, chunk({}, 'stop', usage(10)), DONE],
  }
}

/** The official SDK client, recording the answer to its tools/call POST (content type and body). */
async function recordingClient(): Promise<{ client: Client; answer: () => Promise<{ type: string | null; body: string }> }> {
  const { promise: answer, resolve } = Promise.withResolvers<{ type: string | null; body: string }>()
  const recording: typeof fetch = Object.assign(async (input: string | URL | Request, init?: RequestInit) => {
    const response = await fetch(input, init)
    if (String(init?.body).includes('"tools/call"')) resolve(response.clone().text().then(body => ({ type: response.headers.get('content-type'), body })))
    return response
  }, { preconnect: fetch.preconnect })
  const client = new Client({ name: 'svc-test', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } }, fetch: recording }))
  return { client, answer: () => answer }
}

const prepaid = async () => (await t.deps.balance(org.orgId)).prepaidNanos
const callsEnded = () => poll('the call to leave the registry', 200, 10, () => (t.deps.mcpCalls.size === 0 ? true : undefined))

function rawMcp(bearer: string, message: unknown): Promise<Response> {
  return fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify(message),
  })
}

test('a cancelled call with progress: the upstream is cut, the output sent is billed, no reply is sent', async () => {
  upstream.enqueue(heldStream())
  const { client, answer } = await recordingClient()
  const before = await prepaid()
  const controller = new AbortController()
  const call = client.callTool({ name: 'svc.chat', arguments: { model: 'slow', prompt: 'hi' } }, CallToolResultSchema, {
    signal: controller.signal,
    // The first delta has reached the client: cancel, as a host's stop button does.
    onprogress: () => controller.abort('user pressed stop'),
  })
  expect(await call.catch(error => String(error))).toContain('user pressed stop')
  const received = await upstream.request(0)
  await received.disconnected
  await callsEnded()
  const charged = before - (await prepaid())
  // The original POST's SSE stream ended without a reply for the call (only its progress).
  const original = await answer()
  expect(original.type).toContain('text/event-stream')
  expect(original.body).toContain('notifications/progress')
  expect(original.body).not.toContain('"result"')
  expect(original.body).not.toContain('"error"')
  await client.close()
  // Charged as a client that leaves POST /v1/chat/completions after the same output is: its
  // input and the output sent (a count reported before the output ended does not cover it).
  upstream.enqueue(heldStream())
  const left = new AbortController()
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'slow', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    signal: left.signal,
  })
  const reader = response.body!.getReader()
  let seen = ''
  while (!seen.includes('brown fox')) seen += new TextDecoder().decode((await reader.read()).value)
  const middle = await prepaid()
  left.abort()
  await (await upstream.request(1)).disconnected
  await poll('the HTTP call to settle', 200, 10, () => (t.deps.lifecycle.inFlight === 0 ? true : undefined))
  expect(charged).toBeGreaterThan(0n)
  expect(middle - (await prepaid())).toBe(charged)
})

test('a cancelled collected call: the upstream is cut, nothing is billed, the POST ends with no reply', async () => {
  upstream.enqueue(heldStream())
  const { client, answer } = await recordingClient()
  const before = await prepaid()
  const controller = new AbortController()
  const call = client.callTool({ name: 'svc.chat', arguments: { model: 'slow', prompt: 'hi' } }, CallToolResultSchema, { signal: controller.signal })
  const received = await upstream.request(0)
  controller.abort('user pressed stop')
  expect(await call.catch(error => String(error))).toContain('user pressed stop')
  await received.disconnected
  await callsEnded()
  // A collected answer reaches no one: nothing is charged, as for a client that left.
  expect(await prepaid()).toBe(before)
  expect(await answer()).toEqual({ type: 'text/event-stream', body: '' })
  await client.close()
})

test("a cancel from another principal, or for an unknown id, is ignored: the call finishes and is billed in full", async () => {
  upstream.enqueue(heldStream())
  const other = (await codeFlowTokens(t, (await t.createOrg('other', 1_000_000_000n)).adminKey)).access_token
  // Another approval (grant) of the same key is another client too.
  const sameKeyOtherGrant = (await codeFlowTokens(t, org.adminKey)).access_token
  const before = await prepaid()
  const answer = rawMcp(token, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'svc.chat', arguments: { model: 'slow', prompt: 'hi' } } })
  const received = await upstream.request(0)
  expect(t.deps.mcpCalls.size).toBe(1)
  const cancel = (bearer: string, requestId: unknown) => rawMcp(bearer, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason: 'not yours' } })
  for (const bearer of [other, sameKeyOtherGrant]) expect((await cancel(bearer, 7)).status).toBe(202)
  expect((await cancel(token, 8)).status).toBe(202)
  expect((await cancel(token, '7')).status).toBe(202)
  expect(received.isDisconnected()).toBe(false)
  openGate()
  const reply = (await (await answer).json()) as any
  expect(reply.id).toBe(7)
  expect(reply.result.structuredContent).toMatchObject({ text: TEXT, usage: { input_tokens: INPUT, output_tokens: 10 } })
  await callsEnded()
  expect(before - (await prepaid())).toBe(nanos(INPUT + 10))
})

test('the registry forgets calls that finish or fail', async () => {
  upstream.enqueue({ kind: 'json', status: 400, body: { error: { message: 'bad' } } })
  const failed = (await (await rawMcp(token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'svc.chat', arguments: { model: 'slow', prompt: 'hi' } } })).json()) as any
  expect(failed.result.isError).toBe(true)
  const listed = (await (await rawMcp(token, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'svc.list_models', arguments: {} } })).json()) as any
  expect(listed.result.structuredContent.models).toHaveLength(1)
  expect(t.deps.mcpCalls.size).toBe(0)
})

test('a cancelled call in a batch: answered as cancelled, and the batch\'s other call still answered and billed once', async () => {
  upstream.enqueue(heldStream(), heldStream())
  const before = await prepaid()
  const call = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'svc.chat', arguments: { model: 'slow', prompt: 'hi' } } })
  const answer = rawMcp(token, [call(101), call(102)])
  const [first, second] = [await upstream.request(0), await upstream.request(1)]
  expect((await rawMcp(token, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 101, reason: 'stop' } })).status).toBe(202)
  // The cancelled call's upstream is cut (one of the two: the batch's order is not the upstream's).
  await poll('one upstream call to be cut', 200, 10, () => (first.isDisconnected() !== second.isDisconnected() ? true : undefined))
  openGate()
  const replies = ((await (await answer).json()) as any[]).toSorted((a, b) => a.id - b.id)
  expect(replies.map(reply => reply.id)).toEqual([101, 102])
  expect(replies[0].result).toEqual({ content: [{ type: 'text', text: 'the client cancelled the call: stop' }], isError: true })
  expect(replies[1].result.structuredContent).toMatchObject({ text: TEXT, usage: { input_tokens: INPUT, output_tokens: 10 } })
  await callsEnded()
  // The completed call in full; the cancelled collected one nothing (its answer reached no one).
  expect(before - (await prepaid())).toBe(nanos(INPUT + 10))
})

test("a cancel from a host sharing the grant stops only its own call, though both number their calls alike", async () => {
  // Before: calls were keyed by grant and id, and both SDK clients sent their tools/call as id 1:
  // cancelling one stopped both, and the other got no reply.
  upstream.enqueue(heldStream(), heldStream())
  const mine = await recordingClient()
  const theirs = await recordingClient()
  const before = await prepaid()
  const controller = new AbortController()
  const cancelled = mine.client.callTool({ name: 'svc.chat', arguments: { model: 'slow', prompt: 'hi' } }, CallToolResultSchema, {
    signal: controller.signal,
    onprogress: () => controller.abort('user pressed stop'),
  })
  let progressed!: () => void
  const theirsProgressed = new Promise<void>(resolve => (progressed = resolve))
  const finished = theirs.client.callTool({ name: 'svc.chat', arguments: { model: 'slow', prompt: 'hi' } }, CallToolResultSchema, { onprogress: () => progressed() })
  expect(await cancelled.catch(error => String(error))).toContain('user pressed stop')
  await theirsProgressed
  await poll('the cancelled call to end', 200, 10, () => (t.deps.mcpCalls.size === 1 ? true : undefined))
  openGate()
  const result = await finished
  expect(result.isError).toBeFalsy()
  expect(result.structuredContent).toMatchObject({ text: TEXT, usage: { input_tokens: INPUT, output_tokens: 10 } })
  await callsEnded()
  await mine.client.close()
  await theirs.client.close()
  // Theirs in full; mine its input and the output sent before the cancel.
  expect(before - (await prepaid())).toBeGreaterThan(nanos(INPUT + 10))
})
