import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { SseDecoder, type SseEvent } from '../../src/http/sse'
import type { ChatEvent } from '../../src/inference/canonical'
import { ChatCompletionsStreamEncoder } from '../../src/inference/dialects/chat-completions/encode-stream'
import { ChunkTranslator } from '../../src/providers/openai-compatible/from-upstream-stream'
import { chunk, DONE, fragments, frame, openAIUsage } from '../providers/openai-wire'
import type { FakeUpstream } from '../support/fake-upstream'
import type { TestApp, TestOrg } from '../support/harness'
import { readUntilFailure } from '../support/gateway'
import { encodeEvents, expectNothingOpen, type recordingFetch, settledOnce, startPassThroughGateway } from '../support/pass-through'

// Same-format pass-through end to end (ARCHITECTURE.md §11): a Chat Completions client (the
// official SDK, through app.handle) streaming from an openai-compatible upstream (a real server
// on port 0) receives exactly the bytes the re-encoding path writes for the same upstream
// stream, never the backend's model name or ids, and is charged exactly as before.

const BACKEND_MODEL = 'backend-secret-model-7b'
const upstreamChunk = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) => chunk(delta, finish, { model: BACKEND_MODEL, ...extra })
const usageFrame = (input: number, output: number) =>
  frame({ id: 'chatcmpl-test123', object: 'chat.completion.chunk', created: 1_700_000_000, model: BACKEND_MODEL, choices: [], usage: openAIUsage({ inputTokens: input, outputTokens: output }) })
/** 3 USD per million input tokens and 7 per million output tokens, in nanos per token. */
const charge = (input: number, output: number) => BigInt(input * 3_000 + output * 7_000)

/** What the re-encoding path (ChunkTranslator → canonical events → encoder) writes for `sse`, under the reply's id and created. */
function reEncoded(sse: string, reply: string, includeUsage: boolean): string {
  const first = JSON.parse(reply.slice('data: '.length, reply.indexOf('\n')))
  const encoder = new ChatCompletionsStreamEncoder({ id: first.id, model: 'm', createdAt: first.created, includeUsage, estimatedInputTokens: 0 })
  const translator = new ChunkTranslator({ provider: 'openai-compatible:up', model: BACKEND_MODEL, requestId: 'r' })
  const sseEvents: SseEvent[] = []
  new SseDecoder().push(new TextEncoder().encode(sse), sseEvents)
  const events: ChatEvent[] = []
  for (const event of sseEvents) if (!translator.ended) translator.event(event, events)
  translator.end(events)
  return encodeEvents(encoder, events)
}

describe('Chat Completions pass-through from an openai-compatible upstream', () => {
  let t: TestApp
  let upstream: FakeUpstream
  let org: TestOrg
  let recorder: ReturnType<typeof recordingFetch>
  let client: OpenAI

  beforeAll(async () => {
    ;({ t, upstream, org, recorder } = await startPassThroughGateway('openai-compatible', `backends: [{ provider: up, model: ${BACKEND_MODEL} }], price: { input_per_mtok: "3", output_per_mtok: "7" }, context_length: 8192, max_output_tokens: 128, capabilities: { tools: true }`, 'pass-through', 'pt'))
    client = new OpenAI({ apiKey: org.adminKey, baseURL: 'http://gateway.test/v1', maxRetries: 0, fetch: recorder.fetch })
  })

  afterAll(async () => {
    expectNothingOpen(t)
    await upstream.close()
    await t.close()
  })

  const settled = () => settledOnce(t, recorder.requestId)

  test('a text stream: the re-encoded bytes, the client model id, the exact charge', async () => {
    const sse = upstreamChunk({ role: 'assistant', content: '' }) + ['Hello', ', "quoted"', ' wörld', ' 😀', '\n'].map(piece => upstreamChunk({ content: piece })).join('') + upstreamChunk({}, 'stop') + usageFrame(11, 7) + DONE
    upstream.enqueue({ kind: 'sse', body: sse, chunkBytes: 97 })
    const before = await t.deps.balance(org.orgId)
    const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    let text = ''
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const part of stream) {
      text += part.choices[0]?.delta.content ?? ''
      if (part.usage) usage = part.usage
      expect(part.model).toBe('m')
    }
    expect(text).toBe('Hello, "quoted" wörld 😀\n')
    expect(usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7 })
    expect(recorder.lastReply).toBe(reEncoded(sse, recorder.lastReply, true))
    expect(recorder.lastReply).not.toContain(BACKEND_MODEL)
    expect(recorder.lastReply).not.toContain('chatcmpl-test123')
    expect(recorder.lastReply).toContain('"system_fingerprint":null')
    const billed = await settled()
    expect(billed.nanos).toBe(charge(11, 7))
    expect(before.prepaidNanos - (await t.deps.balance(org.orgId)).prepaidNanos).toBe(charge(11, 7))
  })

  test('the same stream with its length declared (read whole, sent whole): the same bytes and charge', async () => {
    const sse = upstreamChunk({ role: 'assistant', content: '' }) + ['Whole', ' "at once"', ' ü'].map(piece => upstreamChunk({ content: piece })).join('') + upstreamChunk({}, 'stop') + usageFrame(9, 3) + DONE
    upstream.enqueue({ kind: 'text', status: 200, body: sse, headers: { 'content-type': 'text/event-stream' } })
    const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    let text = ''
    for await (const part of stream) text += part.choices[0]?.delta.content ?? ''
    expect(text).toBe('Whole "at once" ü')
    expect(recorder.lastReply).toBe(reEncoded(sse, recorder.lastReply, true))
    expect(recorder.lastReply).not.toContain(BACKEND_MODEL)
    expect((await settled()).nanos).toBe(charge(9, 3))
  })

  test('tool calls: the SDK assembles them; bytes and charge as when re-encoded; no usage frame unless asked', async () => {
    const args = '{"city":"Paris","days":3}'
    let sse = upstreamChunk({ role: 'assistant', content: null })
    sse += upstreamChunk({ tool_calls: [{ index: 0, id: 'call_w', type: 'function', function: { name: 'weather', arguments: '' } }] })
    for (const piece of fragments(args, 6)) sse += upstreamChunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] })
    sse += upstreamChunk({}, 'tool_calls') + usageFrame(20, 9) + DONE
    upstream.enqueue({ kind: 'sse', body: sse, chunkBytes: 40 })
    const tools = [{ type: 'function' as const, function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }]
    const final = await client.chat.completions.stream({ model: 'm', messages: [{ role: 'user', content: 'weather?' }], tools, stream: true }).finalChatCompletion()
    expect(final.choices[0]!.message.tool_calls).toEqual([{ id: 'call_w', type: 'function', function: { name: 'weather', arguments: args } }])
    expect(final.choices[0]!.finish_reason).toBe('tool_calls')
    expect(recorder.lastReply).toBe(reEncoded(sse, recorder.lastReply, false))
    expect(recorder.lastReply).not.toContain('"usage"')
    expect((await settled()).nanos).toBe(charge(20, 9))
  })

  test('a refusal stays a refusal, streamed and not: the SDK parse() reports it instead of failing on it as JSON', async () => {
    // OpenAI answers a structured-output request it declines with `refusal` (content null).
    const format = { type: 'json_schema' as const, json_schema: { name: 'answer', strict: true, schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false } } }
    const request = { model: 'm', messages: [{ role: 'user' as const, content: 'hi' }], response_format: format }
    const sse = upstreamChunk({ role: 'assistant', content: null, refusal: '' }) + ["I'm sorry,", ' I cannot help.'].map(piece => upstreamChunk({ refusal: piece })).join('') + upstreamChunk({}, 'stop') + usageFrame(6, 5) + DONE
    upstream.enqueue({ kind: 'sse', body: sse })
    const streamed = (await client.chat.completions.stream({ ...request, stream: true }).finalChatCompletion()).choices[0]!.message
    // (content is the first chunk's "", written before the stream shows what kind of answer it is)
    expect([streamed.content || null, streamed.refusal, streamed.parsed]).toEqual([null, "I'm sorry, I cannot help.", null])
    expect((await settled()).nanos).toBe(charge(6, 5))
    const message = { role: 'assistant', content: null, refusal: "I'm sorry, I cannot help." }
    upstream.enqueue({ kind: 'json', body: { id: 'chatcmpl-r', object: 'chat.completion', created: 1, model: BACKEND_MODEL, choices: [{ index: 0, message, finish_reason: 'stop' }], usage: openAIUsage({ inputTokens: 6, outputTokens: 5 }) } })
    const plain = (await client.chat.completions.parse(request)).choices[0]!.message
    expect([plain.content, plain.refusal, plain.parsed]).toEqual([null, "I'm sorry, I cannot help.", null])
    expect((await settled()).nanos).toBe(charge(6, 5))
  })

  test('an error chunk mid-stream: the in-band error after the forwarded text, produced output charged', async () => {
    const sse = upstreamChunk({ role: 'assistant', content: '' }) + upstreamChunk({ content: 'partial ' }) + upstreamChunk({ content: 'answer' }) + frame({ error: { message: 'backend crashed', type: 'server_error' } }) + DONE
    upstream.enqueue({ kind: 'sse', body: sse })
    const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true })
    const { text, failure } = await readUntilFailure(stream)
    expect(failure).toBeInstanceOf(OpenAI.APIError)
    expect(text).toBe('partial answer')
    expect(recorder.lastReply).toBe(reEncoded(sse, recorder.lastReply, false))
    expect(recorder.lastReply).not.toContain('backend crashed')
    const billed = await settled()
    expect(billed.nanos).toBeGreaterThan(0n)
  })

  test('a stream cut after its usage chunk, before [DONE], is whole: the usage it reported is charged', async () => {
    // Nothing is left to send or bill once the finish_reason and the usage after it came: the
    // answer ends there (before, it waited for [DONE] and the cut was an in-band error).
    const sse = upstreamChunk({ role: 'assistant', content: '' }) + upstreamChunk({ content: 'cut after ' }) + upstreamChunk({ content: 'usage' }) + upstreamChunk({}, 'stop') + usageFrame(1234, 9)
    upstream.enqueue({ kind: 'sse', body: sse, then: 'reset' })
    const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true })
    const { text, failure } = await readUntilFailure(stream)
    expect(failure).toBeUndefined()
    expect(text).toBe('cut after usage')
    // 1234 input and 9 output tokens as reported after the finish_reason (the estimates would be
    // ceil(2 bytes ÷ 3) + 4 = 5 input, and 15 bytes ÷ 4 = 4 output).
    expect((await settled()).nanos).toBe(charge(1234, 9))
  })

  test('an error chunk after usage-bearing chunks (vLLM continuous usage): the input they reported is charged', async () => {
    const usage = { usage: openAIUsage({ inputTokens: 321, outputTokens: 2 }) }
    const sse = upstreamChunk({ role: 'assistant', content: '' }, null, usage) + upstreamChunk({ content: 'partial answer' }, null, usage) + frame({ error: { message: 'backend crashed', type: 'server_error' } })
    upstream.enqueue({ kind: 'sse', body: sse })
    const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true })
    expect((await readUntilFailure(stream)).failure).toBeInstanceOf(OpenAI.APIError)
    expect((await settled()).nanos).toBe(charge(321, 4))
  })

  test('a non-plain upstream (extra fields) is re-encoded from its first chunk, with the same result', async () => {
    const sse = upstreamChunk({ role: 'assistant', content: '' }, null, { service_tier: 'default' }) + upstreamChunk({ content: 'Hi' }, null, { obfuscation: 'x1' }) + upstreamChunk({}, 'stop') + usageFrame(4, 1) + DONE
    upstream.enqueue({ kind: 'sse', body: sse })
    const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
    for await (const _ of stream) void _
    expect(recorder.lastReply).toBe(reEncoded(sse, recorder.lastReply, true))
    expect((await settled()).nanos).toBe(charge(4, 1))
  })
})
