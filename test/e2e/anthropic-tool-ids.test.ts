import { describe, expect, test } from 'bun:test'
import type Anthropic from '@anthropic-ai/sdk'
import type { TurnScript } from '../providers/conformance'
import { claudeModelLine, strictUpstreamsSuite } from '../support/strict-anthropic'

// A history whose tool call ids repeat across turns (Kimi numbers its calls afresh in each one:
// `functions.get_weather:0` every time) is valid on OpenAI's wire, where a tool message answers
// the assistant turn just before it; Anthropic refuses it ("tool_use ids must be unique"). The
// strict upstream refuses it as Anthropic does, and checks that every result still pairs.

const turn: TurnScript = { text: 'Oslo then Paris.', finish: 'stop', usage: { inputTokens: 40, outputTokens: 5 } }
const KIMI_ID = 'functions.get_weather:0'
const weather = { type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }

/** The tool_use ids the upstream got, and each tool_result's id with the ids of the turn before it. */
function upstreamToolIds(body: any): { calls: string[]; pairs: Array<[string, string[]]> } {
  const calls: string[] = []
  const pairs: Array<[string, string[]]> = []
  body.messages.forEach((message: any, at: number) => {
    for (const block of message.content) {
      if (block.type === 'tool_use') calls.push(block.id)
      if (block.type === 'tool_result') pairs.push([block.tool_use_id, body.messages[at - 1].content.filter((call: any) => call.type === 'tool_use').map((call: any) => call.id)])
    }
  })
  return { calls, pairs }
}

function expectUniqueAndPaired(body: any, results: number): void {
  const { calls, pairs } = upstreamToolIds(body)
  expect(new Set(calls).size).toBe(calls.length)
  for (const id of calls) expect(id).toMatch(/^[a-zA-Z0-9_-]+$/)
  expect(pairs).toHaveLength(results)
  for (const [id, before] of pairs) expect(before).toContain(id)
}

describe('Anthropic backend: tool call ids repeated across turns', () => {
  const s = strictUpstreamsSuite(turn, [claudeModelLine('m', '[{ provider: claude, model: claude-sonnet-4-5 }]')])

  test('Chat Completions: two turns calling with the same Kimi id are sent with unique ids, each result with its call', async () => {
    const completion = await s.openai.chat.completions.create({
      model: 'm',
      tools: [weather],
      messages: [
        { role: 'user', content: 'Weather in Oslo, then Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: KIMI_ID, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: KIMI_ID, content: '3 °C' },
        { role: 'assistant', content: null, tool_calls: [{ id: KIMI_ID, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: KIMI_ID, content: '18 °C' },
      ],
    })
    expect(completion.choices[0]!.message.content).toBe(turn.text!)
    const body = s.claude.received[0]!.body
    expectUniqueAndPaired(body, 2)
    // Each result still answers its own call: Oslo's 3 °C the first, Paris's 18 °C the second.
    expect(body.messages[2].content[0]).toMatchObject({ type: 'tool_result', tool_use_id: body.messages[1].content[0].id, content: '3 °C' })
    expect(body.messages[4].content[0]).toMatchObject({ type: 'tool_result', tool_use_id: body.messages[3].content[0].id, content: '18 °C' })
  })

  test('Responses: function_call / function_call_output items, the same', async () => {
    const response = await s.openai.responses.create({
      model: 'm',
      tools: [{ type: 'function', name: 'get_weather', parameters: weather.function.parameters, strict: false }],
      input: [
        { role: 'user', content: 'Weather in Oslo, then Paris?' },
        { type: 'function_call', call_id: KIMI_ID, name: 'get_weather', arguments: '{"city":"Oslo"}' },
        { type: 'function_call_output', call_id: KIMI_ID, output: '3 °C' },
        { type: 'function_call', call_id: KIMI_ID, name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: KIMI_ID, output: '18 °C' },
      ],
    })
    expect(response.output_text).toBe(turn.text!)
    expectUniqueAndPaired(s.claude.received[0]!.body, 2)
  })

  test('Messages: tool_use ids repeated across turns, and within one, on create and count_tokens', async () => {
    const history: Anthropic.MessageParam[] = [
      { role: 'user', content: 'Weather in Oslo, then Paris and Rome?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_0', name: 'get_weather', input: { city: 'Oslo' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_0', content: '3 °C' }] },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'toolu_0', name: 'get_weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'toolu_0', name: 'get_weather', input: { city: 'Rome' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_0', content: '18 °C' },
          { type: 'tool_result', tool_use_id: 'toolu_0', content: '24 °C' },
        ],
      },
    ]
    const tools: Anthropic.Tool[] = [{ name: 'get_weather', input_schema: { type: 'object' } }]
    const message = await s.anthropic.messages.create({ model: 'm', max_tokens: 100, tools, messages: history })
    expect(message.content).toMatchObject([{ type: 'text', text: turn.text }])
    const body = s.claude.received[0]!.body
    expectUniqueAndPaired(body, 3)
    // The n-th result with a repeated id answers the n-th call that had it.
    expect(body.messages[4].content.map((block: any) => block.tool_use_id)).toEqual(body.messages[3].content.map((block: any) => block.id))
    expect(body.messages[1].content[0].id).toBe('toolu_0') // the first use keeps its id
    expect((await s.anthropic.messages.countTokens({ model: 'm', tools, messages: history })).input_tokens).toBe(42)
    expectUniqueAndPaired(s.claude.received[1]!.body, 3)
  })
})
