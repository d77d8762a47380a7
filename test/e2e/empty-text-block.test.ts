import { expect, test } from 'bun:test'
import type OpenAI from 'openai'
import { oneModelGateway } from '../support/gateway'
import { weatherTool } from './upstream-fixtures'

// Claude at times writes an empty text block before a tool_use, and Anthropic's reply keeps it,
// streamed or not. Each client format (the official SDKs) sees the same content streamed and
// not: a Messages client the empty block in both (a stream starts a block before its text is
// known, and the pass-through sends the upstream's events as they are), a Responses client no
// empty message item in either (OpenAI sends none; a message item opens at its first text).

const event = (data: { type: string } & Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`
const ARGS = '{"city":"Oslo"}'
const message = (content: unknown[]) => ({ id: 'msg_1', type: 'message', role: 'assistant', model: 'upstream-an', content, stop_reason: 'tool_use', stop_sequence: null, usage: { input_tokens: 30, output_tokens: 9 } })

/** Empty text, a tool_use, then text: the Anthropic stream and its non-streamed reply. */
const streamed = [
  event({ type: 'message_start', message: message([]) }),
  event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
  event({ type: 'content_block_stop', index: 0 }),
  event({ type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_e', name: 'get_weather', input: {} } }),
  event({ type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '' } }),
  event({ type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: ARGS } }),
  event({ type: 'content_block_stop', index: 1 }),
  event({ type: 'content_block_start', index: 2, content_block: { type: 'text', text: '' } }),
  event({ type: 'content_block_delta', index: 2, delta: { type: 'text_delta', text: 'after' } }),
  event({ type: 'content_block_stop', index: 2 }),
  event({ type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 9 } }),
  event({ type: 'message_stop' }),
].join('')
const whole = message([{ type: 'text', text: '' }, { type: 'tool_use', id: 'toolu_e', name: 'get_weather', input: { city: 'Oslo' } }, { type: 'text', text: 'after' }])

const served = oneModelGateway('anthropic', 'context_length: 16384, max_output_tokens: 4096, capabilities: { tools: true }')

test('Messages: the empty text block is kept, streamed and not, as Anthropic answers', async () => {
  served.upstream.enqueue({ kind: 'json', body: whole }, { kind: 'sse', body: streamed })
  const request = { model: 'm', max_tokens: 100, messages: [{ role: 'user' as const, content: 'Weather?' }], tools: [weatherTool] }
  const plain = await served.gateway.anthropic.messages.create(request)
  const final = await served.gateway.anthropic.messages.stream(request).finalMessage()
  expect(plain.content).toEqual([{ type: 'text', text: '' }, { type: 'tool_use', id: 'toolu_e', name: 'get_weather', input: { city: 'Oslo' } }, { type: 'text', text: 'after' }] as never)
  expect(final.content).toEqual(plain.content as never)
})

test('Responses: no empty message item before the function_call, streamed and not', async () => {
  served.upstream.enqueue({ kind: 'json', body: whole }, { kind: 'sse', body: streamed })
  const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', parameters: { type: 'object' }, strict: null }]
  // Item ids differ per response; the stream helper adds its parsed fields.
  const comparable = (output: unknown[]) => JSON.parse(JSON.stringify(output, (key, value) => (['id', 'parsed', 'parsed_arguments'].includes(key) ? undefined : value)))
  const plain = await served.gateway.openai.responses.create({ model: 'm', input: 'Weather?', tools })
  const stream = served.gateway.openai.responses.stream({ model: 'm', input: 'Weather?', tools })
  const added: string[] = []
  stream.on('response.output_item.added', event => added.push(`${event.output_index}:${event.item.type}`))
  const final = await stream.finalResponse()
  expect(plain.output.map(item => item.type)).toEqual(['function_call', 'message'])
  expect((plain.output[0] as OpenAI.Responses.ResponseFunctionToolCall).arguments).toBe(ARGS)
  expect(plain.output_text).toBe('after')
  expect(added).toEqual(['0:function_call', '1:message'])
  expect(comparable(final.output)).toEqual(comparable(plain.output))
})
