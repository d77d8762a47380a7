import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import type { WireScript } from '../providers/conformance'
import { anthropicWire } from '../providers/anthropic-wire'
import { openAIWire } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { openAIClient, paygConfig, startServedGateway, upstreamProvider } from '../support/gateway'
import { buildTestApp, type TestApp } from '../support/harness'
import { CREDIT, ceilDiv, MTOK, PRICE, PRICE_YAML } from './upstream-fixtures'

// POST /v1/responses end to end: the official openai SDK over a real socket, the gateway with
// its real config, catalog, router and providers, and real HTTP upstreams of each kind (plus
// the embedded demo backend). Charges are checked to the nano against the usage the client saw.

const KEY = 'sk-upstream-0123456789'

/** The catalog price of a Responses usage: input, cached input, output and reasoning summed, rounded up once. */
function priceOf(usage: OpenAI.Responses.ResponseUsage | undefined): bigint {
  if (!usage) throw new Error('no usage in the response')
  const cached = BigInt(usage.input_tokens_details.cached_tokens)
  const reasoning = BigInt(usage.output_tokens_details.reasoning_tokens)
  const output = BigInt(usage.output_tokens) - reasoning
  return ceilDiv((BigInt(usage.input_tokens) - cached) * PRICE.input + cached * PRICE.cached + output * PRICE.output + reasoning * PRICE.reasoning, MTOK)
}

const TARGETS: Array<{ type: 'openai-compatible' | 'anthropic'; wire: WireScript }> = [
  { type: 'openai-compatible', wire: openAIWire },
  { type: 'anthropic', wire: anthropicWire },
]

for (const { type, wire } of TARGETS) {
  describe(`Responses clients in front of ${type} backends`, () => {
    let t: TestApp
    let upstream: FakeUpstream
    let secondary: FakeUpstream
    let client: OpenAI
    let orgId: string
    const charged = async () => CREDIT - (await t.deps.balance(orgId)).prepaidNanos

    beforeEach(async () => {
      upstream = await FakeUpstream.start()
      secondary = await FakeUpstream.start()
      const model = (id: string, backends: string) =>
        `  - { id: ${id}, backends: ${backends}, price: ${PRICE_YAML}, context_length: 16384, max_output_tokens: 2048, capabilities: { tools: true, reasoning: true } }`
      const yaml = paygConfig(
        [upstreamProvider('up', type, `${upstream.url}/v1`, 'UP_KEY'), upstreamProvider('second', type, `${secondary.url}/v1`, 'UP_KEY')],
        [model('solo', '[{ provider: up, model: model-a }]'), model('duo', '[{ provider: up, model: model-a }, { provider: second, model: model-b }]')],
      )
      ;({ t, orgId, openai: client } = await startServedGateway(yaml, { UP_KEY: KEY }, { credit: CREDIT }))
    })

    afterEach(async () => {
      await Promise.all([upstream.close(), secondary.close()])
      await t.close()
    })

    const turn = {
      reasoning: { text: 'The user greets me; answer briefly.', signature: 'sig-e2e' },
      text: 'Hello! Nice to meet you.',
      finish: 'stop' as const,
      usage: { inputTokens: 1234, outputTokens: 567, cachedInputTokens: 1000, reasoningTokens: 89 },
    }

    test('plain and streamed: the upstream usage reaches the client in Responses fields and is charged to the nano, as Chat Completions is', async () => {
      upstream.enqueue({ kind: 'sse', body: wire.stream(turn) }, { kind: 'sse', body: wire.stream(turn), chunkBytes: 64 }, { kind: 'sse', body: wire.stream(turn) })
      const shown = {
        input_tokens: 1234,
        input_tokens_details: { cached_tokens: 1000 },
        output_tokens: 567,
        output_tokens_details: { reasoning_tokens: wire.reportsReasoningTokens ? 89 : 0 },
        total_tokens: 1801,
      }
      const plain = await client.responses.create({ model: 'solo', input: 'Hi there', reasoning: { effort: 'medium' } })
      expect(plain.output_text).toBe(turn.text)
      expect((plain.output[0] as OpenAI.Responses.ResponseReasoningItem).summary).toEqual([{ type: 'summary_text', text: turn.reasoning.text }])
      expect(plain.usage).toEqual(shown as OpenAI.Responses.ResponseUsage)
      const once = priceOf(plain.usage)
      expect(await charged()).toBe(once)

      const streamed = await client.responses.stream({ model: 'solo', input: 'Hi there', reasoning: { effort: 'medium' } }).finalResponse()
      expect(streamed.output_text).toBe(turn.text)
      expect(streamed.usage).toEqual(shown as OpenAI.Responses.ResponseUsage)
      expect(await charged()).toBe(2n * once)

      // The same upstream turn through Chat Completions costs the same.
      await client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: 'Hi there' }], reasoning_effort: 'medium' })
      expect(await charged()).toBe(3n * once)
      expect(upstream.requests.map(request => request.body.model)).toEqual(['model-a', 'model-a', 'model-a'])
      expect(t.deps.limits.concurrency.inUse(orgId)).toBe(0)
    })

    test('a tool call with reasoning round-trips: call ids kept, the signed reasoning replayed, each turn charged', async () => {
      const call = { callId: type === 'anthropic' ? 'toolu_e2e_1' : 'call_e2e_1', name: 'get_weather', arguments: '{"city":"Zürich"}' }
      upstream.enqueue(
        { kind: 'sse', body: wire.stream({ reasoning: { text: 'Need the weather tool.', signature: 'sig-tool-turn' }, toolCalls: [call], finish: 'tool-calls', usage: { inputTokens: 80, outputTokens: 25 } }), chunkBytes: 7 },
        { kind: 'sse', body: wire.stream({ text: 'It is 18 degrees in Zürich.', finish: 'stop', usage: { inputTokens: 120, outputTokens: 9 } }) },
      )
      const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: false }]
      const question: OpenAI.Responses.ResponseInputItem = { role: 'user', content: 'Weather in Zürich?' }
      const first = await client.responses.stream({ model: 'solo', input: [question], tools, reasoning: { effort: 'low', summary: 'auto' }, include: ['reasoning.encrypted_content'] }).finalResponse()
      const called = first.output.find(item => item.type === 'function_call')!
      expect([called.call_id, called.name, JSON.parse(called.arguments)]).toEqual([call.callId, call.name, { city: 'Zürich' }])
      const reasoning = first.output.find(item => item.type === 'reasoning')!
      expect(reasoning.encrypted_content ?? undefined).toBe(wire.reasoningSignatures ? 'sig-tool-turn' : undefined)

      const second = await client.responses.create({
        model: 'solo',
        tools,
        reasoning: { effort: 'low' },
        input: [question, ...(first.output as OpenAI.Responses.ResponseInputItem[]), { type: 'function_call_output', call_id: call.callId, output: '18 °C' }],
      })
      expect(second.output_text).toBe('It is 18 degrees in Zürich.')
      const replayed = upstream.requests[1]!.body
      if (type === 'anthropic') {
        expect(replayed.messages.slice(1)).toEqual([
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'Need the weather tool.', signature: 'sig-tool-turn' },
              { type: 'tool_use', id: call.callId, name: call.name, input: { city: 'Zürich' } },
            ],
          },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.callId, content: '18 °C' }] },
        ])
      } else {
        expect(replayed.messages.slice(1)).toEqual([
          { role: 'assistant', content: null, tool_calls: [{ id: call.callId, type: 'function', function: { name: call.name, arguments: call.arguments } }] },
          { role: 'tool', tool_call_id: call.callId, content: '18 °C' },
        ])
      }
      expect(await charged()).toBe(priceOf(first.usage) + priceOf(second.usage))
    })

    test('cut mid-stream: response.failed in-band after the text, the output sent is charged, the slot freed', async () => {
      upstream.enqueue({ kind: 'sse', body: wire.partial('Once upon a time there was'), then: 'reset' })
      const events: string[] = []
      const stream = client.responses.stream({ model: 'solo', input: 'Tell me a story' })
      stream.on('event', event => events.push(event.type))
      const final = await stream.finalResponse()
      expect([final.status, final.error?.code, final.output_text]).toEqual(['failed', 'server_error', 'Once upon a time there was'])
      expect(events.at(-1)).toBe('response.failed')
      expect(events).not.toContain('response.completed')
      expect(await charged()).toBeGreaterThan(0n)
      expect(t.deps.limits.concurrency.inUse(orgId)).toBe(0)
    })

    test('fallback: a 500 before the first byte moves the stream to the second backend; only the served answer is charged', async () => {
      upstream.enqueue({ kind: 'json', status: 500, body: wire.errorBody(500, 'internal failure') })
      secondary.enqueue({ kind: 'sse', body: wire.stream({ text: 'from the second backend', finish: 'stop', usage: { inputTokens: 7, outputTokens: 4 } }) })
      const final = await client.responses.stream({ model: 'duo', input: 'anyone there?' }).finalResponse()
      expect([final.status, final.output_text]).toEqual(['completed', 'from the second backend'])
      expect([upstream.requests.length, secondary.onlyRequest().body.model]).toEqual([1, 'model-b'])
      expect(await charged()).toBe(priceOf(final.usage))
    })

    test('nothing is stored: previous_response_id and store: true are 400 before any upstream call', async () => {
      for (const extra of [{ previous_response_id: 'resp_earlier' }, { store: true }]) {
        const error = await client.responses.create({ model: 'solo', input: 'x', ...extra }).catch(error => error)
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error.param).toBe(Object.keys(extra)[0])
      }
      expect(upstream.requests).toHaveLength(0)
      expect(await charged()).toBe(0n)
    })
  })
}

describe('Responses clients in front of the demo backend', () => {
  test('plain, streamed and a tool round trip with reasoning, charged what the usage says', async () => {
    const t = await buildTestApp()
    const baseUrl = t.listen()
    try {
      const org = await t.createOrg('demo', CREDIT)
      await t.deps.database.client.execute({ sql: "UPDATE orgs SET plan_id = 'payg' WHERE id = ?", args: [org.orgId] })
      // The demo models' price (0.10 / 0.40 USD per Mtok; cached input and reasoning at those rates).
      const demoPrice = (usage: OpenAI.Responses.ResponseUsage | undefined) => {
        const reasoning = BigInt(usage!.output_tokens_details.reasoning_tokens)
        return ceilDiv(BigInt(usage!.input_tokens) * 100_000_000n + (BigInt(usage!.output_tokens) - reasoning) * 400_000_000n + reasoning * 400_000_000n, MTOK)
      }
      const charged = async () => CREDIT - (await t.deps.balance(org.orgId)).prepaidNanos
      const client = openAIClient(baseUrl, org.adminKey)
      const plain = await client.responses.create({ model: 'demo-anonymous', input: 'ping' })
      expect(plain.output_text).toBe('Hello from the demo model. You said: ping')
      const streamed = await client.responses.stream({ model: 'demo-anonymous', input: 'ping' }).finalResponse()
      expect([streamed.output_text, streamed.usage]).toEqual([plain.output_text, plain.usage])

      const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }, strict: null }]
      const first = await client.responses.stream({ model: 'demo-anonymous', input: 'call lookup please', tools, reasoning: { effort: 'low' } }).finalResponse()
      expect(first.output.map(item => item.type)).toEqual(['reasoning', 'function_call'])
      const called = first.output[1] as OpenAI.Responses.ResponseFunctionToolCall
      const second = await client.responses.create({
        model: 'demo-anonymous',
        tools,
        reasoning: { effort: 'low' },
        input: ['call lookup please', ...first.output].map(item => (typeof item === 'string' ? { role: 'user' as const, content: item } : (item as OpenAI.Responses.ResponseInputItem))).concat([
          { type: 'function_call_output', call_id: called.call_id, output: 'forty-two' },
        ]),
      })
      expect(second.output_text).toContain('forty-two')
      expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens)
      expect(first.usage!.output_tokens_details.reasoning_tokens).toBeGreaterThan(0)
      expect(await charged()).toBe([plain, streamed, first, second].reduce((sum, response) => sum + demoPrice(response.usage), 0n))
      expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
    } finally {
      await t.close()
    }
  })
})
