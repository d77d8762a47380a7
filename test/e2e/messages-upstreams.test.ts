import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import type { TurnScript, WireScript } from '../providers/conformance'
import { anthropicWire } from '../providers/anthropic-wire'
import { chunk as openAIChunk, frame as openAIFrame, openAIUsage, openAIWire } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { paygConfig, startServedGateway, upstreamProvider } from '../support/gateway'
import { type TestApp } from '../support/harness'
import { poll } from '../support/poll'
import { CREDIT, PRICE_YAML, weatherTool } from './upstream-fixtures'

// The official Anthropic SDK against the gateway in front of real (fake) upstreams of both
// kinds: plain, streamed, counted, failing mid-stream, and multi-turn tool use with thinking,
// with the ledger checked against what Chat Completions charges for the same usage.

const UPSTREAM_KEY = 'sk-upstream-0123456789'

/** Anthropic SSE event framing, for turns the shared wire script does not cover (redacted thinking). */
const sse = (data: { type: string } & Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`

interface Target {
  readonly type: 'openai-compatible' | 'anthropic'
  readonly wire: WireScript
  readonly callId: string
}

const TARGETS: Target[] = [
  { type: 'openai-compatible', wire: openAIWire, callId: 'call_Xy12' },
  { type: 'anthropic', wire: anthropicWire, callId: 'toolu_01Xy12' },
]


for (const target of TARGETS) {
  describe(`Anthropic SDK → gateway → ${target.type} backend`, () => {
    let t: TestApp
    let upstream: FakeUpstream
    let anthropic: Anthropic
    let openai: OpenAI
    let orgId: string

    const charged = async () => CREDIT - (await t.deps.balance(orgId)).prepaidNanos
    const slotsInUse = () => t.deps.limits.concurrency.inUse(orgId)

    beforeEach(async () => {
      upstream = await FakeUpstream.start()
      // The Anthropic SDK sends its key as x-api-key; the OpenAI SDK as a bearer token.
      ;({ t, orgId, anthropic, openai } = await startServedGateway(paygConfig(
        [upstreamProvider('up', target.type, `${upstream.url}/v1`, 'UPSTREAM_KEY')],
        [`  - { id: m, backends: [{ provider: up, model: upstream-m }], price: ${PRICE_YAML}, context_length: 16384, max_output_tokens: 4096, capabilities: { tools: true, reasoning: true, vision: true } }`],
      ), { UPSTREAM_KEY }, { credit: CREDIT }))
    })

    afterEach(async () => {
      await upstream.close()
      await t.close()
    })

    const turn: TurnScript = {
      reasoning: { text: 'Greeting; answer briefly.', signature: 'sig-e2e-1' },
      text: 'Hello! Nice to meet you.',
      finish: 'stop',
      usage: { inputTokens: 1234, outputTokens: 567, cachedInputTokens: 1000, reasoningTokens: 89 },
    }
    const signature = target.wire.reasoningSignatures ? 'sig-e2e-1' : ''
    const expectedContent = [
      { type: 'thinking', thinking: turn.reasoning!.text, signature },
      { type: 'text', text: turn.text },
    ]
    // Anthropic's input_tokens excludes cache reads.
    const expectedUsage = { input_tokens: 234, cache_read_input_tokens: 1000, cache_creation_input_tokens: 0, output_tokens: 567 }

    test('create and stream().finalMessage(): thinking, text, usage; each charged exactly what Chat Completions charges', async () => {
      upstream.enqueue({ kind: 'sse', body: target.wire.stream(turn) }, { kind: 'sse', body: target.wire.stream(turn), chunkBytes: 7 }, { kind: 'sse', body: target.wire.stream(turn) })
      const params = { model: 'm', max_tokens: 2048, thinking: { type: 'enabled' as const, budget_tokens: 1024 }, messages: [{ role: 'user' as const, content: 'Hi there' }] }

      const message = await anthropic.messages.create(params)
      expect(message.id).toMatch(/^msg_/)
      expect(message.model).toBe('m')
      expect(message.content).toEqual(expectedContent as Anthropic.ContentBlock[])
      expect(message.stop_reason).toBe('end_turn')
      expect(message.usage).toMatchObject(expectedUsage)
      const plain = await charged()
      expect(plain).toBeGreaterThan(0n)

      const stream = anthropic.messages.stream(params)
      const events: string[] = []
      stream.on('streamEvent', event => events.push(event.type === 'content_block_delta' ? `delta:${event.delta.type}` : event.type))
      const final = await stream.finalMessage()
      expect(final.content).toEqual(expectedContent as never)
      expect(final.usage).toMatchObject(expectedUsage)
      expect(final.stop_reason).toBe('end_turn')
      // One block at a time, in Anthropic's order; the signature just before its block stops.
      const compact = events.filter((event, index) => event !== events[index - 1])
      expect(compact).toEqual([
        'message_start',
        'content_block_start',
        'delta:thinking_delta',
        ...(signature ? ['delta:signature_delta'] : []),
        'content_block_stop',
        'content_block_start',
        'delta:text_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ])
      expect((await charged()) - plain).toBe(plain)

      // The same usage through Chat Completions costs the same.
      await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi there' }], reasoning_effort: 'low' })
      expect((await charged()) - 2n * plain).toBe(plain)
      expect(slotsInUse()).toBe(0)
    })

    test('the upstream request carries system, tools, tool_choice, stop_sequences and top_k, never the end user or the client key', async () => {
      upstream.enqueue({ kind: 'sse', body: target.wire.stream({ text: 'ok', finish: 'stop', usage: { inputTokens: 30, outputTokens: 1 } }) })
      const message = await anthropic.messages.create({
        model: 'm',
        max_tokens: 100,
        system: [{ type: 'text', text: 'Be terse.' }],
        messages: [{ role: 'user', content: [{ type: 'text', text: 'Weather?' }] }],
        tools: [weatherTool],
        tool_choice: { type: 'auto', disable_parallel_tool_use: true },
        stop_sequences: ['END'],
        top_k: 5,
        metadata: { user_id: 'end-user-42' },
      } as Anthropic.MessageCreateParamsNonStreaming)
      expect(message.content).toEqual([{ type: 'text', text: 'ok' }] as Anthropic.ContentBlock[])
      const received = upstream.onlyRequest()
      expect(received.text).not.toContain('end-user-42')
      if (target.type === 'anthropic') {
        expect(received.headers['x-api-key']).toBe(UPSTREAM_KEY)
        expect(received.body).toMatchObject({
          model: 'upstream-m',
          max_tokens: 100,
          system: 'Be terse.',
          messages: [{ role: 'user', content: [{ type: 'text', text: 'Weather?' }] }],
          tools: [{ name: 'get_weather', description: 'Current weather', input_schema: weatherTool.input_schema }],
          tool_choice: { type: 'auto', disable_parallel_tool_use: true },
          stop_sequences: ['END'],
          top_k: 5,
        })
        expect(received.body.metadata).toBeUndefined()
      } else {
        expect(received.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`)
        expect(received.body).toMatchObject({
          model: 'upstream-m',
          max_tokens: 100,
          messages: [
            { role: 'system', content: 'Be terse.' },
            { role: 'user', content: 'Weather?' },
          ],
          tools: [{ type: 'function', function: { name: 'get_weather', parameters: weatherTool.input_schema } }],
          tool_choice: 'auto',
          parallel_tool_calls: false,
          stop: ['END'],
          top_k: 5,
        })
        expect(received.body.user).toBeUndefined()
      }
    })

    test('countTokens: exact from an Anthropic backend, the documented estimate otherwise; never charged', async () => {
      if (target.type === 'anthropic') upstream.enqueue({ kind: 'json', body: { input_tokens: 4242 } })
      const count = await anthropic.messages.countTokens({ model: 'm', system: 'Be terse.', messages: [{ role: 'user', content: 'How many tokens is this?' }], tools: [weatherTool] })
      if (target.type === 'anthropic') {
        expect(count.input_tokens).toBe(4242)
        const received = upstream.onlyRequest()
        expect(received.path).toBe('/v1/messages/count_tokens')
        expect(received.headers['x-api-key']).toBe(UPSTREAM_KEY)
        expect(received.body).toEqual({
          model: 'upstream-m',
          system: 'Be terse.',
          messages: [{ role: 'user', content: [{ type: 'text', text: 'How many tokens is this?' }] }],
          tools: [{ name: 'get_weather', description: 'Current weather', input_schema: weatherTool.input_schema }],
        })
      } else {
        // UTF-8 bytes ÷ 4 (rounded up) of texts and tool definitions, plus 4 per message.
        const tool = JSON.stringify({ name: 'get_weather', description: 'Current weather', parameters: weatherTool.input_schema })
        const bytes = Buffer.byteLength('Be terse.') + Buffer.byteLength('How many tokens is this?') + Buffer.byteLength(tool)
        expect(count.input_tokens).toBe(Math.ceil(bytes / 4) + 2 * 4)
        expect(upstream.requests).toHaveLength(0)
      }
      expect(await charged()).toBe(0n)
      // A document block is extracted only by a real call: counted as the estimate on every
      // backend (before: 400 "File parts must be converted" from the Anthropic provider).
      const before = upstream.requests.length
      const text = 'a short text document'
      const withDocument = await anthropic.messages.countTokens({
        model: 'm',
        messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'document', source: { type: 'text', media_type: 'text/plain', data: text } }] }],
      })
      // The text ÷ 4 plus 4 per message, and the file's raw bytes ÷ 4 (README "count_tokens").
      expect(withDocument.input_tokens).toBe(Math.ceil(Buffer.byteLength('hi') / 4) + 4 + Math.ceil(Buffer.byteLength(text) / 4))
      expect(upstream.requests).toHaveLength(before)
      expect(await charged()).toBe(0n)
    })

    test('a multi-turn tool conversation with thinking: tool ids and (where the backend signs) signatures survive, in order', async () => {
      const call = { callId: target.callId, name: 'get_weather', arguments: '{"city":"Zürich"}' }
      let firstTurn: string
      if (target.type === 'anthropic') {
        // Thinking, a redacted block, then the call: all three must come back in this order.
        firstTurn =
          sse({ type: 'message_start', message: { id: 'msg_up1', type: 'message', role: 'assistant', model: 'upstream-m', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 50, output_tokens: 1 } } }) +
          sse({ type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } }) +
          sse({ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Need the weather tool.' } }) +
          sse({ type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'sig-turn-1' } }) +
          sse({ type: 'content_block_stop', index: 0 }) +
          sse({ type: 'content_block_start', index: 1, content_block: { type: 'redacted_thinking', data: 'opaque-redacted-data' } }) +
          sse({ type: 'content_block_stop', index: 1 }) +
          sse({ type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: call.callId, name: call.name, input: {} } }) +
          sse({ type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"city":' } }) +
          sse({ type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '"Zürich"}' } }) +
          sse({ type: 'content_block_stop', index: 2 }) +
          sse({ type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 40 } }) +
          sse({ type: 'message_stop' })
      } else {
        firstTurn = target.wire.stream({ reasoning: { text: 'Need the weather tool.' }, toolCalls: [call], finish: 'tool-calls', usage: { inputTokens: 50, outputTokens: 40 } })
      }
      upstream.enqueue(
        { kind: 'sse', body: firstTurn, chunkBytes: 11 },
        { kind: 'sse', body: target.wire.stream({ text: 'It is 18 °C in Zürich.', finish: 'stop', usage: { inputTokens: 90, outputTokens: 9 } }) },
      )
      const question: Anthropic.MessageParam = { role: 'user', content: 'Weather in Zürich?' }
      const params = { model: 'm', max_tokens: 4096, thinking: { type: 'enabled' as const, budget_tokens: 2048 }, tools: [weatherTool] }
      const first = await anthropic.messages.stream({ ...params, messages: [question] }).finalMessage()
      expect(first.stop_reason).toBe('tool_use')
      const expectedFirst =
        target.type === 'anthropic'
          ? [
              { type: 'thinking', thinking: 'Need the weather tool.', signature: 'sig-turn-1' },
              { type: 'redacted_thinking', data: 'opaque-redacted-data' },
              { type: 'tool_use', id: call.callId, name: call.name, input: { city: 'Zürich' } },
            ]
          : [
              { type: 'thinking', thinking: 'Need the weather tool.', signature: '' },
              { type: 'tool_use', id: call.callId, name: call.name, input: { city: 'Zürich' } },
            ]
      expect(first.content).toEqual(expectedFirst as never)

      // The client sends the assistant turn back exactly as received, then the tool result.
      const second = await anthropic.messages.create({
        ...params,
        messages: [question, { role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.callId, content: '18 °C' }] }],
      })
      expect(second.content).toEqual([{ type: 'text', text: 'It is 18 °C in Zürich.' }] as Anthropic.ContentBlock[])
      const replay = upstream.requests[1]!.body
      if (target.type === 'anthropic') {
        expect(replay.thinking).toEqual({ type: 'enabled', budget_tokens: 2048 })
        expect(replay.messages).toEqual([
          { role: 'user', content: [{ type: 'text', text: 'Weather in Zürich?' }] },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'Need the weather tool.', signature: 'sig-turn-1' },
              { type: 'redacted_thinking', data: 'opaque-redacted-data' },
              { type: 'tool_use', id: call.callId, name: call.name, input: { city: 'Zürich' } },
            ],
          },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.callId, content: '18 °C' }] },
        ])
      } else {
        // Chat Completions has no field for signatures; the id pairs the call with its result.
        expect(replay.messages).toEqual([
          { role: 'user', content: 'Weather in Zürich?' },
          { role: 'assistant', content: null, tool_calls: [{ id: call.callId, type: 'function', function: { name: call.name, arguments: '{"city":"Zürich"}' } }] },
          { role: 'tool', tool_call_id: call.callId, content: '18 °C' },
        ])
      }
    })

    test('mid-stream failure: an in-band error event the SDK raises, after the text; the output sent is charged', async () => {
      let release!: () => void
      const held = new Promise<void>(resolve => (release = resolve))
      upstream.enqueue({ kind: 'sse', body: [target.wire.partial('Once upon a time'), held], then: 'reset' })
      const stream = anthropic.messages.stream({ model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'A story' }] })
      let text = ''
      stream.on('text', delta => {
        text += delta
        if (text === 'Once upon a time') release()
      })
      const failure = await stream.finalMessage().catch(error => error)
      expect(text).toBe('Once upon a time')
      expect(failure).toBeInstanceOf(Anthropic.APIError)
      expect(failure.error).toMatchObject({ type: 'error', error: { type: 'api_error' } })
      expect(await charged()).toBeGreaterThan(0n)
      expect(slotsInUse()).toBe(0)
    })

    test('cut after the upstream reported its input count: that count is charged, not the estimate', async () => {
      // Anthropic reports it in message_start (anthropicWire.partial: 5 tokens); a Chat Completions
      // upstream in a usage chunk before its finish_reason (vLLM's continuous usage), which may
      // come before the stream is cut (one after the finish_reason ends the answer whole).
      const reported = target.type === 'anthropic' ? 5 : 1234
      const partial = target.wire.partial('Once upon a time')
      const body = target.type === 'anthropic' ? partial : partial + openAIFrame({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'upstream-m', choices: [], usage: openAIUsage({ inputTokens: reported, outputTokens: 4 }) })
      upstream.enqueue({ kind: 'sse', body, then: 'reset' })
      const prompt = 'A story, please, about a long and winding road'
      const failure = await anthropic.messages.stream({ model: 'm', max_tokens: 100, messages: [{ role: 'user', content: prompt }] }).finalMessage().catch(error => error)
      expect(failure).toBeInstanceOf(Anthropic.APIError)
      // The reported input at 1.234567891 USD/M and the 16 bytes of text sent (4 tokens) at 3.000000007 USD/M, rounded up once.
      const nanos = (BigInt(reported) * 1_234_567_891n + 4n * 3_000_000_007n + 999_999n) / 1_000_000n
      expect(await charged()).toBe(nanos)
      expect(slotsInUse()).toBe(0)
    })

    test('Chat Completions client, mid-stream failure: the OpenAI in-band error after the text', async () => {
      let release!: () => void
      const held = new Promise<void>(resolve => (release = resolve))
      upstream.enqueue({ kind: 'sse', body: [target.wire.partial('Once upon a time'), held], then: 'reset' })
      const stream = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'A story' }], stream: true })
      let text = ''
      const failure = await (async () => {
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? ''
          if (text === 'Once upon a time') release()
        }
      })().catch(error => error)
      expect(text).toBe('Once upon a time')
      expect(failure).toBeInstanceOf(OpenAI.APIError)
      expect(failure.error).toMatchObject({ code: 'provider_error' })
      expect(slotsInUse()).toBe(0)
    })

    test('abandoned mid-stream: the upstream sees the disconnect, the slot is freed, the output sent is charged', async () => {
      let never!: () => void
      const held = new Promise<void>(resolve => (never = resolve))
      upstream.enqueue({ kind: 'sse', body: [target.wire.partial('Streaming until the client leaves'), held] })
      const stream = anthropic.messages.stream({ model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'Stream' }] })
      let text = ''
      stream.on('text', delta => {
        text += delta
        if (text === 'Streaming until the client leaves') stream.abort()
      })
      expect(await stream.done().catch(error => error)).toBeInstanceOf(Anthropic.APIUserAbortError)
      const received = await upstream.request(0)
      await received.disconnected
      await poll('the slot to be freed', 500, 5, () => (slotsInUse() === 0 ? true : undefined))
      await poll('the settlement', 500, 5, async () => ((await charged()) > 0n ? true : undefined))
      never()
    })

    test('count_tokens failing upstream (Anthropic) is a 502 in the Anthropic envelope; other backends never call out', async () => {
      upstream.enqueue({ kind: 'json', status: 500, body: target.wire.errorBody(500, 'count failed') })
      const result = await anthropic.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).catch(error => error)
      if (target.type === 'anthropic') {
        expect(result).toBeInstanceOf(Anthropic.APIError)
        expect(result.status).toBe(502)
        expect(result.error.error.type).toBe('api_error')
      } else {
        expect(result.input_tokens).toBe(Math.ceil(2 / 4) + 4)
        expect(upstream.requests).toHaveLength(0)
      }
    })

    test('a failure before any output: 502 in the Anthropic envelope, nothing charged', async () => {
      upstream.enqueue({ kind: 'json', status: 500, body: target.wire.errorBody(500, 'boom') })
      const failure = await anthropic.messages.create({ model: 'm', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }).catch(error => error)
      expect(failure).toBeInstanceOf(Anthropic.InternalServerError)
      expect(failure.status).toBe(502)
      expect(failure.error).toMatchObject({ type: 'error', error: { type: 'api_error' } })
      expect(await charged()).toBe(0n)
    })
  })
}
