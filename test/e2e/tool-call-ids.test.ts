import { describe, expect, test } from 'bun:test'
import type Anthropic from '@anthropic-ai/sdk'
import type OpenAI from 'openai'
import { anthropicWire } from '../providers/anthropic-wire'
import { chunk, DONE } from '../providers/openai-wire'
import type { FakeUpstream } from '../support/fake-upstream'
import { toolCallGateway, weatherTool } from './upstream-fixtures'

// The tool calls of one answer as every client (the official SDKs) gets them, when a backend
// repeats an id within the answer (some number each call `call_0`) or sends a second whole call
// at the same index without any id (Ollama): each call its own id and name, so each result pairs.

const USAGE = { prompt_tokens: 9, completion_tokens: 20, total_tokens: 29 }
const served = toolCallGateway()

const OSLO = '{"city":"Oslo"}'
const CET = '{"tz":"CET"}'
const NAMES = ['get_weather', 'get_time']
const tools: OpenAI.Chat.ChatCompletionTool[] = NAMES.map(name => ({ type: 'function', function: { name, parameters: { type: 'object' } } }))
const responsesTools: OpenAI.Responses.Tool[] = NAMES.map(name => ({ type: 'function', name, parameters: { type: 'object' }, strict: null }))
const messagesTools: Anthropic.Tool[] = [weatherTool, { name: 'get_time', input_schema: { type: 'object' } }]

/** A Chat Completions stream of these tool-call deltas, one chunk each, then the finish, usage and [DONE]. */
function callStream(calls: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}): string {
  const chunks = calls.map((call, at) => chunk({ ...(at === 0 ? { role: 'assistant' } : {}), tool_calls: [call] }, null, extra))
  return [...chunks, chunk({}, 'tool_calls', extra), chunk({}, null, { choices: [], usage: USAGE }), DONE].join('')
}

/** Two calls, at index 0 and 1, both with the id `call_0`. */
const repeatedId = (extra: Record<string, unknown> = {}) =>
  callStream(
    [
      { index: 0, id: 'call_0', type: 'function', function: { name: 'get_weather', arguments: OSLO } },
      { index: 1, id: 'call_0', type: 'function', function: { name: 'get_time', arguments: CET } },
    ],
    extra,
  )

/** Two whole calls at one index (`index` 0, or none as older Ollama builds), the second without an id; `firstId` for the first. */
const sameIndex = (index: Record<string, unknown>, firstId?: string) =>
  callStream([
    { ...index, ...(firstId !== undefined ? { id: firstId, type: 'function' } : {}), function: { name: 'get_weather', arguments: OSLO } },
    { ...index, function: { name: 'get_time', arguments: CET } },
  ])

/** What a client got: each call's id, name and arguments. */
type Call = [string, string, string]

function expectTwoCalls(calls: Call[], firstId?: string): void {
  expect(calls.map(([, name, args]) => [name, args])).toEqual([
    ['get_weather', OSLO],
    ['get_time', CET],
  ])
  expect(new Set(calls.map(([id]) => id)).size).toBe(2)
  if (firstId !== undefined) expect(calls[0]![0]).toBe(firstId)
}

async function chatStreamCalls(body: string): Promise<Call[]> {
  served.openai.enqueue({ kind: 'sse', body })
  const final = await served.gateway.openai.chat.completions.stream({ model: 'oa', messages: [{ role: 'user', content: 'Weather and time?' }], tools }).finalChatCompletion()
  return final.choices[0]!.message.tool_calls!.map(call => [call.id, call.type === 'function' ? call.function.name : '', call.type === 'function' ? call.function.arguments : ''])
}

async function responsesCalls(upstream: FakeUpstream, body: string, modelId = 'oa'): Promise<Call[]> {
  upstream.enqueue({ kind: 'sse', body })
  const final = await served.gateway.openai.responses.stream({ model: modelId, input: 'Weather and time?', tools: responsesTools }).finalResponse()
  return final.output.map(item => item as OpenAI.Responses.ResponseFunctionToolCall).map(call => [call.call_id, call.name, call.arguments])
}

async function messagesCalls(upstream: FakeUpstream, body: string, modelId = 'oa'): Promise<Call[]> {
  upstream.enqueue({ kind: 'sse', body })
  const final = await served.gateway.anthropic.messages.stream({ model: modelId, max_tokens: 100, messages: [{ role: 'user', content: 'Weather and time?' }], tools: messagesTools }).finalMessage()
  return final.content.map(block => block as Anthropic.ToolUseBlock).map(block => [block.id, block.name, JSON.stringify(block.input)])
}

describe('a Chat Completions backend repeats a call id within one answer', () => {
  test('Responses: the stream helper takes the calls (it threw "duplicate output item identity"), the second with an id of its own', async () => {
    expectTwoCalls(await responsesCalls(served.openai, repeatedId()), 'call_0')
  })

  test('Chat Completions, passed through and re-encoded (an extra field), and Messages: two ids', async () => {
    expectTwoCalls(await chatStreamCalls(repeatedId()), 'call_0')
    expectTwoCalls(await chatStreamCalls(repeatedId({ service_tier: 'default' })), 'call_0')
    expectTwoCalls(await messagesCalls(served.openai, repeatedId()), 'call_0')
  })

  test('a collected answer (not streamed), the same', async () => {
    const message = {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'call_0', type: 'function', function: { name: 'get_weather', arguments: OSLO } },
        { id: 'call_0', type: 'function', function: { name: 'get_time', arguments: CET } },
      ],
    }
    served.openai.enqueue({ kind: 'json', body: { id: 'c', object: 'chat.completion', created: 1, model: 'upstream-oa', choices: [{ index: 0, message, finish_reason: 'tool_calls' }], usage: USAGE } })
    const completion = await served.gateway.openai.chat.completions.create({ model: 'oa', messages: [{ role: 'user', content: 'Weather and time?' }], tools })
    const calls = completion.choices[0]!.message.tool_calls!.map((call): Call => [call.id, call.type === 'function' ? call.function.name : '', call.type === 'function' ? call.function.arguments : ''])
    expectTwoCalls(calls, 'call_0')
  })
})

describe('a Chat Completions backend sends a second whole call at the same index without an id', () => {
  for (const [label, index] of [['index 0', { index: 0 }], ['no index', {}]] as const) {
    test(`${label}: every client gets two calls, each with its name and arguments`, async () => {
      expectTwoCalls(await chatStreamCalls(sameIndex(index)))
      expectTwoCalls(await responsesCalls(served.openai, sameIndex(index)))
      expectTwoCalls(await messagesCalls(served.openai, sameIndex(index)))
    })
  }

  test('after a call the Chat Completions stream passed through (it had an id), the same', async () => {
    expectTwoCalls(await chatStreamCalls(sameIndex({ index: 0 }, 'call_a')), 'call_a')
  })
})

describe('a backend repeating the call\'s name (and id) in every delta writes one call (QA: a regression gave a phantom second)', () => {
  const once = (calls: Call[]) => expect(calls.map(([, name, args]) => [name, JSON.parse(args)])).toEqual([['get_weather', { city: 'Oslo' }]])
  // The id and name on every delta, then an empty one (before the fix: a second get_weather with "").
  const withId = callStream(['', '{"city":', '"Oslo"}', ''].map(args => ({ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: args } })))
  // No id, the name on every delta (vLLM's named tool choice), then a newline (before: a second call of "\n").
  const withoutId = callStream(['{"city":', '"Oslo"}', '\n'].map(args => ({ index: 0, function: { name: 'get_weather', arguments: args } })))
  for (const [label, body] of [['with its id', withId], ['without an id', withoutId]] as const) {
    test(`${label}: every client gets one call`, async () => {
      once(await chatStreamCalls(body))
      once(await responsesCalls(served.openai, body))
      once(await messagesCalls(served.openai, body))
    })
  }
})

test('an Anthropic-compatible backend repeating a tool_use id: Messages (deltas passed through) and Responses clients get two ids', async () => {
  const turn = {
    toolCalls: [
      { callId: 'toolu_0', name: 'get_weather', arguments: OSLO },
      { callId: 'toolu_0', name: 'get_time', arguments: CET },
    ],
    finish: 'tool-calls' as const,
    usage: { inputTokens: 9, outputTokens: 20 },
  }
  expectTwoCalls(await messagesCalls(served.anthropic, anthropicWire.stream(turn), 'an'), 'toolu_0')
  expectTwoCalls(await responsesCalls(served.anthropic, anthropicWire.stream(turn), 'an'), 'toolu_0')
})

describe('a Chat Completions backend sends the id and name after the call\'s first delta, at the same index', () => {
  // Before, the late id started another call: c1/get_weather with the rest of the arguments and a
  // call with an empty name holding their start.
  const once = (calls: Call[]) => expect(calls).toEqual([['c1', 'get_weather', OSLO]])
  const emptyFirst = callStream([
    { index: 0, type: 'function', function: { arguments: '' } },
    { index: 0, id: 'c1', function: { name: 'get_weather', arguments: OSLO } },
  ])
  const argumentsFirst = callStream([
    { index: 0, function: { arguments: '{"city":' } },
    { index: 0, id: 'c1', function: { name: 'get_weather', arguments: '"Oslo"}' } },
  ])
  for (const [label, body] of [['an empty first delta', emptyFirst], ['the start of the arguments first', argumentsFirst]] as const) {
    test(`${label}: every client gets one call, with that id and name and the whole arguments`, async () => {
      once(await chatStreamCalls(body))
      once(await responsesCalls(served.openai, body))
      once(await messagesCalls(served.openai, body))
    })
  }
})
