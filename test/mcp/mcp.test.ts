import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js'
import { loadConfig } from '../../src/config/load'
import { buildTestApp, json, type TestApp, type TestOrg } from '../support/harness'
import { codeFlowTokens } from '../support/oauth'
import { connectMcp } from '../support/mcp'

// The hosted MCP server through a real socket, with the official SDK client (Streamable HTTP),
// on the demo model: tools, progress over SSE, JSON-RPC refusal codes, auth on /mcp, the
// prefix rules on every other route, and billing equal to the HTTP route's for the same work.

// One pay-as-you-go plan (every charge reaches the prepaid balance), a small key bucket.
const YAML = `
providers: [{ id: demo, type: demo, retention: none }]
models:
  - { id: demo-anonymous, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1.234567891", output_per_mtok: "3.000000007" }, context_length: 32768, max_output_tokens: 4096 }
plans: { payg: { monthly_allowance: "0", fusion: false } }
limits: { inference: { key: { burst: 4, per_second: 0.001 }, org: { burst: 100, per_second: 1 } } }
mcp: { allowed_origins: ["https://inspector.example"] }
`

let t: TestApp
let base: string
let org: TestOrg
let token: string

beforeEach(async () => {
  const env = { SVC_CONFIG: '/virtual/gateway.yaml' }
  t = await buildTestApp(env, loadConfig(env, () => YAML))
  base = t.listen()
  org = await t.createOrg('acme', 1_000_000_000n)
  token = (await codeFlowTokens(t, org.adminKey)).access_token
})

afterEach(() => t.close())

const connect = (bearer = token) => connectMcp(base, bearer)

/** What the ledger settled for an organization, to the nano. */
async function settled(orgId: string): Promise<bigint> {
  const rows = await t.deps.database.client.execute({ sql: "select coalesce(sum(amount_nanos), 0) as total from ledger_entries where org_id = ? and kind = 'settle'", args: [orgId] })
  return BigInt(rows.rows[0]!.total as bigint)
}

const rawMcp = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(body) })

describe('tools', () => {
  test('initialize negotiates the version; tools/list describes each tool with a JSON Schema', async () => {
    const client = await connect()
    expect(client.getServerVersion()?.name).toBe('svc-gateway')
    const { tools } = await client.listTools()
    expect(tools.map(tool => tool.name).sort()).toEqual(['svc.chat', 'svc.chat_fusion', 'svc.list_models', 'svc.web_fetch', 'svc.web_search'])
    for (const tool of tools) {
      expect(tool.description!.length).toBeGreaterThan(40)
      expect(tool.inputSchema.type).toBe('object')
    }
    // Every tool that spends money is not read-only, so hosts ask before running it (before: the web tools said read-only).
    expect(tools.filter(tool => tool.annotations?.readOnlyHint === true).map(tool => tool.name)).toEqual(['svc.list_models'])
    const chat = tools.find(tool => tool.name === 'svc.chat')!
    expect(chat.inputSchema.required).toEqual(['model', 'prompt'])
    expect(Object.keys(chat.inputSchema.properties!)).toEqual(['model', 'prompt', 'system', 'max_tokens', 'temperature'])
    await client.close()

    for (const [asked, answered] of [['2024-11-05', '2024-11-05'], ['2025-06-18', '2025-06-18'], ['1999-01-01', '2025-11-25']]) {
      const response = await rawMcp({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: asked, capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }, { authorization: `Bearer ${token}` })
      expect(response.status).toBe(200)
      expect((await json(response)).result.protocolVersion).toBe(answered)
      // A session id, kept nowhere: it only tells apart the cancels of hosts that share a grant.
      expect(response.headers.get('mcp-session-id')).toMatch(/^[\x21-\x7e]{1,128}$/)
    }
  })

  test('only an initialize answered with its result carries an Mcp-Session-Id, not a refused one', async () => {
    const auth = { authorization: `Bearer ${token}` }
    // Before: 200 with the -32602 error and a session id all the same.
    for (const params of [undefined, { protocolVersion: 7 }, { protocolVersion: '2025-11-25', capabilities: {} }]) {
      const refused = await rawMcp({ jsonrpc: '2.0', id: 1, method: 'initialize', ...(params ? { params } : {}) }, auth)
      expect(refused.status).toBe(200)
      expect((await json(refused)).error.code).toBe(-32602)
      expect(refused.headers.get('mcp-session-id')).toBeNull()
    }
    const accepted = await rawMcp({ jsonrpc: '2.0', id: 2, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }, auth)
    expect(accepted.headers.get('content-type')).toBe('application/json')
    expect((await json(accepted)).result.serverInfo.name).toBe('svc-gateway')
    expect(accepted.headers.get('mcp-session-id')).toMatch(/^[\x21-\x7e]{1,128}$/)
    // Nor does any other method get one.
    expect((await rawMcp({ jsonrpc: '2.0', id: 3, method: 'ping' }, auth)).headers.get('mcp-session-id')).toBeNull()
  })

  test('svc.chat answers through the pipeline and bills exactly what POST /v1/chat/completions bills', async () => {
    const client = await connect()
    const result = await client.callTool({ name: 'svc.chat', arguments: { model: 'demo-anonymous', prompt: 'hello there', system: 'Be terse.' } })
    expect(result.isError).toBeFalsy()
    expect((result.content as Array<{ text: string }>)[0]!.text).toBe('Hello from the demo model. You said: hello there')
    const structured = result.structuredContent as { model: string; finish_reason: string; usage: { input_tokens: number; output_tokens: number } }
    expect([structured.model, structured.finish_reason]).toEqual(['demo-anonymous', 'stop'])
    expect(structured.usage.input_tokens).toBeGreaterThan(0)
    expect(structured.usage.output_tokens).toBeGreaterThan(0)
    const viaMcp = await settled(org.orgId)
    expect(viaMcp).toBeGreaterThan(0n)

    const other = await t.createOrg('http', 1_000_000_000n)
    const response = await t.request('POST', '/v1/chat/completions', {
      key: other.adminKey, body: { model: 'demo-anonymous', messages: [{ role: 'system', content: 'Be terse.' }, { role: 'user', content: 'hello there' }] },
    })
    expect(response.status).toBe(200)
    const body = await json(response)
    expect([body.usage.prompt_tokens, body.usage.completion_tokens]).toEqual([structured.usage.input_tokens, structured.usage.output_tokens])
    expect(await settled(other.orgId)).toBe(viaMcp)
    await client.close()
  })

  test('with a progressToken the call is answered as SSE, text deltas arriving as progress first', async () => {
    const client = await connect()
    const progress: Array<{ progress: number; message?: string }> = []
    const result = await client.callTool({ name: 'svc.chat', arguments: { model: 'demo-anonymous', prompt: 'stream me' } }, CallToolResultSchema, { onprogress: update => progress.push(update) })
    const text = (result.content as Array<{ text: string }>)[0]!.text
    expect(text).toBe('Hello from the demo model. You said: stream me')
    expect(progress.length).toBeGreaterThan(3)
    expect(progress.map(update => update.message).join('')).toBe(text)
    for (let index = 1; index < progress.length; index++) expect(progress[index]!.progress).toBeGreaterThan(progress[index - 1]!.progress)
    // The streamed call is billed like the collected one.
    const once = await settled(org.orgId)
    await client.callTool({ name: 'svc.chat', arguments: { model: 'demo-anonymous', prompt: 'stream me' } })
    expect(await settled(org.orgId)).toBe(once * 2n)
    const raw = await rawMcp({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'svc.list_models', arguments: {}, _meta: { progressToken: 'p' } } }, { authorization: `Bearer ${token}`, 'mcp-protocol-version': '2025-11-25' })
    expect(raw.headers.get('content-type')).toContain('text/event-stream')
    await client.close()
  })

  test('svc.list_models lists the catalog as structured content, filtered by privacy_tier as GET /v1/models is', async () => {
    const client = await connect()
    const result = await client.callTool({ name: 'svc.list_models', arguments: {} })
    const ids = (content: unknown) => (content as { models: Array<{ id: string }> }).models.map(model => model.id)
    expect(ids(result.structuredContent)).toEqual(['demo-anonymous'])
    // The entries are /api/v1/models' own.
    const api = (await (await fetch(`${base}/api/v1/models`)).json()) as { data: unknown[] }
    expect((result.structuredContent as { models: unknown[] }).models).toEqual(api.data)
    // Before, the filter was `privacy_level`, and the spec's (and the routes') `privacy_tier` was refused.
    expect(ids((await client.callTool({ name: 'svc.list_models', arguments: { privacy_tier: 'anonymous' } })).structuredContent)).toEqual(['demo-anonymous'])
    const none = await client.callTool({ name: 'svc.list_models', arguments: { privacy_tier: 'confidential' } })
    expect((none.content as Array<{ text: string }>)[0]!.text).toBe('No models match.')
    expect((await fetch(`${base}/v1/models?privacy_tier=confidential`).then(response => response.json()) as { data: unknown[] }).data).toEqual([])
    const old = await client.callTool({ name: 'svc.list_models', arguments: { privacy_level: 'confidential' } })
    expect(old.isError).toBe(true)
    expect((old.content as Array<{ text: string }>)[0]!.text).toContain('privacy_level')
    // tools/list says so: the input names privacy_tier, and the output schema describes whole entries.
    const listed = (await client.listTools()).tools.find(tool => tool.name === 'svc.list_models')!
    expect(Object.keys(listed.inputSchema.properties!)).toEqual(['privacy_tier'])
    expect(listed.description).toContain('privacy_tier')
    const entry = (listed.outputSchema as any).properties.models.items
    expect(entry.properties.privacy_levels.type).toBe('array')
    expect(entry.properties.pricing.type).toBe('object')
    await client.close()
  })

  test('tool failures are isError results; an unknown tool is a JSON-RPC error', async () => {
    const client = await connect()
    const badArgs = await client.callTool({ name: 'svc.chat', arguments: { model: 'demo-anonymous' } })
    expect(badArgs.isError).toBe(true)
    expect((badArgs.content as Array<{ text: string }>)[0]!.text).toContain('prompt')
    // A value outside a set names the set (before: "Expected union value"), as the HTTP routes do.
    const badTier = await client.callTool({ name: 'svc.list_models', arguments: { privacy_tier: 'secret' } })
    expect(badTier.isError).toBe(true)
    expect((badTier.content as Array<{ text: string }>)[0]!.text).toBe('invalid arguments: privacy_tier: must be one of "anonymous", "private", "confidential", "encrypted"')
    const unknownModel = await client.callTool({ name: 'svc.chat', arguments: { model: 'nope', prompt: 'x' } })
    expect(unknownModel.isError).toBe(true)
    expect((unknownModel.content as Array<{ text: string }>)[0]!.text).toContain('not in the catalog')
    const error = await client.callTool({ name: 'svc.nothing', arguments: {} }).catch(caught => caught)
    expect(error).toBeInstanceOf(McpError)
    expect(error.code).toBe(-32602)
    expect(error.message).toBe('MCP error -32602: unknown tool "svc.nothing"; tools/list names the tools')
    // params that do not fit tools/call's shape are the caller's error (-32602), not an internal one.
    const arrayArgs = await rawMcp({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'svc.chat', arguments: ['x'] } }, { authorization: `Bearer ${token}` })
    const reply = (await arrayArgs.json()) as { error: { code: number; message: string } }
    expect(reply.error.code).toBe(-32602)
    expect(reply.error.message).toContain('arguments')
    // None of these was billed.
    expect(await settled(org.orgId)).toBe(0n)
    await client.close()
  })

  test('refusals are JSON-RPC errors: -32002 without funds, -32003 when rate-limited', async () => {
    const broke = await t.createOrg('broke', 0n)
    const brokeToken = (await codeFlowTokens(t, broke.adminKey)).access_token
    const poor = await connect(brokeToken)
    const payment = await poor.callTool({ name: 'svc.chat', arguments: { model: 'demo-anonymous', prompt: 'x' } }).catch(caught => caught)
    expect(payment).toBeInstanceOf(McpError)
    expect(payment.code).toBe(-32002)
    expect(payment.data.code).toBe('insufficient_quota')
    // The SDK client prefixes the code once; before, the server had sent the message prefixed
    // already ("MCP error -32002: MCP error -32002: …").
    expect(payment.message).toStartWith('MCP error -32002: ')
    expect(payment.message.slice('MCP error -32002: '.length)).not.toContain('MCP error')
    await poor.close()

    const client = await connect()
    const call = () => client.callTool({ name: 'svc.chat', arguments: { model: 'demo-anonymous', prompt: 'x' } })
    // The key bucket holds 4; the free tool does not count.
    await client.callTool({ name: 'svc.list_models', arguments: {} })
    for (let index = 0; index < 4; index++) expect((await call()).isError).toBeFalsy()
    const limited = await call().catch(caught => caught)
    expect(limited).toBeInstanceOf(McpError)
    expect(limited.code).toBe(-32003)
    expect(limited.data.retry_after_s).toBeGreaterThan(0)
    await client.close()
  })
})

describe('transport rules', () => {
  test('GET and DELETE /mcp are 405 (no server stream, no sessions); a request without the SSE Accept is 406', async () => {
    // A bare 405 with Allow, as the document says (it used to promise a JSON-RPC body).
    const spec = await json(await t.request('GET', '/openapi.json'))
    for (const method of ['GET', 'DELETE']) {
      const refused = await fetch(`${base}/mcp`, { method, headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` } })
      expect([refused.status, refused.headers.get('allow'), await refused.text()]).toEqual([405, 'POST', ''])
      const documented = spec.paths['/mcp'][method.toLowerCase()].responses['405']
      expect(documented.content).toBeUndefined()
      expect(Object.keys(documented.headers)).toEqual(['Allow'])
    }
    const ping = { jsonrpc: '2.0', id: 1, method: 'ping' }
    expect((await rawMcp(ping, { authorization: `Bearer ${token}`, accept: 'application/json' })).status).toBe(406)
    const pong = await rawMcp(ping, { authorization: `Bearer ${token}` })
    expect(await json(pong)).toEqual({ jsonrpc: '2.0', id: 1, result: {} })
    const notification = await rawMcp({ jsonrpc: '2.0', method: 'notifications/initialized' }, { authorization: `Bearer ${token}` })
    expect(notification.status).toBe(202)
    const garbage = await fetch(`${base}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{nope' })
    expect(garbage.status).toBe(400)
    expect((await json(garbage)).error.code).toBe(-32700)
    // Bytes that are not UTF-8 are a parse error too, not a 413; an empty batch is an Invalid Request (JSON-RPC §6), not a 202.
    const latin1 = await fetch(`${base}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: new Uint8Array([0x7b, 0x22, 0xe9, 0x22, 0x3a, 0x31, 0x7d]) })
    expect([latin1.status, (await json(latin1)).error]).toEqual([400, { code: -32700, message: 'Parse error: request body is not valid UTF-8 (RFC 8259 §8.1)' }])
    const empty = await rawMcp([], { authorization: `Bearer ${token}` })
    expect([empty.status, (await json(empty)).error]).toEqual([400, { code: -32600, message: 'Invalid Request: an empty batch' }])
    // JSON that is no JSON-RPC message is an Invalid Request too (§5.1 keeps -32700 for what is not JSON).
    for (const [message, problem] of [
      [{ id: 3, method: 'ping' }, '"jsonrpc" must be "2.0"'],
      [{ jsonrpc: '1.0', id: 3, method: 'ping' }, '"jsonrpc" must be "2.0"'],
      [{ jsonrpc: '2.0', id: null, method: 'ping' }, '"id" must be a string or an integer'],
      [{ jsonrpc: '2.0', id: 1.5, method: 'ping' }, '"id" must be a string or an integer'],
      [{ jsonrpc: '2.0', id: 3, method: 7 }, '"method" must be a string'],
      [{ jsonrpc: '2.0', id: 3, method: 'ping', params: 5 }, '"params" must be an object'],
      [{ jsonrpc: '2.0', id: 3, method: 'ping', params: [] }, '"params" must be an object'],
      [{ jsonrpc: '2.0', id: 3, method: 'ping', params: { _meta: 5 } }, '"params._meta" must be an object'],
      [{ jsonrpc: '2.0', id: 3 }, 'a message needs a "method" (a request or notification), or an "id" with a "result" or "error" (a response)'],
      ['hello', 'a message must be a JSON object'],
      [null, 'a message must be a JSON object'],
      [[ping, 42], 'in the batch, a message must be a JSON object'],
      // What the SDK's strict schemas refuse (before: 400 -32700 "Parse error" for valid JSON).
      [{ jsonrpc: '2.0', id: 3, method: 'ping', foo: 1 }, 'a message has no member "foo"'],
      [{ jsonrpc: '2.0', id: 3, result: {}, method: undefined, extra: true }, 'a message has no member "extra"'],
      [{ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { _meta: { progressToken: null } } }, '"params._meta.progressToken" must be a string or an integer'],
      [{ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { _meta: { progressToken: 1.5 } } }, '"params._meta.progressToken" must be a string or an integer'],
      // Two requests of one batch with one id (before: both ran and were billed, one was answered).
      [[ping, { ...ping, method: 'tools/list' }], 'in the batch, two requests have the id 1; each request needs an id of its own'],
      // MCP forbids batching initialize (before: a batch of one was answered, without the session id).
      [[{ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }], 'in the batch, an initialize request; initialize must be sent alone'],
    ] as const) {
      const refused = await rawMcp(message, { authorization: `Bearer ${token}` })
      expect([refused.status, (await json(refused)).error]).toEqual([400, { code: -32600, message: `Invalid Request: ${problem}` }])
    }
    // 4 MiB cap, before parsing.
    const huge = await rawMcp({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'svc.chat', arguments: { model: 'demo-anonymous', prompt: 'x'.repeat(5 * 1024 * 1024) } } }, { authorization: `Bearer ${token}` })
    expect(huge.status).toBe(413)
    // An error response without an id is a message too (MCP's schema makes its id optional): accepted, 202 (before: -32600).
    expect((await rawMcp({ jsonrpc: '2.0', error: { code: -32600, message: 'x' } }, { authorization: `Bearer ${token}` })).status).toBe(202)
    // Stateless: a session id from elsewhere changes nothing.
    expect((await rawMcp(ping, { authorization: `Bearer ${token}`, 'mcp-session-id': 'stale-session' })).status).toBe(200)
  })

  test('a batch is answered with an array, even of one reply (JSON-RPC 2.0 §6); notifications alone are 202', async () => {
    const auth = { authorization: `Bearer ${token}` }
    const ping = (id: number) => ({ jsonrpc: '2.0', id, method: 'ping' })
    const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' }
    // Before: the lone reply came bare, {"result":{},...}.
    for (const batch of [[ping(1)], [ping(1), initialized]]) {
      const answered = await rawMcp(batch, auth)
      expect([answered.status, answered.headers.get('content-type')]).toEqual([200, 'application/json'])
      expect(await json(answered)).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }])
    }
    expect(await json(await rawMcp([ping(1), ping(2)], auth))).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }, { jsonrpc: '2.0', id: 2, result: {} }])
    const notified = await rawMcp([initialized], auth)
    expect([notified.status, await notified.text()]).toEqual([202, ''])
    // A single message stays a single answer.
    expect(await json(await rawMcp(ping(3), auth))).toEqual({ jsonrpc: '2.0', id: 3, result: {} })
    // As SSE (a progress token), each reply is its own event, in a batch of one as of two.
    const listed = await rawMcp([{ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'svc.list_models', arguments: {}, _meta: { progressToken: 'p' } } }], auth)
    expect(listed.headers.get('content-type')).toContain('text/event-stream')
    const events = (await listed.text()).split('\n').filter(line => line.startsWith('data: ')).map(line => JSON.parse(line.slice(6)))
    expect(events.map(event => [event.id, event.result.structuredContent.models.length])).toEqual([[7, 1]])
  })

  test('Origin is checked (DNS rebinding): foreign origins get 403, the issuer and configured origins pass', async () => {
    const ping = { jsonrpc: '2.0', id: 1, method: 'ping' }
    const auth = { authorization: `Bearer ${token}` }
    expect((await rawMcp(ping, { ...auth, origin: 'https://evil.example' })).status).toBe(403)
    // Checked before credentials: a rebinding page learns nothing about tokens.
    expect((await rawMcp(ping, { origin: 'https://evil.example' })).status).toBe(403)
    expect((await rawMcp(ping, { ...auth, origin: 'https://inspector.example' })).status).toBe(200)
    expect((await rawMcp(ping, { ...auth, origin: base })).status).toBe(200)
  })
})

describe('auth on /mcp and the prefix rules elsewhere', () => {
  const expectChallenge = async (response: Response) => {
    expect(response.status).toBe(401)
    const challenge = response.headers.get('www-authenticate')!
    expect(challenge).toStartWith('Bearer ')
    expect(challenge).toContain(`resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`)
    expect(challenge).toContain('scope="mcp:inference"')
    expect((await json(response)).error.code).toBe(-32001)
  }
  const ping = { jsonrpc: '2.0', id: 1, method: 'ping' }

  test('anything but a live svc_mcp_ token is 401 with the resource-metadata challenge', async () => {
    const cli = (await codeFlowTokens(t, org.adminKey, 'cli:inference')).access_token
    const none = await rawMcp(ping)
    // The refusal names what /mcp takes, not the API key it refuses.
    expect(((await none.clone().json()) as any).error.message).toBe('missing credential: send "Authorization: Bearer <MCP access token (svc_mcp_, from the OAuth flow)>" or "X-API-Key"')
    await expectChallenge(none)
    await expectChallenge(await rawMcp(ping, { authorization: `Bearer ${org.adminKey}` }))
    await expectChallenge(await rawMcp(ping, { 'x-api-key': org.adminKey }))
    await expectChallenge(await rawMcp(ping, { authorization: `Bearer ${cli}` }))
    await expectChallenge(await rawMcp(ping, { authorization: `Bearer svc_mcp_${'x'.repeat(43)}` }))
    await expectChallenge(await rawMcp(ping, { authorization: 'Basic abc' }))
    expect((await rawMcp(ping, { authorization: `Bearer ${token}` })).headers.get('www-authenticate')).toBeNull()
  })

  test('revoked and expired svc_mcp_ tokens are 401 with error="invalid_token"', async () => {
    const flow = await codeFlowTokens(t, org.adminKey)
    expect((await rawMcp(ping, { authorization: `Bearer ${flow.access_token}` })).status).toBe(200)
    await t.deps.oauth.tokens.revoke(flow.refresh_token, flow.clientId)
    const revoked = await rawMcp(ping, { authorization: `Bearer ${flow.access_token}` })
    expect(revoked.headers.get('www-authenticate')).toContain('error="invalid_token"')
    await expectChallenge(revoked)
    t.clock.advance(3600_000)
    await expectChallenge(await rawMcp(ping, { authorization: `Bearer ${token}` }))
  })

  test('a user removed from the organization loses the token', async () => {
    const member = await t.createMember(org, 'member')
    const memberToken = (await codeFlowTokens(t, member.key)).access_token
    expect((await rawMcp(ping, { authorization: `Bearer ${memberToken}` })).status).toBe(200)
    await t.deps.database.client.execute({ sql: 'delete from memberships where user_id = ?', args: [member.userId] })
    t.clock.advance(5_000)
    expect((await rawMcp(ping, { authorization: `Bearer ${memberToken}` })).status).toBe(401)
  })

  test('svc_mcp_ is refused on every other route', async () => {
    for (const [method, path] of [['POST', '/v1/chat/completions'], ['GET', '/api/v1/api-keys'], ['GET', '/api/v1/billing/balance'], ['GET', '/api/v1/rate-limits']]) {
      const response = await t.request(method!, path!, { key: token, body: method === 'POST' ? { model: 'demo-anonymous', messages: [{ role: 'user', content: 'x' }] } : undefined })
      expect(response.status).toBe(401)
    }
  })

  test('svc_cli_: inference yes; keys and balance when signed in with an admin key while its user is owner or admin; rate-limit inspection no', async () => {
    const cli = (await codeFlowTokens(t, org.adminKey, 'cli:inference')).access_token
    const chat = await t.request('POST', '/v1/chat/completions', { key: cli, body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'x' }] } })
    expect(chat.status).toBe(200)
    expect((await t.request('GET', '/api/v1/api-keys', { key: cli })).status).toBe(200)
    expect((await t.request('GET', '/api/v1/billing/balance', { key: cli })).status).toBe(200)
    const created = await t.request('POST', '/api/v1/api-keys', { key: cli, body: { name: 'from the cli' } })
    expect(created.status).toBe(201)
    expect((await t.request('GET', '/api/v1/rate-limits', { key: cli })).status).toBe(401)
    expect((await t.request('GET', '/api/v1/api-keys', { key: cli, headers: { 'x-org-id': 'another-org' } })).status).toBe(403)

    // A token can never do more than the key it was signed in with: an admin's ordinary key gives
    // a token without admin authority (test/oauth/key-bound.test.ts has the rest of that rule).
    const plain = await t.createMember(org, 'admin', { admin: false })
    const plainCli = (await codeFlowTokens(t, plain.key, 'cli:inference')).access_token
    expect((await t.request('GET', '/api/v1/api-keys', { key: plainCli })).status).toBe(403)
    expect((await t.request('POST', '/api/v1/api-keys', { key: plainCli, body: { name: 'escalated' } })).status).toBe(403)

    const member = await t.createMember(org, 'admin', { admin: true })
    const memberCli = (await codeFlowTokens(t, member.key, 'cli:inference')).access_token
    expect((await t.request('GET', '/api/v1/api-keys', { key: memberCli })).status).toBe(200)
    // Demotion takes effect at once, though the token itself stays valid for inference.
    await t.deps.orgs.setRole({ orgId: org.orgId, userId: member.userId, role: 'member' })
    expect((await t.request('GET', '/api/v1/api-keys', { key: memberCli })).status).toBe(403)
    expect((await t.request('GET', '/api/v1/billing/balance', { key: memberCli })).status).toBe(403)
    const stillChats = await t.request('POST', '/v1/chat/completions', { key: memberCli, body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'x' }] } })
    expect(stillChats.status).toBe(200)
  })
})
