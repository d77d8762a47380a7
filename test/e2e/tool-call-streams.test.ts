import { describe, expect, test } from 'bun:test'
import type Anthropic from '@anthropic-ai/sdk'
import type OpenAI from 'openai'
import { chunk, DONE, frame } from '../providers/openai-wire'
import { toolCallGateway, weatherTool } from './upstream-fixtures'

// Tool calls of a Chat Completions backend as Messages, Responses and Chat Completions clients
// (the official SDKs) stream them: arguments that are not a JSON object, parallel calls whose argument deltas the
// backend interleaves, and a Messages history carrying the `_raw_arguments` wrapper back.

const USAGE = { prompt_tokens: 9, completion_tokens: 20, total_tokens: 29 }
const served = toolCallGateway()

/** A Chat Completions answer that is one call of get_weather with `args`, whole and streamed (the arguments cut in two). */
function oneCall(args: string, finish: 'tool_calls' | 'length') {
  const whole = {
    id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'upstream-oa',
    choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_x', type: 'function', function: { name: 'get_weather', arguments: args } }] }, finish_reason: finish }],
    usage: USAGE,
  }
  const cut = Math.ceil(args.length / 2)
  const streamed = [
    chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_x', type: 'function', function: { name: 'get_weather', arguments: args.slice(0, cut) } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(cut) } }] }),
    chunk({}, finish),
    frame({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'upstream-oa', choices: [], usage: USAGE }),
    DONE,
  ].join('')
  return { whole, streamed }
}

/** Two parallel calls whose argument deltas the backend interleaves (legal: deltas carry the call's index). */
const interleaved = [
  chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":' } }] }),
  chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":' } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
  chunk({ tool_calls: [{ index: 1, function: { arguments: '"Paris"}' } }] }),
  chunk({}, 'tool_calls'),
  frame({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'upstream-oa', choices: [], usage: USAGE }),
  DONE,
].join('')

const messagesRequest = { model: 'oa', max_tokens: 100, messages: [{ role: 'user' as const, content: 'Weather?' }], tools: [weatherTool] }

describe('Messages stream of a Chat Completions backend: tool_use input as the non-streamed reply has it', () => {
  const cases = [
    { name: 'Python-style dict (small open models)', args: "{'city': 'Oslo'}", finish: 'tool_calls' as const },
    { name: 'a bare array', args: '["Oslo"]', finish: 'tool_calls' as const },
    { name: 'an object cut by a length stop', args: '{"city": "Os', finish: 'length' as const },
    { name: 'a valid object, with spacing', args: '{ "city" : "Oslo" }', finish: 'tool_calls' as const },
  ]
  for (const { name, args, finish } of cases) {
    test(name, async () => {
      const { whole, streamed } = oneCall(args, finish)
      served.openai.enqueue({ kind: 'json', body: whole }, { kind: 'sse', body: streamed })
      const plain = await served.gateway.anthropic.messages.create(messagesRequest)
      const stream = served.gateway.anthropic.messages.stream(messagesRequest)
      let partialJson = ''
      stream.on('streamEvent', event => {
        if (event.type === 'content_block_delta' && event.delta.type === 'input_json_delta') partialJson += event.delta.partial_json
      })
      const final = await stream.finalMessage()
      expect(final.content).toEqual(plain.content as never)
      const input = (plain.content[0] as Anthropic.ToolUseBlock).input
      expect(input).toEqual(args.startsWith('{ ') ? { city: 'Oslo' } : { _raw_arguments: args })
      // The deltas add up to the very JSON text of that object.
      expect(partialJson).toBe(JSON.stringify(input))
    })
  }
})

describe('a tool input nested deeper than a request may carry back (QA)', () => {
  const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)
  test('62 levels: the turn is answered wrapped, and the next request replays it (before: a 400 on the replay)', async () => {
    const { whole } = oneCall(nested(62), 'tool_calls')
    served.openai.enqueue({ kind: 'json', body: whole }, { kind: 'json', body: oneCall('{}', 'tool_calls').whole })
    const first = await served.gateway.anthropic.messages.create(messagesRequest)
    const use = first.content[0] as Anthropic.ToolUseBlock
    expect(use.input).toEqual({ _raw_arguments: nested(62) })
    const next = await served.gateway.anthropic.messages.create({
      ...messagesRequest,
      messages: [...messagesRequest.messages, { role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'done' }] }],
    })
    expect(next.stop_reason).toBe('tool_use')
  })

  test('50,000 levels, streamed and not: the input arrives wrapped (before: a charged 400, and a stream cut)', async () => {
    const { whole, streamed } = oneCall(nested(50_000), 'tool_calls')
    served.openai.enqueue({ kind: 'json', body: whole }, { kind: 'sse', body: streamed })
    const plain = await served.gateway.anthropic.messages.create(messagesRequest)
    expect((plain.content[0] as Anthropic.ToolUseBlock).input).toEqual({ _raw_arguments: nested(50_000) })
    const final = await served.gateway.anthropic.messages.stream(messagesRequest).finalMessage()
    expect(final.content).toEqual(plain.content as never)
  })
})

describe('parallel calls whose argument deltas a Chat Completions backend interleaves', () => {
  test('Messages: each block stops with its whole input, and no delta follows a stop', async () => {
    served.openai.enqueue({ kind: 'sse', body: interleaved })
    const stream = served.gateway.anthropic.messages.stream(messagesRequest)
    const stopped = new Set<number>()
    const late: number[] = []
    stream.on('streamEvent', event => {
      if (event.type === 'content_block_stop') stopped.add(event.index)
      if (event.type === 'content_block_delta' && stopped.has(event.index)) late.push(event.index)
    })
    const blocks: unknown[] = []
    stream.on('contentBlock', block => blocks.push((block as Anthropic.ToolUseBlock).input))
    const final = await stream.finalMessage()
    expect(late).toEqual([])
    expect(blocks).toEqual([{ city: 'Oslo' }, { city: 'Paris' }])
    expect(final.content.map(block => (block as Anthropic.ToolUseBlock).id)).toEqual(['call_a', 'call_b'])
  })

  // The SDK's stream helper takes a delta of another index as the end of the call before it and
  // parses a strict call's arguments there: interleaved, it threw "invalid structured output JSON".
  // Passed through as the upstream sent it, and re-encoded (an extra field makes the gateway
  // re-encode the stream from its first chunk).
  for (const [path, body] of [['passed through', interleaved], ['re-encoded', interleaved.replace('"system_fingerprint":', '"service_tier":"default","system_fingerprint":')]] as const) {
    test(`Chat Completions (${path}): each call's deltas are contiguous, in index order, and done carries its whole strict arguments`, async () => {
      served.openai.enqueue({ kind: 'sse', body })
      const parameters = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }
      const stream = served.gateway.openai.chat.completions.stream({
        model: 'oa',
        messages: [{ role: 'user', content: 'Weather in Oslo and Paris?' }],
        tools: [{ type: 'function', function: { name: 'get_weather', parameters, strict: true } }],
      })
      const indexes: number[] = []
      stream.on('chunk', chunk => indexes.push(...(chunk.choices[0]?.delta.tool_calls ?? []).map(call => call.index)))
      const done: unknown[] = []
      stream.on('tool_calls.function.arguments.done', event => done.push([event.index, event.arguments, event.parsed_arguments]))
      const final = await stream.finalChatCompletion()
      expect(indexes).toEqual([0, 0, 0, 1, 1, 1])
      expect(done).toEqual([
        [0, '{"city":"Oslo"}', { city: 'Oslo' }],
        [1, '{"city":"Paris"}', { city: 'Paris' }],
      ])
      expect(final.choices[0]!.message.tool_calls!.map(call => [call.id, call.type === 'function' && call.function.arguments])).toEqual([
        ['call_a', '{"city":"Oslo"}'],
        ['call_b', '{"city":"Paris"}'],
      ])
    })
  }

  test('Responses: every done event carries the whole arguments, and no delta follows an item done', async () => {
    served.openai.enqueue({ kind: 'sse', body: interleaved })
    const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', parameters: { type: 'object' }, strict: null }]
    const stream = served.gateway.openai.responses.stream({ model: 'oa', input: 'Weather?', tools })
    const done: Array<[string, string]> = []
    const closed = new Set<number>()
    const late: number[] = []
    stream.on('response.function_call_arguments.delta', event => {
      if (closed.has(event.output_index)) late.push(event.output_index)
    })
    stream.on('response.function_call_arguments.done', event => done.push(['arguments', event.arguments]))
    stream.on('response.output_item.done', event => {
      closed.add(event.output_index)
      done.push(['item', (event.item as OpenAI.Responses.ResponseFunctionToolCall).arguments])
    })
    const final = await stream.finalResponse()
    expect(late).toEqual([])
    expect(done).toEqual([
      ['arguments', '{"city":"Oslo"}'],
      ['item', '{"city":"Oslo"}'],
      ['arguments', '{"city":"Paris"}'],
      ['item', '{"city":"Paris"}'],
    ])
    expect(final.output.map(item => (item as OpenAI.Responses.ResponseFunctionToolCall).arguments)).toEqual(['{"city":"Oslo"}', '{"city":"Paris"}'])
  })
})

describe('a call whose backend sent no argument text (arguments: "") reaches every OpenAI client as "{}"', () => {
  // Some vLLM builds send `arguments: ""` for a call without parameters (vllm-project/vllm#21301).
  // Before: passed on as "", and the SDK's helpers threw "invalid structured output JSON" parsing
  // a strict call's arguments (an Anthropic backend's empty input was already "{}").
  const { whole, streamed } = oneCall('', 'tool_calls')
  const parameters = { type: 'object', properties: {}, required: [], additionalProperties: false }
  const chatRequest = { model: 'oa', messages: [{ role: 'user' as const, content: 'Weather?' }], tools: [{ type: 'function' as const, function: { name: 'get_weather', parameters, strict: true } }] }
  const streams = [['passed through', streamed], ['re-encoded', streamed.replaceAll('"system_fingerprint":', '"service_tier":"default","system_fingerprint":')]] as const

  for (const [path, body] of streams) {
    test(`Chat Completions, streamed (${path})`, async () => {
      served.openai.enqueue({ kind: 'sse', body })
      const message = await served.gateway.openai.chat.completions.stream(chatRequest).finalMessage()
      const call = message.tool_calls![0] as OpenAI.Chat.ParsedFunctionToolCall
      expect([call.function.arguments, call.function.parsed_arguments]).toEqual(['{}', {}])
    })
  }

  test('an Anthropic backend whose tool input was whitespace alone: " {}" too (regression QA)', async () => {
    const event = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
    const body =
      event('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'upstream-an', content: [], stop_reason: null, usage: { input_tokens: 9, output_tokens: 1 } } }) +
      event('content_block_start', { index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} } }) +
      event('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: ' ' } }) +
      event('content_block_stop', { index: 0 }) +
      event('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 5 } }) +
      event('message_stop', {})
    served.anthropic.enqueue({ kind: 'sse', body })
    const message = await served.gateway.openai.chat.completions.stream({ ...chatRequest, model: 'an' }).finalMessage()
    const call = message.tool_calls![0] as OpenAI.Chat.ParsedFunctionToolCall
    expect([call.function.arguments, call.function.parsed_arguments]).toEqual([' {}', {}])
  })

  test('whitespace alone is no argument text either: " " reaches the client as " {}" (review)', async () => {
    served.openai.enqueue({ kind: 'sse', body: oneCall(' ', 'tool_calls').streamed })
    const message = await served.gateway.openai.chat.completions.stream(chatRequest).finalMessage()
    const call = message.tool_calls![0] as OpenAI.Chat.ParsedFunctionToolCall
    expect([call.function.arguments, call.function.parsed_arguments]).toEqual([' {}', {}])
  })

  test('Chat Completions, collected', async () => {
    served.openai.enqueue({ kind: 'json', body: whole })
    const call = (await served.gateway.openai.chat.completions.parse(chatRequest)).choices[0]!.message.tool_calls![0] as OpenAI.Chat.ParsedFunctionToolCall
    expect([call.function.arguments, call.function.parsed_arguments]).toEqual(['{}', {}])
  })

  test('Responses, streamed and collected', async () => {
    served.openai.enqueue({ kind: 'sse', body: streamed }, { kind: 'json', body: whole })
    const request = { model: 'oa', input: 'Weather?', tools: [{ type: 'function' as const, name: 'get_weather', parameters, strict: true }] }
    const final = await served.gateway.openai.responses.stream(request).finalResponse()
    const parsed = await served.gateway.openai.responses.parse(request)
    for (const response of [final, parsed]) {
      const call = response.output[0] as OpenAI.Responses.ParsedResponseFunctionToolCall
      expect([call.type, call.arguments, call.parsed_arguments]).toEqual(['function_call', '{}', {}])
    }
  })
})

test('a Messages history with input {_raw_arguments: text}: a Chat Completions backend gets the text the model wrote, an Anthropic one the same input', async () => {
  const raw = "{'city': 'Oslo'}"
  const history = (id: string): Anthropic.MessageCreateParamsNonStreaming => ({
    model: id,
    max_tokens: 10,
    tools: [weatherTool],
    messages: [
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'call_x', name: 'get_weather', input: { _raw_arguments: raw } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_x', content: 'bad arguments' }] },
    ],
  })
  served.openai.enqueue({ kind: 'json', body: { id: 'c', object: 'chat.completion', created: 1, model: 'upstream-oa', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: USAGE } })
  served.anthropic.enqueue({ kind: 'json', body: { id: 'msg_1', type: 'message', role: 'assistant', model: 'upstream-an', content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 9, output_tokens: 1 } } })
  await served.gateway.anthropic.messages.create(history('oa'))
  await served.gateway.anthropic.messages.create(history('an'))
  expect(served.openai.requests.at(-1)!.body.messages[1].tool_calls).toEqual([{ id: 'call_x', type: 'function', function: { name: 'get_weather', arguments: raw } }])
  expect(served.anthropic.requests.at(-1)!.body.messages[1].content).toEqual([{ type: 'tool_use', id: 'call_x', name: 'get_weather', input: { _raw_arguments: raw } }])
  // Another object stays as it is, even with the key among others.
  served.openai.enqueue({ kind: 'json', body: { id: 'c', object: 'chat.completion', created: 1, model: 'upstream-oa', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: USAGE } })
  const mixed = history('oa')
  ;(mixed.messages[1]!.content as Anthropic.ToolUseBlockParam[])[0]!.input = { _raw_arguments: raw, city: 'Oslo' }
  await served.gateway.anthropic.messages.create(mixed)
  expect(served.openai.requests.at(-1)!.body.messages[1].tool_calls[0].function.arguments).toBe(JSON.stringify({ _raw_arguments: raw, city: 'Oslo' }))
})
