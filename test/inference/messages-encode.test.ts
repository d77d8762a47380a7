import { describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { ApiError } from '../../src/http/errors'
import type { ChatEvent, FinishDetail, FinishReason, Usage } from '../../src/inference/canonical'
import { stopReason } from '../../src/inference/dialects/messages/encode'
import { MessagesStreamEncoder } from '../../src/inference/dialects/messages/encode-stream'

// The Messages stream encoder fed canonical events directly, and read back by the official SDK
// (through a fetch that answers with the encoder's frames), for the shapes the end-to-end tests
// cannot force from a backend: interleaved tool arguments, stop sequences, errors.

const usage: Usage = { inputTokens: 10, outputTokens: 5, webSearchRequests: 0, webFetchRequests: 0 }
const meta = { id: 'msg_unit', model: 'm', createdAt: 0, includeUsage: true, estimatedInputTokens: 7 }

function frames(events: ChatEvent[], end: ({ reason: FinishReason } & FinishDetail) | { error: ApiError }): string {
  const encoder = new MessagesStreamEncoder(meta)
  let text = encoder.start().join('')
  for (const event of events) text += encoder.push(event).join('')
  text += ('error' in end ? encoder.fail(end.error) : encoder.finish(end.reason, usage, end)).join('')
  return text
}

/** The JSON data of every frame. */
const events = (body: string): any[] => body.split('\n').filter(line => line.startsWith('data: ')).map(line => JSON.parse(line.slice(6)))

/** The SDK's MessageStream over a canned SSE body. */
function sdkStream(body: string) {
  const client = new Anthropic({
    apiKey: 'unused',
    maxRetries: 0,
    fetch: async () => new Response(body, { headers: { 'content-type': 'text/event-stream' } }),
  })
  return client.messages.stream({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
}

describe('MessagesStreamEncoder read by the SDK', () => {
  test('interleaved tool-call arguments (one backend streams two calls at once): each block whole, one after the other', async () => {
    const body = frames(
      [
        { type: 'response-start', id: 'up', model: 'u', createdAt: 0 },
        { type: 'tool-call-start', block: 0, callId: 'call_a', name: 'f' },
        { type: 'tool-call-delta', block: 0, argumentsDelta: '{"x":' },
        { type: 'tool-call-start', block: 1, callId: 'call_b', name: 'g' },
        { type: 'tool-call-delta', block: 1, argumentsDelta: '{"y":2}' },
        { type: 'tool-call-delta', block: 0, argumentsDelta: '1}' },
        { type: 'tool-call-end', block: 0 },
        { type: 'tool-call-end', block: 1 },
      ],
      { reason: 'tool-calls' },
    )
    // Blocks never overlap: the SDK's contentBlock event reports the last block started.
    expect(events(body).map(event => `${event.type} ${event.index ?? ''}`.trim()).filter(line => line.startsWith('content_block'))).toEqual([
      'content_block_start 0', 'content_block_delta 0', 'content_block_stop 0',
      'content_block_start 1', 'content_block_delta 1', 'content_block_stop 1',
    ])
    const stream = sdkStream(body)
    const blocks: unknown[] = []
    stream.on('contentBlock', block => blocks.push(block))
    const final = await stream.finalMessage()
    const expected = [
      { type: 'tool_use', id: 'call_a', name: 'f', input: { x: 1 } },
      { type: 'tool_use', id: 'call_b', name: 'g', input: { y: 2 } },
    ]
    expect(blocks).toEqual(expected)
    expect(final.content).toEqual(expected as never)
    expect(final.stop_reason).toBe('tool_use')
    // message_start carried the estimate; message_delta the reported input, which wins.
    expect(final.usage).toMatchObject({ input_tokens: 10, output_tokens: 5 })
  })

  test('held arguments are one input_json_delta of the non-streamed input; a jsonObject block (Anthropic) streams its deltas as they come', async () => {
    const call = (block: number, jsonObject: boolean, args: string[]): ChatEvent[] => [
      { type: 'tool-call-start', block, callId: `call_${block}`, name: 'f', ...(jsonObject ? { jsonObject: true as const } : {}) },
      ...args.map((argumentsDelta): ChatEvent => ({ type: 'tool-call-delta', block, argumentsDelta })),
      { type: 'tool-call-end', block },
    ]
    const body = frames([...call(0, false, ["{'a'", ': 1}']), ...call(1, true, ['{"b"', ':', '2}']), ...call(2, false, [' ', ' ']), ...call(3, false, [])], { reason: 'tool-calls' })
    const partials = events(body).filter(event => event.type === 'content_block_delta').map(event => [event.index, event.delta.partial_json])
    expect(partials).toEqual([[0, JSON.stringify({ _raw_arguments: "{'a': 1}" })], [1, '{"b"'], [1, ':'], [1, '2}'], [2, '{}']])
    const final = await sdkStream(body).finalMessage()
    expect(final.content.map(block => (block as Anthropic.ToolUseBlock).input)).toEqual([{ _raw_arguments: "{'a': 1}" }, { b: 2 }, {}, {}])
  })

  test('blocks that come while a tool block is open wait for its end, then keep their order; finish ends a block left open', async () => {
    const body = frames(
      [
        { type: 'tool-call-start', block: 0, callId: 'call_a', name: 'f' },
        { type: 'tool-call-delta', block: 0, argumentsDelta: '{"x":' },
        { type: 'text-start', block: 1 },
        { type: 'text-delta', block: 1, delta: 'and ' },
        { type: 'text-delta', block: 1, delta: 'more' },
        { type: 'text-end', block: 1 },
        { type: 'tool-call-start', block: 2, callId: 'call_b', name: 'g' },
        { type: 'tool-call-delta', block: 0, argumentsDelta: '1}' },
        { type: 'tool-call-delta', block: 2, argumentsDelta: '{}' },
        { type: 'tool-call-end', block: 0 },
        // block 2 never ends: the finish stops it.
      ],
      { reason: 'tool-calls' },
    )
    const final = await sdkStream(body).finalMessage()
    expect(final.content).toEqual([
      { type: 'tool_use', id: 'call_a', name: 'f', input: { x: 1 } },
      { type: 'text', text: 'and more' },
      { type: 'tool_use', id: 'call_b', name: 'g', input: {} },
    ] as never)
    const indexes = events(body).flatMap(event => (event.index === undefined ? [] : [event.index]))
    expect(indexes).toEqual([...indexes].sort())
  })

  test('message_start reports a prompt size given up front as message_delta does: cache reads and writes apart', async () => {
    // Anthropic's message_start said 50 input, 30 cache reads, 10 cache writes: canonically 90, 30 cached, 10 written.
    const body = frames([{ type: 'response-start', id: 'up', model: 'u', createdAt: 0, inputTokens: 90, cachedInputTokens: 30, cacheWriteInputTokens: 10 }], { reason: 'stop' })
    const start = JSON.parse(body.split('\n').find(line => line.startsWith('data: {"type":"message_start"'))!.slice(6))
    expect(start.message.usage).toMatchObject({ input_tokens: 50, cache_read_input_tokens: 30, cache_creation_input_tokens: 10, output_tokens: 0 })
  })

  test('redacted thinking, then signed thinking, then text: three blocks in order', async () => {
    const body = frames(
      [
        { type: 'response-start', id: 'up', model: 'u', createdAt: 0, inputTokens: 9 },
        { type: 'reasoning-start', block: 0 },
        { type: 'reasoning-end', block: 0, signature: 'opaque', redacted: true },
        { type: 'reasoning-start', block: 1 },
        { type: 'reasoning-delta', block: 1, delta: 'hm' },
        { type: 'reasoning-end', block: 1, signature: 'sig' },
        { type: 'text-start', block: 2 },
        { type: 'text-delta', block: 2, delta: 'ok' },
        { type: 'text-end', block: 2 },
      ],
      { reason: 'stop', stopSequence: '###' },
    )
    expect(body).toContain('"usage":{"input_tokens":9,')
    const final = await sdkStream(body).finalMessage()
    expect(final.content).toEqual([
      { type: 'redacted_thinking', data: 'opaque' },
      { type: 'thinking', thinking: 'hm', signature: 'sig' },
      { type: 'text', text: 'ok' },
    ] as never)
    expect([final.stop_reason, final.stop_sequence]).toEqual(['stop_sequence', '###'])
  })

  test('an upstream failure is an in-band error event the SDK raises with its type', async () => {
    const body = frames([{ type: 'response-start', id: 'up', model: 'u', createdAt: 0 }, { type: 'text-start', block: 0 }, { type: 'text-delta', block: 0, delta: 'par' }], {
      error: new ApiError('rate_limited', 'slow down'),
    })
    expect(body.endsWith('event: error\ndata: {"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}\n\n')).toBe(true)
    const failure = await sdkStream(body).finalMessage().catch(error => error)
    expect(failure).toBeInstanceOf(Anthropic.APIError)
    expect(failure.error).toEqual({ type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } })
  })

  test('finish reasons map to stop reasons', () => {
    expect(stopReason('stop', {})).toBe('end_turn')
    expect(stopReason('stop', { stopSequence: 'END' })).toBe('stop_sequence')
    expect(stopReason('length', {})).toBe('max_tokens')
    expect(stopReason('length', { contextWindowExceeded: true })).toBe('model_context_window_exceeded')
    expect(stopReason('tool-calls', {})).toBe('tool_use')
    expect(stopReason('content-filter', {})).toBe('refusal')
    expect(stopReason('other', {})).toBe('end_turn')
  })
})
