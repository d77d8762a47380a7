import { expect, test } from 'bun:test'
import type { TurnScript } from '../providers/conformance'
import { openAIWire } from '../providers/openai-wire'
import { toolCallGateway, weatherTool } from './upstream-fixtures'

// A tool result sent as several text parts reaches the backend as one text, the parts joined by
// a newline, whichever format the client spoke. Before, Chat Completions and Responses joined
// them with nothing ("18 °CWind: calm") and Messages with a newline.

const served = toolCallGateway()
const turn: TurnScript = { text: 'Mild and calm.', finish: 'stop', usage: { inputTokens: 30, outputTokens: 4 } }
const PARTS = ['Oslo: 18 °C', 'Wind: calm']
const ARGS = '{"city":"Oslo"}'

/** The tool message the backend received in the last request. */
const sentResult = async () => {
  const request = await served.openai.request(served.openai.requests.length - 1)
  return request.body.messages.find((message: { role: string }) => message.role === 'tool')
}

const expected = { role: 'tool', tool_call_id: 'call_1', content: PARTS.join('\n') }

test('Chat Completions: text parts joined by a newline', async () => {
  served.openai.enqueue({ kind: 'sse', body: openAIWire.stream(turn) })
  await served.gateway.openai.chat.completions.create({
    model: 'oa',
    messages: [
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: ARGS } }] },
      { role: 'tool', tool_call_id: 'call_1', content: PARTS.map(text => ({ type: 'text' as const, text })) },
    ],
  })
  expect(await sentResult()).toEqual(expected)
})

test('Responses: input_text parts joined by a newline', async () => {
  served.openai.enqueue({ kind: 'sse', body: openAIWire.stream(turn) })
  await served.gateway.openai.responses.create({
    model: 'oa',
    input: [
      { role: 'user', content: 'Weather in Oslo?' },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: ARGS },
      { type: 'function_call_output', call_id: 'call_1', output: PARTS.map(text => ({ type: 'input_text' as const, text })) },
    ],
  })
  expect(await sentResult()).toEqual(expected)
})

test('Messages: text blocks joined by a newline, as before', async () => {
  served.openai.enqueue({ kind: 'sse', body: openAIWire.stream(turn) })
  await served.gateway.anthropic.messages.create({
    model: 'oa',
    max_tokens: 100,
    tools: [weatherTool],
    messages: [
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Oslo' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: PARTS.map(text => ({ type: 'text' as const, text })) }] },
    ],
  })
  expect(await sentResult()).toEqual(expected)
})

test('an empty part adds no line (before: ["a", ""] reached the backend as "a\\n")', async () => {
  served.openai.enqueue({ kind: 'sse', body: openAIWire.stream(turn) })
  await served.gateway.openai.chat.completions.create({
    model: 'oa',
    messages: [
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: ARGS } }] },
      { role: 'tool', tool_call_id: 'call_1', content: ['', PARTS[0]!, '', PARTS[1]!, ''].map(text => ({ type: 'text' as const, text })) },
    ],
  })
  expect(await sentResult()).toEqual(expected)
  served.openai.enqueue({ kind: 'sse', body: openAIWire.stream(turn) })
  await served.gateway.openai.responses.create({
    model: 'oa',
    input: [
      { role: 'user', content: 'Weather in Oslo?' },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: ARGS },
      { type: 'function_call_output', call_id: 'call_1', output: [PARTS[0]!, ''].map(text => ({ type: 'input_text' as const, text })) },
    ],
  })
  expect(await sentResult()).toEqual({ ...expected, content: PARTS[0] })
})
