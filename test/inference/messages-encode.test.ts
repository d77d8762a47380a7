import { describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { ApiError } from '../../src/http/errors'
import type { ChatEvent, FinishReason, Usage } from '../../src/inference/canonical'
import { stopReason } from '../../src/inference/dialects/messages/encode'
import { MessagesStreamEncoder } from '../../src/inference/dialects/messages/encode-stream'

// The Messages stream encoder fed canonical events directly, and read back by the official SDK
// (through a fetch that answers with the encoder's frames), for the shapes the end-to-end tests
// cannot force from a backend: interleaved tool arguments, stop sequences, errors.

const usage: Usage = { inputTokens: 10, outputTokens: 5, webSearchRequests: 0, webFetchRequests: 0 }
const meta = { id: 'msg_unit', model: 'm', createdAt: 0, includeUsage: true, estimatedInputTokens: 7 }

function frames(events: ChatEvent[], end: { reason: FinishReason; stopSequence?: string } | { error: ApiError }): string {
  const encoder = new MessagesStreamEncoder(meta)
  let text = encoder.start().join('')
  for (const event of events) text += encoder.push(event).join('')
  text += ('error' in end ? encoder.fail(end.error) : encoder.finish(end.reason, usage, end.stopSequence)).join('')
  return text
}

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
  test('interleaved tool-call arguments (one backend streams two calls at once) still accumulate per block', async () => {
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
    const final = await sdkStream(body).finalMessage()
    expect(final.content).toEqual([
      { type: 'tool_use', id: 'call_a', name: 'f', input: { x: 1 } },
      { type: 'tool_use', id: 'call_b', name: 'g', input: { y: 2 } },
    ] as never)
    expect(final.stop_reason).toBe('tool_use')
    // message_start carried the estimate; message_delta the reported input, which wins.
    expect(final.usage).toMatchObject({ input_tokens: 10, output_tokens: 5 })
  })

  test('message_start reports a prompt size given up front as message_delta does: cache reads apart', async () => {
    // Anthropic's message_start said 50 input, 30 cache reads, 10 cache writes: canonically 90, 30 cached.
    const body = frames([{ type: 'response-start', id: 'up', model: 'u', createdAt: 0, inputTokens: 90, cachedInputTokens: 30 }], { reason: 'stop' })
    const start = JSON.parse(body.split('\n').find(line => line.startsWith('data: {"type":"message_start"'))!.slice(6))
    expect(start.message.usage).toMatchObject({ input_tokens: 60, cache_read_input_tokens: 30, output_tokens: 0 })
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
    expect(stopReason('stop', undefined)).toBe('end_turn')
    expect(stopReason('stop', 'END')).toBe('stop_sequence')
    expect(stopReason('length', undefined)).toBe('max_tokens')
    expect(stopReason('tool-calls', undefined)).toBe('tool_use')
    expect(stopReason('content-filter', undefined)).toBe('refusal')
    expect(stopReason('other', undefined)).toBe('end_turn')
  })
})
