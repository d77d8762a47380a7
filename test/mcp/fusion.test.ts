import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js'
import { switchPlan } from '../../src/billing/plan-switch'
import { createLogger } from '../../src/observability/logger'
import { openAIWire } from '../providers/openai-wire'
import { answer, buildFusionHarness, chargeOf, JUDGE_PRICE, PARTICIPANT_PRICE, type FusionHarness } from '../fusion/support'
import { json, type TestApp } from '../support/harness'
import { codeFlowTokens } from '../support/oauth'
import { connectMcp } from '../support/mcp'
import { poll } from '../support/poll'

// svc.chat_fusion with the official SDK client over a real socket, in front of one fake
// OpenAI-compatible upstream per participant and one for the judge: progress notifications,
// the result as text and structured content, request_id as the Idempotency-Key, refusals as
// JSON-RPC errors and failures as isError results, and billing equal to the HTTP route's.

let h: FusionHarness
let base: string
let token: string
let lines: Array<Record<string, unknown>>

beforeEach(async () => {
  lines = []
  h = await buildFusionHarness({
    plans: 'plans: { payg: { monthly_allowance: "0", fusion: true }, basic: { monthly_allowance: "0", fusion: false } }',
    logger: createLogger('info', line => lines.push(JSON.parse(line))),
  })
  base = h.t.listen()
  token = (await codeFlowTokens(h.t, h.org.adminKey)).access_token
})

afterEach(() => h.close())

const connect = (bearer = token) => connectMcp(base, bearer)

/** Settled charges of one organization for a purpose, sorted. */
async function charges(t: TestApp, orgId: string, purpose = 'fusion'): Promise<bigint[]> {
  const rows = await t.deps.database.client.execute({ sql: "select amount_nanos from ledger_entries where org_id = ? and kind = 'settle' and purpose = ?", args: [orgId, purpose] })
  return rows.rows.map(row => BigInt(row.amount_nanos as bigint)).sort()
}

const USAGE = { inputTokens: 100, outputTokens: 20 }
const JUDGE_USAGE = { inputTokens: 500, outputTokens: 40 }
const text = (result: Record<string, unknown>) => (result.content as Array<{ text: string }>)[0]!.text

function script() {
  h.a.enqueue(answer('9.9 is larger.', USAGE))
  h.b.enqueue(answer('9.9, since 0.90 > 0.11.', USAGE))
  h.judge.enqueue(answer('Both agree: 9.9 is larger.', JUDGE_USAGE))
}

describe('svc.chat_fusion', () => {
  test('with a progressToken: one notification per participant step and the synthesis, then the result; billed as POST /api/v1/chat/fusion bills', async () => {
    script()
    const client = await connect()
    const progress: Array<{ progress: number; total?: number; message?: string }> = []
    const requestId = crypto.randomUUID()
    const result = await client.callTool(
      { name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: requestId, prompt: 'Which is larger, 9.11 or 9.9?', system: 'Be brief.' } },
      CallToolResultSchema,
      { onprogress: update => progress.push(update) },
    )
    expect(result.isError).toBeFalsy()
    expect(text(result)).toStartWith('Both agree: 9.9 is larger.\n\nFusion complete; judge judge.\n- a: answered (20 tokens')
    const structured = result.structuredContent as any
    expect(structured).toMatchObject({ object: 'fusion.completion', request_id: requestId, status: 'complete', judge: 'judge', synthesis: 'Both agree: 9.9 is larger.' })
    expect(structured.synthesis_prompt_tokens).toBe(500)
    expect(structured.models.map((entry: any) => [entry.model, entry.output, entry.tokens, entry.web_search, entry.web_fetch])).toEqual([
      ['a', '9.9 is larger.', 20, false, false],
      ['b', '9.9, since 0.90 > 0.11.', 20, false, false],
    ])
    // Started and answered for each participant (in any order), then the synthesis; increasing, out of 5.
    expect(progress.map(update => update.progress)).toEqual([1, 2, 3, 4, 5])
    expect(progress.every(update => update.total === 5)).toBe(true)
    expect(progress.slice(0, 4).map(update => update.message!.replace(/ \(.*/, '')).sort()).toEqual(['a: answered', 'a: started', 'b: answered', 'b: started'])
    expect(progress[4]!.message).toBe('judge: writing the synthesis')
    // What the participants saw: the system text and the prompt; no web tools (these models have none).
    expect(h.a.onlyRequest().body.messages).toEqual([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Which is larger, 9.11 or 9.9?' }])
    const viaMcp = await charges(h.t, h.org.orgId)
    expect(viaMcp).toEqual([chargeOf(PARTICIPANT_PRICE, USAGE), chargeOf(PARTICIPANT_PRICE, USAGE), chargeOf(JUDGE_PRICE, JUDGE_USAGE)].sort())

    // The same work over HTTP, for another organization: the same charges.
    script()
    const other = await h.t.createOrg('http', 10_000_000_000n)
    const response = await h.fusion(
      { models: ['a', 'b'], messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Which is larger, 9.11 or 9.9?' }] },
      { key: other.adminKey, headers: { 'idempotency-key': crypto.randomUUID() } },
    )
    const route = await json(response)
    expect(route.status).toBe('complete')
    expect(await charges(h.t, other.orgId)).toEqual(viaMcp)
    // The tool's result is the route's object (every field of it) plus the request id and the web flags.
    const added = new Set(['request_id', 'web_search', 'web_fetch'])
    expect(Object.keys(structured).filter(key => !added.has(key)).toSorted()).toEqual(Object.keys(route).toSorted())
    expect(Object.keys(structured.models[0]).filter(key => !added.has(key)).toSorted()).toEqual(Object.keys(route.models[0]).toSorted())
    expect(structured.created).toBeInteger()
    await client.close()
  })

  test('a run refused as a whole announces nothing: no progress for parts that never ran', async () => {
    // Regression QA: during a drain, "a: started", "b: started", then both failed, then the refusal.
    const client = await connect()
    h.t.deps.lifecycle.drain()
    const progress: unknown[] = []
    const result = await client.callTool(
      { name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: crypto.randomUUID(), prompt: 'q' } },
      CallToolResultSchema,
      { onprogress: update => progress.push(update) },
    ).catch(error => error)
    expect(JSON.stringify(result.isError === true ? result.content : result.message)).toContain('shutting down')
    expect(progress).toEqual([])
    expect(h.a.requests.length + h.b.requests.length).toBe(0)
    await client.close()
  })

  test('request_id is the Idempotency-Key: a retry runs again but bills nothing twice; reused for another prompt it is refused; a new id bills anew', async () => {
    const client = await connect()
    const requestId = crypto.randomUUID()
    const call = (id: string) => client.callTool({ name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: id, prompt: 'Which is larger, 9.11 or 9.9?' } })
    script()
    expect((await call(requestId)).isError).toBeFalsy()
    const once = await charges(h.t, h.org.orgId)
    expect(once.length).toBe(3)
    script()
    expect(((await call(requestId.toUpperCase())).structuredContent as any).status).toBe('complete')
    expect(h.a.requests.length).toBe(2)
    expect(await charges(h.t, h.org.orgId)).toEqual(once)
    // The same request_id for another prompt is refused before anything runs or is billed, as over HTTP.
    const reused = await client.callTool({ name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: requestId, prompt: 'And 9.8?' } })
    expect(reused.isError).toBe(true)
    expect(text(reused)).toBe('this request_id was used for a different request; send a new request_id')
    expect(h.a.requests.length).toBe(2)
    script()
    await call(crypto.randomUUID())
    expect((await charges(h.t, h.org.orgId)).length).toBe(6)
    await client.close()
  })

  test('org_inference_concurrency 1: the run takes one slot for all its parts, as over HTTP (complete, the slot freed)', async () => {
    await h.close()
    h = await buildFusionHarness({ limits: '{ org_inference_concurrency: 1 }' })
    base = h.t.listen()
    token = (await codeFlowTokens(h.t, h.org.adminKey)).access_token
    const client = await connect()
    script()
    const result = await client.callTool({ name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: crypto.randomUUID(), prompt: 'Which is larger, 9.11 or 9.9?' } })
    expect(result.isError).toBeFalsy()
    expect((result.structuredContent as any).status).toBe('complete')
    expect((await charges(h.t, h.org.orgId)).length).toBe(3)
    expect(h.t.deps.limits.concurrency.size).toBe(0)
    await client.close()
  })

  test('failures are isError results: bad arguments, unknown models, every participant failing', async () => {
    const client = await connect()
    const call = (args: Record<string, unknown>) => client.callTool({ name: 'svc.chat_fusion', arguments: { request_id: crypto.randomUUID(), prompt: 'x', ...args } })
    const one = await call({ models: ['a'] })
    expect(one.isError).toBe(true)
    expect(text(one)).toStartWith('invalid arguments: models')
    const unknown = await call({ models: ['a', 'nope'] })
    expect(unknown.isError).toBe(true)
    expect(text(unknown)).toStartWith('models.1: model "nope" is not in the catalog')
    const badId = await client.callTool({ name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: 'retry-1', prompt: 'x' } })
    // Before: the UUID's regular expression, "Expected string to match '^[0-9a-fA-F]{8}-…'".
    expect(text(badId)).toBe('invalid arguments: request_id: must be a UUID, e.g. 0f8fad5b-d9cb-469f-a165-70867728950e')

    // Both participants fail at their providers: the run failed, reported in full as an isError result.
    h.a.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
    h.b.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
    const failed = await call({ models: ['a', 'b'] })
    expect(failed.isError).toBe(true)
    const structured = failed.structuredContent as any
    expect(structured.status).toBe('failed')
    expect(structured.models.map((entry: any) => entry.error_code)).toEqual(['provider_error', 'provider_error'])
    expect(text(failed)).toContain('Fusion failed; judge judge.\n- a: failed (provider_error)')
    expect(h.judge.requests.length).toBe(0)
    expect(await charges(h.t, h.org.orgId)).toEqual([])
    await client.close()
  })

  test('web tools: by default only where the model supports them (none here, so none run); an explicit true is refused for such models', async () => {
    const client = await connect()
    for (const flag of ['web_search', 'web_fetch']) {
      const refused = await client.callTool({ name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: crypto.randomUUID(), prompt: 'read https://example.com', [flag]: true } })
      expect(refused.isError).toBe(true)
      expect(text(refused)).toContain(`does not support hosted ${flag}`)
    }
    expect(h.a.requests.length + h.b.requests.length).toBe(0)
    expect(await charges(h.t, h.org.orgId)).toEqual([])
    script()
    const opted = await client.callTool({ name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: crypto.randomUUID(), prompt: 'Which is larger?', web_search: false } })
    expect((opted.structuredContent as any).status).toBe('complete')
    await client.close()
  })

  test('refusals are JSON-RPC errors: a plan without Fusion and an empty balance are -32002', async () => {
    await switchPlan(h.t.deps.writer, h.t.deps.plans, h.t.clock, h.org.orgId, 'basic')
    const client = await connect()
    const error = await client.callTool({ name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: crypto.randomUUID(), prompt: 'x' } }).catch(caught => caught)
    expect(error).toBeInstanceOf(McpError)
    expect(error.code).toBe(-32002)
    expect(error.message).toContain('plan with Fusion access')
    expect(error.data).toMatchObject({ code: 'forbidden', status: 403 })
    expect(h.a.requests.length).toBe(0)
    await client.close()

    // No funds: every participant is refused before any provider call, so the refusal itself comes back (-32002).
    const broke = await h.t.createOrg('broke', 0n)
    const poor = await connect((await codeFlowTokens(h.t, broke.adminKey)).access_token)
    const unpaid = await poor.callTool({ name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: crypto.randomUUID(), prompt: 'x' } }).catch(caught => caught)
    expect(unpaid).toBeInstanceOf(McpError)
    expect(unpaid.code).toBe(-32002)
    expect(unpaid.data.code).toBe('insufficient_quota')
    expect(h.a.requests.length + h.b.requests.length).toBe(0)
    await poor.close()
  })

  test('a client that leaves after one answer: the /mcp line says 499 cancelled, the cut parts cancelled, no refusal counted', async () => {
    // README (Metrics and logs): a call whose client left is `cancelled`, never an upstream failure.
    // Before: a 200 with no outcome, the cut participant and the judge logged provider_error.
    h.a.enqueue(answer('9.9 is larger.', USAGE))
    h.b.enqueue({ kind: 'stall' })
    const client = new AbortController()
    const answered = h.t.app.handle(
      new Request('http://localhost/mcp', {
        method: 'POST', signal: client.signal,
        headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-request-id': 'req-mcp-fusion-left' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: crypto.randomUUID(), prompt: 'Which is larger, 9.11 or 9.9?' } } }),
      }),
    )
    const part = (model: string) => lines.find(line => line.msg === 'chat' && line.purpose === 'fusion' && line.model === model)
    await h.b.request(0)
    await poll("a's answer", 200, 10, () => part('a'))
    client.abort()
    await answered.catch(() => undefined)
    const line = await poll('the request line', 200, 10, () => lines.find(entry => entry.msg === 'request' && entry.request_id === 'req-mcp-fusion-left'))
    expect(line).toMatchObject({ route: '/mcp', status: 499, outcome: 'cancelled' })
    expect(part('b')).toMatchObject({ outcome: 'cancelled' })
    expect(part('judge')).toBeUndefined() // no judge starts once the client has left
    expect(await charges(h.t, h.org.orgId)).toEqual([chargeOf(PARTICIPANT_PRICE, USAGE)])
    expect(h.t.deps.metrics.registry.render()).not.toContain('svc_refusals_total{')
  })

  test('with a progressToken: its event stream is one open stream until the client cancels it', async () => {
    // QA: svc_open_streams counted chat streams only; an MCP progress stream of Fusion was not counted.
    h.a.enqueue(answer('9.9 is larger.', USAGE))
    h.b.enqueue({ kind: 'stall' })
    const response = await h.t.app.handle(
      new Request('http://localhost/mcp', {
        method: 'POST',
        headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'svc.chat_fusion', arguments: { models: ['a', 'b'], request_id: crypto.randomUUID(), prompt: 'Which is larger, 9.11 or 9.9?' }, _meta: { progressToken: 'p' } } }),
      }),
    )
    expect(response.headers.get('content-type')).toContain('text/event-stream')
    const reader = response.body!.getReader()
    let received = ''
    while (!received.includes('notifications/progress')) received += new TextDecoder().decode((await reader.read()).value)
    expect(h.t.deps.metrics.openStreams).toBe(1)
    await reader.cancel()
    await poll('the stream to be counted out', 200, 10, () => (h.t.deps.metrics.openStreams === 0 ? true : undefined))
  })
})
