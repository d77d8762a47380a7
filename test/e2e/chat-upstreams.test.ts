import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import type { TurnScript } from '../providers/conformance'
import { FakeUpstream } from '../support/fake-upstream'
import { paygConfig, startServedGateway, upstreamProvider } from '../support/gateway'
import { type TestApp } from '../support/harness'
import { poll } from '../support/poll'
import { fallbackCharge, priceOf, TARGETS } from './chat-targets'
import { CREDIT, PRICE_YAML } from './upstream-fixtures'

// The gateway in front of real (fake) upstream servers, for each HTTP provider type: the
// official SDK as the client, a config that binds a model to two backends, and the ledger
// checked to the nano against the catalog price of the usage the client was shown.

const PRIMARY_KEY = 'sk-primary-upstream-0123456789'
const SECONDARY_KEY = 'sk-secondary-upstream-abcdef'
const END_USER = 'end-user-5c1d7e'
/** Multi-byte UTF-8 (2, 3 and 4 bytes), JSON escapes and a newline: to be split at awkward byte boundaries. */
const AWKWARD_TEXT = 'Grüße, 世界! 🌍🚀 naïve "café"\\ ✓\nline two — done.'

for (const target of TARGETS) {
  describe(`${target.type} backends behind the gateway`, () => {
    let t: TestApp
    let primary: FakeUpstream
    let secondary: FakeUpstream
    let client: OpenAI
    let baseUrl: string
    let orgId: string
    let key: string
    let gates: Array<() => void>

    const charged = async () => CREDIT - (await t.deps.balance(orgId)).prepaidNanos
    const slotsInUse = () => t.deps.limits.concurrency.inUse(orgId)
    /** A promise for a FakeUpstream SSE script that holds the rest of the stream back until the test opens it. */
    const gate = () => {
      let open!: () => void
      const promise = new Promise<void>(resolve => (open = resolve))
      gates.push(open)
      return { promise, open }
    }

    beforeEach(async () => {
      primary = await FakeUpstream.start()
      secondary = await FakeUpstream.start()
      // A port nothing listens on: connections are refused.
      const gone = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
      const refusedUrl = `http://127.0.0.1:${gone.port}/v1`
      await gone.stop(true)
      gates = []

      const provider = (id: string, url: string, keyEnv: string) => upstreamProvider(id, target.type, url, keyEnv)
      const model = (id: string, backends: string, extra = '') =>
        `  - { id: ${id}${extra}, backends: ${backends}, price: ${PRICE_YAML}, context_length: 16384, max_output_tokens: 2048, capabilities: { tools: true, reasoning: true } }`
      const yaml = paygConfig(
        [provider('primary', `${primary.url}/v1`, 'PRIMARY_KEY'), provider('secondary', `${secondary.url}/v1`, 'SECONDARY_KEY'), provider('nowhere', refusedUrl, 'PRIMARY_KEY')],
        [
          model('duo', '[{ provider: primary, model: model-a }, { provider: secondary, model: model-b }]', ', level: private'),
          model('solo', '[{ provider: primary, model: model-a }]'),
          model('refused-first', '[{ provider: nowhere, model: model-x }, { provider: secondary, model: model-b }]'),
        ],
      )
      // The only plan is pay-as-you-go (no allowance): every charge reaches the prepaid balance.
      ;({ t, baseUrl, orgId, key, openai: client } = await startServedGateway(yaml, { PRIMARY_KEY, SECONDARY_KEY }, { credit: CREDIT }))
    })

    afterEach(async () => {
      for (const open of gates) open()
      await Promise.all([primary.close(), secondary.close()])
      await t.close()
    })

    const turn: TurnScript = {
      reasoning: { text: 'The user greets me; answer briefly.', signature: 'sig-e2e' },
      text: 'Hello! Nice to meet you.',
      finish: 'stop',
      usage: { inputTokens: 1234, outputTokens: 567, cachedInputTokens: 1000, reasoningTokens: 89 },
    }
    /** The usage the client must be shown for `turn`, on this wire. */
    const shownUsage = {
      prompt_tokens: 1234,
      completion_tokens: 567,
      total_tokens: 1801,
      prompt_tokens_details: { cached_tokens: 1000 },
      completion_tokens_details: { reasoning_tokens: target.wire.reportsReasoningTokens ? 89 : 0 },
    }

    test('plain and streamed: the upstream usage reaches the client and is charged to the nano', async () => {
      primary.enqueue({ kind: 'json', body: target.wire.json(turn) }, { kind: 'sse', body: target.wire.stream(turn), chunkBytes: 64 })

      const completion = await client.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'Hi there' }], reasoning_effort: 'medium' })
      const message = completion.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string }
      expect(message.content).toBe(turn.text!)
      expect(message.reasoning_content).toBe(turn.reasoning!.text)
      expect(completion.model).toBe('duo')
      expect(completion.usage).toEqual(shownUsage)
      const plainCharge = priceOf(completion.usage)
      expect(await charged()).toBe(plainCharge)

      const stream = await client.chat.completions.create({
        model: 'duo',
        messages: [{ role: 'user', content: 'Hi there' }],
        stream: true,
        stream_options: { include_usage: true },
      })
      let text = ''
      let usage: OpenAI.CompletionUsage | undefined
      let usageChunks = 0
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? ''
        if (chunk.usage) {
          usage = chunk.usage
          usageChunks += 1
          expect(chunk.choices).toEqual([])
        }
      }
      expect(text).toBe(turn.text!)
      expect(usageChunks).toBe(1)
      expect(usage).toEqual(shownUsage)
      expect(await charged()).toBe(plainCharge + priceOf(usage))
      expect(slotsInUse()).toBe(0)
      // The non-streamed client's answer was asked for as one JSON answer, the stream as a stream.
      expect(primary.requests.map(request => [request.path, request.body.model])).toEqual([
        [target.path, 'model-a'],
        [target.path, 'model-a'],
      ])
      target.expectJsonAnswer(primary.requests[0]!)
      target.expectStreamWithUsage(primary.requests[1]!)
      expect(secondary.requests).toHaveLength(0)
    })

    test("the upstream sees the configured provider key and nothing of the client's identity", async () => {
      primary.enqueue({ kind: 'sse', body: target.wire.stream({ text: 'ok', finish: 'stop', usage: { inputTokens: 3, outputTokens: 1 } }) })
      const identified = new OpenAI({
        apiKey: key,
        baseURL: `${baseUrl}/v1`,
        maxRetries: 0,
        defaultHeaders: { 'X-API-Key': key, 'X-Org-ID': orgId, 'X-Forwarded-For': '203.0.113.9', 'X-Real-IP': '203.0.113.9' },
      })
      const completion = await identified.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'who am I?' }], user: END_USER })
      expect(completion.choices[0]!.message.content).toBe('ok')

      const received = primary.onlyRequest()
      target.expectProviderKey(received, PRIMARY_KEY)
      target.expectNoEndUser(received)
      for (const [name, value] of Object.entries(received.headers)) {
        const line = `${name}: ${value}`
        for (const secret of [key, orgId, END_USER, '203.0.113.9', SECONDARY_KEY]) expect(line).not.toContain(secret)
        expect(name).not.toMatch(/^(x-org-id|x-forwarded-.*|forwarded|x-real-ip|x-stainless-.*|cookie|openai-organization|openai-project)$/)
      }
      expect(received.headers['user-agent'] ?? '').not.toMatch(/openai/i)
      for (const secret of [key, orgId, END_USER]) expect(received.text).not.toContain(secret)
    })

    test('streamed text split at awkward byte boundaries (inside multi-byte characters) arrives intact', async () => {
      for (const chunkBytes of [1, 3, 7]) {
        const usage = { inputTokens: 11, outputTokens: 17 }
        primary.enqueue({ kind: 'sse', body: target.wire.stream({ text: AWKWARD_TEXT, finish: 'stop', usage }), chunkBytes })
        const before = await charged()
        const stream = await client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: 'say it' }], stream: true, stream_options: { include_usage: true } })
        let text = ''
        let shown: OpenAI.CompletionUsage | undefined
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? ''
          if (chunk.usage) shown = chunk.usage
        }
        expect(text).toBe(AWKWARD_TEXT)
        expect(shown).toMatchObject({ prompt_tokens: 11, completion_tokens: 17 })
        expect((await charged()) - before).toBe(priceOf(shown))
      }
    })

    test('a tool call streams through and round-trips; each turn is charged exactly', async () => {
      const call = { callId: 'call_e2e_1', name: 'get_weather', arguments: '{"city":"Zürich","unit":"celsius"}' }
      primary.enqueue(
        { kind: 'sse', body: target.wire.stream({ toolCalls: [call], finish: 'tool-calls', usage: { inputTokens: 80, outputTokens: 25 } }), chunkBytes: 5 },
        { kind: 'sse', body: target.wire.stream({ text: 'It is 18 degrees in Zürich.', finish: 'stop', usage: { inputTokens: 120, outputTokens: 9 } }) },
      )
      const tools: OpenAI.ChatCompletionTool[] = [
        { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] } } },
      ]
      const question: OpenAI.ChatCompletionMessageParam = { role: 'user', content: 'Weather in Zürich?' }
      const first = await client.chat.completions.stream({ model: 'solo', messages: [question], tools, stream_options: { include_usage: true } }).finalChatCompletion()
      const message = first.choices[0]!.message
      expect(first.choices[0]!.finish_reason).toBe('tool_calls')
      const toolCall = message.tool_calls![0]!
      expect(toolCall.type === 'function' && [toolCall.id, toolCall.function.name, JSON.parse(toolCall.function.arguments)]).toEqual([call.callId, call.name, { city: 'Zürich', unit: 'celsius' }])

      // The SDK's stream helper adds an output-only `parsed` field to its message: send back the API fields.
      const assistant: OpenAI.ChatCompletionAssistantMessageParam = { role: 'assistant', content: message.content || null, tool_calls: message.tool_calls }
      const second = await client.chat.completions.create({
        model: 'solo',
        messages: [question, assistant, { role: 'tool', tool_call_id: call.callId, content: '18 °C' }],
        tools,
      })
      expect(second.choices[0]!.message.content).toBe('It is 18 degrees in Zürich.')
      // The upstream received the call and its result back in its own shape.
      const replayed = primary.requests[1]!.text
      expect(replayed).toContain(call.callId)
      expect(replayed).toContain('18 °C')
      expect(await charged()).toBe(priceOf(first.usage) + priceOf(second.usage))
    })

    test('500 before the first byte → the second backend serves it; the first cools down until the clock passes 30 s', async () => {
      primary.enqueue({ kind: 'json', status: 500, body: target.wire.errorBody(500, 'internal failure') })
      secondary.enqueue(
        { kind: 'sse', body: target.wire.stream({ text: 'from the second backend', finish: 'stop', usage: { inputTokens: 7, outputTokens: 4 } }) },
        { kind: 'sse', body: target.wire.stream({ text: 'second again', finish: 'stop', usage: { inputTokens: 7, outputTokens: 2 } }) },
      )
      const ask = () => client.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'anyone there?' }] })
      const served = await ask()
      expect(served.choices[0]!.message.content).toBe('from the second backend')
      expect(primary.requests).toHaveLength(1)
      expect(secondary.onlyRequest().body.model).toBe('model-b')
      target.expectProviderKey(secondary.onlyRequest(), SECONDARY_KEY)
      expect(t.deps.router.isCoolingDown({ provider: 'primary', model: 'model-a' })).toBe(true)
      let total = priceOf(served.usage)
      expect(await charged()).toBe(total) // the failed attempt costs nothing

      // While it cools down the first backend is passed over.
      const again = await ask()
      expect(again.choices[0]!.message.content).toBe('second again')
      expect(primary.requests).toHaveLength(1)
      total += priceOf(again.usage)

      // Once the cool-down is over it is first again.
      t.clock.advance(30_001)
      expect(t.deps.router.isCoolingDown({ provider: 'primary', model: 'model-a' })).toBe(false)
      primary.enqueue({ kind: 'sse', body: target.wire.stream({ text: 'first is back', finish: 'stop', usage: { inputTokens: 7, outputTokens: 3 } }) })
      const back = await ask()
      expect(back.choices[0]!.message.content).toBe('first is back')
      expect(secondary.requests).toHaveLength(2)
      total += priceOf(back.usage)
      expect(await charged()).toBe(total)
    })

    test('every backend failing before the first byte → 502 provider_error (JSON, even for a stream), nothing charged', async () => {
      primary.enqueue({ kind: 'json', status: 503, body: target.wire.errorBody(503, 'overloaded') })
      secondary.enqueue({ kind: 'text', status: 502, body: '<html>bad gateway</html>' })
      const error = await client.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'x' }], stream: true }).catch(error => error)
      expect(error).toBeInstanceOf(OpenAI.InternalServerError)
      expect(error.status).toBe(502)
      expect(error.code).toBe('provider_error')
      expect(error.headers.get('content-type')).toContain('application/json')
      expect(error.message).not.toContain(SECONDARY_KEY)
      expect([primary.requests.length, secondary.requests.length]).toEqual([1, 1])
      expect(await charged()).toBe(0n)
      expect(slotsInUse()).toBe(0)
    })

    test('a refused connection → the second backend serves the stream', async () => {
      secondary.enqueue({ kind: 'sse', body: target.wire.stream({ text: 'served anyway', finish: 'stop', usage: { inputTokens: 6, outputTokens: 2 } }) })
      const stream = await client.chat.completions.create({ model: 'refused-first', messages: [{ role: 'user', content: 'hello?' }], stream: true, stream_options: { include_usage: true } })
      let text = ''
      let usage: OpenAI.CompletionUsage | undefined
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? ''
        if (chunk.usage) usage = chunk.usage
      }
      expect(text).toBe('served anyway')
      expect(t.deps.router.isCoolingDown({ provider: 'nowhere', model: 'model-x' })).toBe(true)
      expect(await charged()).toBe(priceOf(usage))
    })

    test('a 400 from the first backend is not retried on the second: the client gets 400 and nothing is charged', async () => {
      primary.enqueue({ kind: 'json', status: 400, body: target.wire.errorBody(400, 'messages: something is off') })
      const error = await client.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'x' }] }).catch(error => error)
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      expect(error.status).toBe(400)
      expect(error.code).toBe('invalid_request')
      expect(error.message).not.toContain(PRIMARY_KEY)
      expect(primary.requests).toHaveLength(1)
      expect(secondary.requests).toHaveLength(0)
      expect(t.deps.router.isCoolingDown({ provider: 'primary', model: 'model-a' })).toBe(false)
      expect(await charged()).toBe(0n)
      expect(slotsInUse()).toBe(0)
    })

    test('a JSON schema format: response_format to an OpenAI-compatible backend, Anthropic\'s output_config.format to an Anthropic one; json_object has no Anthropic equivalent', async () => {
      const format = { type: 'json_schema' as const, json_schema: { name: 'greeting', schema: { type: 'object', properties: { hi: { type: 'string' } } } } }
      primary.enqueue({ kind: 'sse', body: target.wire.stream({ text: '{"hi":"salut"}', finish: 'stop', usage: { inputTokens: 5, outputTokens: 5 } }) })
      const completion = await client.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'x' }], response_format: format })
      expect(completion.choices[0]!.message.content).toBe('{"hi":"salut"}')
      if (target.type === 'anthropic') {
        expect(primary.requests[0]!.body.output_config).toEqual({ format: { type: 'json_schema', schema: format.json_schema.schema } })
        const error = await client.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_object' } }).catch(error => error)
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error.message).toMatch(/json_object response formats \(response_format\) are not available/)
        expect(error.param).toBe('response_format')
        // The same refusal to a Responses client names its own field.
        const viaResponses = await client.responses.create({ model: 'duo', input: 'x', text: { format: { type: 'json_object' } } }).catch(error => error)
        expect([viaResponses.status, viaResponses.param]).toEqual([400, 'text.format'])
        // ...in its message too, once (before: "(text.format, text.format)", the message named both formats' fields).
        expect(viaResponses.message).toMatch(/json_object response formats \(text\.format\) are not available/)
        // A refusal of a field every format names alike names it (before, param null).
        const hot = await client.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'x' }], temperature: 1.5 }).catch(error => error)
        expect([hot.status, hot.param]).toEqual([400, 'temperature'])
        expect(primary.requests).toHaveLength(1)
        expect(secondary.requests).toHaveLength(0)
      } else {
        expect(primary.requests[0]!.body.response_format).toEqual(format)
      }
      expect(slotsInUse()).toBe(0)
    })

    test('upstream 429 with Retry-After → client 429 with that Retry-After, nothing charged', async () => {
      primary.enqueue({ kind: 'json', status: 429, body: target.wire.errorBody(429, 'slow down'), headers: { 'retry-after': '7' } })
      const error = await client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: 'x' }], stream: true }).catch(error => error)
      expect(error).toBeInstanceOf(OpenAI.RateLimitError)
      expect(error.status).toBe(429)
      expect(error.code).toBe('rate_limited')
      expect(error.headers.get('retry-after')).toBe('7')
      expect(error.headers.get('x-request-id')).toMatch(/.+/)
      expect(await charged()).toBe(0n)
      expect(slotsInUse()).toBe(0)
    })

    test('cut mid-stream (upstream reset): an in-band error after the text, charged the counted fallback', async () => {
      const prompt = 'Tell me a long story, s’il vous plaît'
      const partial = 'Once upon a time — in Zürich — there was'
      const sent = gate()
      primary.enqueue({ kind: 'sse', body: [target.wire.partial(partial), sent.promise], then: 'reset' })
      const stream = await client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: prompt }], stream: true, stream_options: { include_usage: true } })
      let text = ''
      const failure = await (async () => {
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? ''
          // Reset the upstream only once the client has everything it sent.
          if (text === partial) sent.open()
        }
      })().catch(error => error)
      expect(text).toBe(partial)
      expect(failure).toBeInstanceOf(OpenAI.APIError)
      expect(failure.error).toMatchObject({ code: 'provider_error' })
      const charge = await charged()
      expect(charge).toBeGreaterThan(0n)
      expect(charge).toBe(fallbackCharge(prompt, partial, target.announcedInput))
      expect(slotsInUse()).toBe(0)
    })

    test('abandoned mid-stream: the upstream sees the disconnect, the slot is freed, the counted fallback is charged', async () => {
      const prompt = 'Stream until I leave'
      const partial = 'Streaming words until the client goes away'
      const never = gate()
      primary.enqueue({ kind: 'sse', body: [target.wire.partial(partial), never.promise] })
      const stream = await client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: prompt }], stream: true })
      let text = ''
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? ''
        if (text === partial) break // leaving the loop aborts the SDK's request
      }
      const received = await primary.request(0)
      await received.disconnected
      expect(received.isDisconnected()).toBe(true)
      await poll('the slot to be freed', 500, 5, () => (slotsInUse() === 0 ? true : undefined))
      const expected = fallbackCharge(prompt, partial, target.announcedInput)
      await poll('the settlement', 500, 5, async () => ((await charged()) === expected ? true : undefined))
      expect(await charged()).toBe(expected)
    })

    test('abandoned while a non-streamed answer is collected: the upstream sees the disconnect and the slot is freed', async () => {
      const prompt = 'Answer in one piece'
      const partial = 'Collected words that nobody will read'
      const never = gate()
      primary.enqueue({ kind: 'sse', body: [target.wire.partial(partial), never.promise] })
      const abort = new AbortController()
      const pending = client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: prompt }] }, { signal: abort.signal }).catch(error => error)
      const received = await primary.request(0)
      abort.abort()
      expect(await pending).toBeInstanceOf(OpenAI.APIUserAbortError)
      await received.disconnected
      await poll('the slot to be freed', 500, 5, () => (slotsInUse() === 0 ? true : undefined))
      // Whether the gateway had read the partial output when the client left is a race this test
      // does not control: either nothing, or exactly the counted fallback, is charged.
      expect([0n, fallbackCharge(prompt, ''), fallbackCharge(prompt, partial)]).toContain(await charged())
    })
  })
}
