import { afterAll, afterEach, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { SseDecoder, type SseEvent } from '../../src/http/sse'
import type { ChatEvent } from '../../src/inference/canonical'
import { MessagesStreamEncoder } from '../../src/inference/dialects/messages/encode-stream'
import { AnthropicStreamTranslator } from '../../src/providers/anthropic/from-upstream-stream'
import { MessagesPassThrough } from '../../src/providers/anthropic/pass-through'
import type { FakeUpstream } from '../support/fake-upstream'
import type { TestApp, TestOrg } from '../support/harness'
import { encodeEvents, expectNothingOpen, type recordingFetch, settledOnce, startPassThroughGateway } from '../support/pass-through'

// Same-format pass-through for Messages end to end (ARCHITECTURE.md §11): an Anthropic SDK
// client (through app.handle) streaming from an Anthropic upstream (a real server on port 0)
// receives exactly the bytes the re-encoding path writes for the same upstream stream, never the
// backend's model name or message id, and is charged exactly as before.

const BACKEND_MODEL = 'claude-backend-secret-1'
const event = (data: { type: string } & Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`
const start = (input: number) =>
  event({ type: 'message_start', message: { id: 'msg_backend_1', type: 'message', role: 'assistant', model: BACKEND_MODEL, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: input, output_tokens: 1 } } })
const end = (output: number, stopReason = 'end_turn') => event({ type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: output } }) + event({ type: 'message_stop' })
const delta = (index: number, value: Record<string, unknown>) => event({ type: 'content_block_delta', index, delta: value })
const block = (index: number, content: Record<string, unknown>, deltas: Array<Record<string, unknown>>) =>
  event({ type: 'content_block_start', index, content_block: content }) + deltas.map(value => delta(index, value)).join('') + event({ type: 'content_block_stop', index })
const texts = (...pieces: string[]) => pieces.map(text => ({ type: 'text_delta', text }))
/** 3 USD per million input tokens and 7 per million output tokens, in nanos per token. */
const charge = (input: number, output: number) => BigInt(input * 3_000 + output * 7_000)

/** What the re-encoding path (translator → canonical events → encoder) writes for `sse`, under the reply's message id. */
function reEncoded(sse: string, reply: string): string {
  const id = /"id":"(msg_[^"]+)"/.exec(reply)![1]!
  const encoder = new MessagesStreamEncoder({ id, model: 'm', createdAt: 0, includeUsage: false, estimatedInputTokens: 0 })
  const translator = new AnthropicStreamTranslator({ provider: 'anthropic:up', model: BACKEND_MODEL }, () => 0, 'req_1')
  const sseEvents: SseEvent[] = []
  new SseDecoder().push(new TextEncoder().encode(sse), sseEvents)
  const events: ChatEvent[] = []
  for (const item of sseEvents) if (!translator.done) events.push(...translator.push(item))
  events.push(...translator.end())
  return encodeEvents(encoder, events)
}

describe('Messages pass-through from an Anthropic upstream', () => {
  let t: TestApp
  let upstream: FakeUpstream
  let org: TestOrg
  let recorder: ReturnType<typeof recordingFetch>
  let client: Anthropic
  const passed = { events: spyOn(MessagesPassThrough.prototype, 'events'), whole: spyOn(MessagesPassThrough.prototype, 'whole') }

  beforeAll(async () => {
    ;({ t, upstream, org, recorder } = await startPassThroughGateway('anthropic', `backends: [{ provider: up, model: ${BACKEND_MODEL} }], price: { input_per_mtok: "3", output_per_mtok: "7" }, context_length: 8192, max_output_tokens: 4096, capabilities: { tools: true, reasoning: true }`, 'messages-pass-through', 'mpt'))
    client = new Anthropic({ apiKey: org.adminKey, baseURL: 'http://gateway.test', maxRetries: 0, fetch: recorder.fetch })
  })

  afterEach(() => {
    passed.events.mockClear()
    passed.whole.mockClear()
  })

  afterAll(async () => {
    passed.events.mockRestore()
    passed.whole.mockRestore()
    expectNothingOpen(t)
    await upstream.close()
    await t.close()
  })

  const settled = () => settledOnce(t, recorder.requestId)
  const params = { model: 'm', max_tokens: 1024, messages: [{ role: 'user' as const, content: 'hi' }] }

  test('a text stream, chunked: the re-encoded bytes, the client model id, the exact charge', async () => {
    const sse = start(11) + block(0, { type: 'text', text: '' }, texts('Hello', ', "quoted"', ' wörld', ' 😀', '\n')) + end(7)
    upstream.enqueue({ kind: 'sse', body: sse, chunkBytes: 97 })
    const before = await t.deps.balance(org.orgId)
    const message = await client.messages.stream(params).finalMessage()
    expect(message.content).toMatchObject([{ type: 'text', text: 'Hello, "quoted" wörld 😀\n' }])
    expect(message.model).toBe('m')
    expect(message.usage).toMatchObject({ input_tokens: 11, output_tokens: 7 })
    expect(recorder.lastReply).toBe(reEncoded(sse, recorder.lastReply))
    expect(recorder.lastReply).not.toContain(BACKEND_MODEL)
    expect(recorder.lastReply).not.toContain('msg_backend_1')
    expect(passed.events).toHaveBeenCalled()
    expect((await settled()).nanos).toBe(charge(11, 7))
    expect(before.prepaidNanos - (await t.deps.balance(org.orgId)).prepaidNanos).toBe(charge(11, 7))
  })

  test('the same stream with its length declared (read whole): the same bytes and charge', async () => {
    const sse = start(9) + block(0, { type: 'text', text: '' }, texts('Whole', ' "at once"', ' ü')) + end(3)
    upstream.enqueue({ kind: 'text', status: 200, body: sse, headers: { 'content-type': 'text/event-stream' } })
    const message = await client.messages.stream(params).finalMessage()
    expect(message.content).toMatchObject([{ type: 'text', text: 'Whole "at once" ü' }])
    expect(recorder.lastReply).toBe(reEncoded(sse, recorder.lastReply))
    expect(passed.whole).toHaveBeenCalled()
    expect((await settled()).nanos).toBe(charge(9, 3))
  })

  test('thinking, then a tool call: the SDK assembles both; bytes and charge as when re-encoded', async () => {
    const sse =
      start(20) +
      block(0, { type: 'thinking', thinking: '', signature: '' }, [{ type: 'thinking_delta', thinking: 'Weather: ' }, { type: 'thinking_delta', thinking: 'ask the tool.' }, { type: 'signature_delta', signature: 'c2lnLTE=' }]) +
      block(1, { type: 'tool_use', id: 'toolu_01A', name: 'weather', input: {} }, [{ type: 'input_json_delta', partial_json: '{"city":' }, { type: 'input_json_delta', partial_json: '"Paris"}' }]) +
      end(9, 'tool_use')
    upstream.enqueue({ kind: 'sse', body: sse, chunkBytes: 40 })
    const tools = [{ name: 'weather', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } } }]
    const message = await client.messages.stream({ ...params, tools, thinking: { type: 'enabled', budget_tokens: 1024 }, max_tokens: 2048 }).finalMessage()
    expect(message.content).toMatchObject([
      { type: 'thinking', thinking: 'Weather: ask the tool.', signature: 'c2lnLTE=' },
      { type: 'tool_use', id: 'toolu_01A', name: 'weather', input: { city: 'Paris' } },
    ])
    expect(message.stop_reason).toBe('tool_use')
    expect(recorder.lastReply).toBe(reEncoded(sse, recorder.lastReply))
    expect((await settled()).nanos).toBe(charge(20, 9))
  })

  test('a no-argument tool call whose only input delta is whitespace: the SDK gets input {}; bytes and charge as when re-encoded', async () => {
    const json = (partial_json: string) => ({ type: 'input_json_delta', partial_json })
    const sse =
      start(5) +
      block(0, { type: 'tool_use', id: 'toolu_01N', name: 'now', input: {} }, [json(' ')]) +
      block(1, { type: 'tool_use', id: 'toolu_01S', name: 'weather', input: {} }, [json('\n'), json('{"city":'), json(' '), json('"Oslo"}')]) +
      end(3, 'tool_use')
    for (const response of [{ kind: 'sse' as const, body: sse, chunkBytes: 64 }, { kind: 'text' as const, status: 200, body: sse, headers: { 'content-type': 'text/event-stream' } }]) {
      upstream.enqueue(response)
      const before = await t.deps.balance(org.orgId)
      const tools = [{ name: 'now', input_schema: { type: 'object' as const } }, { name: 'weather', input_schema: { type: 'object' as const } }]
      const message = await client.messages.stream({ ...params, tools }).finalMessage()
      expect(message.content).toMatchObject([
        { type: 'tool_use', id: 'toolu_01N', name: 'now', input: {} },
        { type: 'tool_use', id: 'toolu_01S', name: 'weather', input: { city: 'Oslo' } },
      ])
      expect(recorder.lastReply).toBe(reEncoded(sse, recorder.lastReply))
      expect((await settled()).nanos).toBe(charge(5, 3))
      expect(before.prepaidNanos - (await t.deps.balance(org.orgId)).prepaidNanos).toBe(charge(5, 3))
    }
  })

  test('an error event mid-stream: the in-band error after the forwarded text, produced output charged', async () => {
    const sse =
      start(321) +
      event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }) +
      texts('partial ', 'answer').map(value => delta(0, value)).join('') +
      event({ type: 'error', error: { type: 'overloaded_error', message: 'backend overloaded' } })
    upstream.enqueue({ kind: 'sse', body: sse })
    let text = ''
    const stream = client.messages.stream(params).on('text', piece => (text += piece))
    const failure = await stream.finalMessage().catch(error => error)
    expect(failure).toBeInstanceOf(Anthropic.APIError)
    expect(text).toBe('partial answer')
    expect(recorder.lastReply).toBe(reEncoded(sse, recorder.lastReply))
    // The input message_start reported, not the gateway's estimate (5); the output counted (14 bytes ÷ 4).
    expect((await settled()).nanos).toBe(charge(321, 4))
  })

  test('a stream cut after message_start: the input it reported is charged, with the output counted', async () => {
    const sse = start(1234) + event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }) + texts('cut short ', 'here').map(value => delta(0, value)).join('')
    upstream.enqueue({ kind: 'sse', body: sse, then: 'reset' })
    let text = ''
    const stream = client.messages.stream(params).on('text', piece => (text += piece))
    expect(await stream.finalMessage().catch(error => error)).toBeInstanceOf(Anthropic.APIError)
    expect(text).toBe('cut short here')
    // 1234 input tokens as reported (the estimate would be ceil(2 bytes ÷ 3) + 4 = 5), 14 bytes ÷ 4 output.
    expect((await settled()).nanos).toBe(charge(1234, 4))
  })
})
