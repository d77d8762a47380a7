import { describe, expect, test } from 'bun:test'
import type OpenAI from 'openai'
import { anthropicWire } from '../providers/anthropic-wire'
import { oneModelGateway } from '../support/gateway'
import { weatherTool } from './upstream-fixtures'

// The official openai SDK in front of an Anthropic upstream: tool ids and thinking across
// Chat Completions turns (the other direction of messages-upstreams.test.ts).

describe('openai SDK → gateway → Anthropic backend (the reverse direction)', () => {
  const served = oneModelGateway('anthropic', 'context_length: 16384, max_output_tokens: 4096, capabilities: { tools: true, reasoning: true }')

  test('tool ids survive both ways; a thinking signature cannot ride Chat Completions, so thinking is not replayed unsigned', async () => {
    const { upstream, gateway: { openai } } = served
    const call = { callId: 'toolu_01Reverse', name: 'get_weather', arguments: '{"city":"Oslo"}' }
    upstream.enqueue(
      { kind: 'sse', body: anthropicWire.stream({ reasoning: { text: 'Use the tool.', signature: 'sig-r' }, toolCalls: [call], finish: 'tool-calls', usage: { inputTokens: 40, outputTokens: 20 } }) },
      { kind: 'sse', body: anthropicWire.stream({ text: 'Cold: -3 °C.', finish: 'stop', usage: { inputTokens: 70, outputTokens: 6 } }) },
    )
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'get_weather', parameters: weatherTool.input_schema as Record<string, unknown> } }]
    const question: OpenAI.ChatCompletionMessageParam = { role: 'user', content: 'Weather in Oslo?' }
    const first = await openai.chat.completions.create({ model: 'm', messages: [question], tools, reasoning_effort: 'low' })
    const message = first.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string }
    expect(first.choices[0]!.finish_reason).toBe('tool_calls')
    expect(message.reasoning_content).toBe('Use the tool.')
    expect(message.tool_calls![0]!.id).toBe(call.callId)

    const assistant = { role: 'assistant', content: null, tool_calls: message.tool_calls, reasoning_content: message.reasoning_content } as OpenAI.ChatCompletionAssistantMessageParam
    const second = await openai.chat.completions.create({
      model: 'm',
      messages: [question, assistant, { role: 'tool', tool_call_id: call.callId, content: '-3 °C' }],
      tools,
      reasoning_effort: 'low',
    })
    expect(second.choices[0]!.message.content).toBe('Cold: -3 °C.')
    const replay = upstream.requests[1]!.body
    expect(replay.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Oslo?' }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: call.callId, name: call.name, input: { city: 'Oslo' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.callId, content: '-3 °C' }] },
    ])
    // Anthropic rejects a thinking request whose continued tool turn lacks its signed thinking.
    expect(replay.thinking).toBeUndefined()
  })
})
