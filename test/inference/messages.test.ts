import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema'
import { anthropicClient } from '../support/gateway'
import { buildTestApp, createPlanOrg, json, type TestApp } from '../support/harness'

// POST /v1/messages and /v1/messages/count_tokens on the embedded demo backend: the official
// SDK as the client, exact charges, and the route's refusals in Anthropic's envelope.

// Demo prices: 0.10 / 0.40 USD per Mtok = 100 / 400 nanos per token.
const charge = (usage: { input_tokens: number; output_tokens: number }) => BigInt(usage.input_tokens) * 100n + BigInt(usage.output_tokens) * 400n

let t: TestApp
let org: { orgId: string; adminKey: string }
let baseUrl: string
let client: Anthropic
let spent = 0n

const charged = async () => 10_000_000_000n - (await t.deps.balance(org.orgId)).prepaidNanos
const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  t.app.handle(new Request(`http://localhost${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': org.adminKey, ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) }))

/** A pay-as-you-go organization (no monthly allowance), so every charge reaches the prepaid balance. */
async function paygOrg(credit: bigint) {
  const { orgId, key } = await createPlanOrg(t, { name: 'payg', keyName: 'messages', credit })
  return { orgId, adminKey: key }
}

beforeAll(async () => {
  t = await buildTestApp()
  org = await paygOrg(10_000_000_000n)
  baseUrl = t.listen()
  client = anthropicClient(baseUrl, org.adminKey)
})

afterAll(async () => {
  await t.close()
})

describe('the demo backend through the Anthropic SDK', () => {
  test('create: the deterministic answer, usage and exact charge', async () => {
    const message = await client.messages.create({ model: 'demo-anonymous', max_tokens: 256, messages: [{ role: 'user', content: 'hello there' }] })
    expect(message).toMatchObject({ type: 'message', role: 'assistant', model: 'demo-anonymous', stop_reason: 'end_turn', stop_sequence: null })
    expect(message.content).toEqual([{ type: 'text', text: 'Hello from the demo model. You said: hello there' }] as never)
    expect(message.usage).toMatchObject({ input_tokens: 3, output_tokens: 9 })
    expect(message._request_id).toMatch(/^req_/)
    spent += charge(message.usage)
    expect(await charged()).toBe(spent)
  })

  test('stream: thinking with its signature, then text; message_start announces the input, message_delta the output', async () => {
    const stream = client.messages.stream({ model: 'demo-private', max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'hello there' }] })
    let startUsage: Anthropic.Usage | undefined
    let pings = 0
    stream.on('streamEvent', event => {
      if (event.type === 'message_start') startUsage = event.message.usage
    })
    for await (const event of stream) if ((event as { type: string }).type === 'ping') pings += 1
    const final = await stream.finalMessage()
    expect(startUsage?.input_tokens).toBeGreaterThan(0)
    expect(final.content.map(block => block.type)).toEqual(['thinking', 'text'])
    const thinking = final.content[0] as Anthropic.ThinkingBlock
    expect(thinking.thinking).toBe('The user wrote 2 words. I will repeat the message back.')
    expect(thinking.signature).toMatch(/^demo\./)
    expect(final.stop_reason).toBe('end_turn')
    expect(final.usage.output_tokens).toBe(20)
    expect(pings).toBe(0) // the SDK swallows pings; they are on the wire (see the raw test below)
    spent += charge(final.usage)
    expect(await charged()).toBe(spent)
  })

  test('raw SSE: event names repeat the data type, a ping follows message_start, message_stop ends it', async () => {
    const response = await post('/v1/messages', { model: 'demo-anonymous', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hi' }] })
    expect(response.headers.get('content-type')).toContain('text/event-stream')
    const text = await response.text()
    const events = [...text.matchAll(/^event: (\S+)\ndata: (.*)$/gm)].map(match => [match[1], JSON.parse(match[2]!).type])
    for (const [name, type] of events) expect(name).toBe(type)
    expect(events.map(event => event[0]).filter((name, index, all) => name !== all[index - 1])).toEqual([
      'message_start', 'ping', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop',
    ])
    spent = await charged()
  })

  test('tool use round trip: tool_choice forces the call, the result comes back as tool_result', async () => {
    const tools: Anthropic.Tool[] = [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }]
    const question: Anthropic.MessageParam = { role: 'user', content: 'Weather?' }
    const first = await client.messages.create({ model: 'demo-anonymous', max_tokens: 256, tools, tool_choice: { type: 'tool', name: 'get_weather' }, messages: [question] })
    expect(first.stop_reason).toBe('tool_use')
    const call = first.content.find(block => block.type === 'tool_use') as Anthropic.ToolUseBlock
    expect(call).toMatchObject({ name: 'get_weather', input: { city: expect.any(String) } })
    const second = await client.messages.create({
      model: 'demo-anonymous',
      max_tokens: 256,
      tools,
      messages: [question, { role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: [{ type: 'text', text: '18 °C' }] }] }],
    })
    expect(second.stop_reason).toBe('end_turn')
    expect((second.content[0] as Anthropic.TextBlock).text).toContain('18 °C')
    spent += charge(first.usage) + charge(second.usage)
    expect(await charged()).toBe(spent)
  })

  test('a transcript replayed as Anthropic returns it: tool_use with its caller (direct) is the plain call', async () => {
    // Before: 400 unexpected property caller, though the SDK's ToolUseBlock always has one.
    const tools: Anthropic.Tool[] = [{ name: 'get_weather', input_schema: { type: 'object' } }]
    const call: Anthropic.ToolUseBlock = { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' }, caller: { type: 'direct' } }
    const message = await client.messages.create({
      model: 'demo-anonymous',
      max_tokens: 256,
      tools,
      messages: [{ role: 'user', content: 'Weather?' }, { role: 'assistant', content: [call] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '18 °C' }] }],
    })
    expect((message.content[0] as Anthropic.TextBlock).text).toContain('18 °C')
    spent += charge(message.usage)
    expect(await charged()).toBe(spent)
  })

  test('stop_sequences cut the answer; countTokens is the documented estimate and free', async () => {
    const message = await client.messages.create({ model: 'demo-anonymous', max_tokens: 256, stop_sequences: ['demo'], messages: [{ role: 'user', content: 'hello' }] })
    expect((message.content[0] as Anthropic.TextBlock).text).toBe('Hello from the ')
    spent += charge(message.usage)
    const count = await client.messages.countTokens({ model: 'demo-anonymous', messages: [{ role: 'user', content: 'hello there' }] })
    expect(count.input_tokens).toBe(Math.ceil(11 / 4) + 4)
    // The SDK reads its request id from `request-id`, as on messages (QA: count_tokens had none).
    expect(count._request_id).toMatch(/^req_/)
    expect(await charged()).toBe(spent)
  })

  test('cache_control hints, top-level (automatic caching) and on blocks, are accepted on create and count_tokens (the demo backend ignores them)', async () => {
    const hinted = {
      model: 'demo-anonymous',
      cache_control: { type: 'ephemeral' as const, ttl: '1h' as const },
      system: [{ type: 'text' as const, text: 'Be brief.', cache_control: { type: 'ephemeral' as const } }],
      messages: [{ role: 'user' as const, content: 'hello there' }],
    }
    const message = await client.messages.create({ ...hinted, max_tokens: 256 })
    expect(message.content).toEqual([{ type: 'text', text: 'Hello from the demo model. You said: hello there' }] as never)
    spent += charge(message.usage)
    expect((await client.messages.countTokens(hinted)).input_tokens).toBeGreaterThan(0)
    expect(await charged()).toBe(spent)
  })

  test("the SDK's tool runner: its message thread is refused with the code it reads, and it carries on without one", async () => {
    const weather = betaTool({ name: 'get_weather', description: 'weather', inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, run: async input => `sunny in ${input.city}` })
    const params = { model: 'demo-anonymous', max_tokens: 200, tools: [weather], max_iterations: 4, messages: [{ role: 'user' as const, content: 'call get_weather' }] }
    // The runner threads by default (thread: {type: create}); on thread_unsupported_request it sends the turn again without one.
    for (const extra of [{}, { thread: false as const }]) {
      const final = await client.beta.messages.toolRunner({ ...params, ...extra }).runUntilDone()
      expect(final.content).toEqual([{ type: 'text', text: 'The get_weather tool returned: sunny in demo' }] as never)
    }
    // A thread of its own (the SDK's default is to fail on it) raises the SDK's error for that code.
    const thread = client.beta.messages.thread({ model: 'demo-anonymous', max_tokens: 50 })
    const refused = await thread.send({ role: 'user', content: 'hi' }).then(() => undefined, (error: unknown) => error)
    expect(refused).toBeInstanceOf(Anthropic.APIError)
    expect([(refused as InstanceType<typeof Anthropic.APIError>).status, (refused as { errorCode?: string }).errorCode]).toEqual([400, 'thread_unsupported_request'])
    spent = await charged()
  })
})

describe('refusals in the Anthropic envelope, nothing charged', () => {
  const valid = { model: 'demo-anonymous', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }

  const cases: Array<[string, unknown, Record<string, string>, number, string, RegExp]> = [
    ['max_tokens missing', { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] }, {}, 400, 'invalid_request_error', /max_tokens/],
    ['an unknown field', { ...valid, logprobs: true }, {}, 400, 'invalid_request_error', /logprobs/],
    ['a thinking budget not below max_tokens', { ...valid, max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 2000 } }, {}, 400, 'invalid_request_error', /budget_tokens/],
    ['tool_choice naming no tool', { ...valid, tools: [{ name: 'a', input_schema: { type: 'object' } }], tool_choice: { type: 'tool', name: 'b' } }, {}, 400, 'invalid_request_error', /"b"/],
    ['a hosted tool the gateway does not host', { ...valid, tools: [{ type: 'bash_20250124', name: 'bash' }] }, {}, 400, 'invalid_request_error', /bash_20250124/],
    ['hosted web search (not enabled yet)', { ...valid, tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 2 }] }, {}, 400, 'invalid_request_error', /web_search/],
    ['a truncated PDF document', { ...valid, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: Buffer.from('%PDF-1.7\n1 0 obj').toString('base64') } }] }] }, {}, 400, 'invalid_request_error', /attached file/],
    ['a document by URL', { ...valid, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'url', url: 'https://example.com/a.pdf' } }] }] }, {}, 400, 'invalid_request_error', /base64 PDF/],
    ['an image by file id', { ...valid, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'file_1' } }] }] }, {}, 400, 'invalid_request_error', /file ids/],
    ['an image in a tool_result', { ...valid, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] }] }] }, {}, 400, 'invalid_request_error', /tool_result/],
    ['an :encrypted model', { ...valid, model: 'demo-anonymous:encrypted' }, {}, 400, 'invalid_request_error', /chat\/completions/],
    ['the svc-encrypted header', valid, { 'svc-encrypted': '1' }, 400, 'invalid_request_error', /chat\/completions/],
    ['an unknown model', { ...valid, model: 'nope' }, {}, 400, 'invalid_request_error', /nope/],
    ['a tool call made by code execution', { ...valid, messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {}, caller: { type: 'code_execution_20250825', tool_id: 'srvtoolu_1' } }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'x' }] }] }, {}, 400, 'invalid_request_error', /^messages\.1\.content\.0\.caller: a tool call made by a "code_execution_20250825" caller is not supported; only direct calls$/],
    ['a message thread', { ...valid, thread: { type: 'create' } }, {}, 400, 'invalid_request_error', /threads are not supported/],
    // Anthropic's rule: every message has content but a final assistant one (before: an empty user
    // turn went upstream, and was billed if the upstream answered).
    ['an empty user message', { ...valid, messages: [{ role: 'user', content: [] }] }, {}, 400, 'invalid_request_error', /^messages\.0\.content must not be empty/],
    ['an empty user string', { ...valid, messages: [{ role: 'user', content: '' }] }, {}, 400, 'invalid_request_error', /^messages\.0\.content must not be empty/],
    ['an empty assistant message before the last', { ...valid, messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [] }, { role: 'user', content: 'and?' }] }, {}, 400, 'invalid_request_error', /^messages\.1\.content must not be empty/],
  ]
  for (const [name, body, headers, status, type, message] of cases) {
    test(name, async () => {
      const before = await charged()
      const response = await post('/v1/messages', body, headers)
      expect(response.status).toBe(status)
      const error = await json(response)
      expect(error).toMatchObject({ type: 'error', error: { type } })
      expect(error.error.message).toMatch(message)
      expect(await charged()).toBe(before)
    })
  }

  test('an empty final assistant message (a prefill) is the one empty message taken', async () => {
    const before = await charged()
    const response = await post('/v1/messages', { ...valid, messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [] }] })
    expect(response.status).toBe(200)
    const message = (await json(response)) as { usage: { input_tokens: number; output_tokens: number } }
    spent = before + charge(message.usage)
    expect(await charged()).toBe(spent)
  })

  test('count_tokens refuses Encrypted too', async () => {
    const response = await post('/v1/messages/count_tokens', { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] }, { 'svc-encrypted': '1' })
    expect(response.status).toBe(400)
    expect((await json(response)).error.type).toBe('invalid_request_error')
  })

  // Anthropic's envelope has no `param`, so a schema message that does not name its field
  // ("Expected array length to be greater or equal to 1") left the SDK user guessing which one.
  test.each([
    ['count_tokens with no messages', () => client.messages.countTokens({ model: 'demo-anonymous', messages: [] }), 'messages'],
    ['create with no messages', () => client.messages.create({ model: 'demo-anonymous', max_tokens: 5, messages: [] }), 'messages'],
    ['count_tokens with an empty model', () => client.messages.countTokens({ model: '', messages: [{ role: 'user', content: 'hi' }] }), 'model'],
    ['count_tokens with an empty user message', () => client.messages.countTokens({ model: 'demo-anonymous', messages: [{ role: 'user', content: [] }] }), 'messages.0.content'],
  ])('%s: the 400 message names the field', async (_name, call, field) => {
    const error = await call().catch(caught => caught)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    expect(error.error.error.message).toContain(field)
  })

  test('anthropic-version (any value) and anthropic-beta are accepted; Authorization: Bearer works as well as x-api-key', async () => {
    const response = await t.app.handle(
      new Request('http://localhost/v1/messages', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${org.adminKey}`, 'anthropic-version': '1999-12-31', 'anthropic-beta': 'some-beta-2099-01-01' },
        body: JSON.stringify(valid),
      }),
    )
    expect(response.status).toBe(200)
  })

  test('no credential: 401 authentication_error', async () => {
    const response = await t.app.handle(new Request('http://localhost/v1/messages', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(valid) }))
    expect(response.status).toBe(401)
    expect((await json(response)).error.type).toBe('authentication_error')
  })

  test('bodies over 4 MiB: 413 request_too_large before the body is read', async () => {
    const big = JSON.stringify({ ...valid, messages: [{ role: 'user', content: 'x'.repeat(4 * 1024 * 1024) }] })
    const response = await post('/v1/messages', big)
    expect(response.status).toBe(413)
    expect((await json(response)).error.type).toBe('request_too_large')
  })

  test('an unfunded organization: 429 billing_error that the SDK is told not to retry', async () => {
    const poor = await paygOrg(0n)
    const sdk = new Anthropic({ apiKey: poor.adminKey, baseURL: baseUrl, maxRetries: 2 })
    const failure = await sdk.messages.create(valid as Anthropic.MessageCreateParamsNonStreaming).catch(error => error)
    expect(failure).toBeInstanceOf(Anthropic.RateLimitError)
    expect(failure.error.error.type).toBe('billing_error')
    expect(failure.requestID).toMatch(/^req_/)
    expect(failure.headers.get('x-should-retry')).toBe('false')
  })
})
