import { describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import type { TurnScript } from '../providers/conformance'
import { claudeModelLine, strictUpstreamsSuite } from '../support/strict-anthropic'

// Requests every client dialect may send that Anthropic itself refuses with its own 400. Stop
// sequences made only of whitespace have no Anthropic equivalent: the gateway's 400 naming the
// field, before any upstream call and without a charge. A prefill ending in whitespace is sent
// without it (the model continues the same text), and a tool history without `tools` has a
// faithful equivalent (the history's tools declared, none callable).

const CREDIT = 10_000_000_000n

const turn: TurnScript = { text: 'It was 18 °C in Paris.', finish: 'stop', usage: { inputTokens: 40, outputTokens: 9 } }
const DECLARED = { tools: [{ name: 'get_weather', input_schema: { type: 'object' } }], tool_choice: { type: 'none' } }

describe('Anthropic backend: whitespace stop sequences, trailing prefill whitespace and tool history without tools, from every dialect', () => {
  const s = strictUpstreamsSuite(turn, [claudeModelLine('m', '[{ provider: claude, model: claude-sonnet-4-5 }]')], { credit: CREDIT })
  const charged = async () => CREDIT - (await s.t.deps.balance(s.orgId)).prepaidNanos

  test('a whitespace-only stop sequence: 400 naming it and the field, no upstream call, nothing charged', async () => {
    const before = await charged()
    const chat = await s.openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'One line please.' }], stop: '\n' }).catch(error => error)
    expect(chat).toBeInstanceOf(OpenAI.BadRequestError)
    expect(chat.message).toMatch(/stop sequences made only of whitespace \("\\n" in stop \/ stop_sequences\)/)
    expect(chat.param).toBe('stop')
    const streamed = await s.openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], stop: ['END', '\n\n'], stream: true }).catch(error => error)
    expect(streamed).toBeInstanceOf(OpenAI.BadRequestError)
    const messages = await s.anthropic.messages.create({ model: 'm', max_tokens: 100, stop_sequences: ['END', ' \t'], messages: [{ role: 'user', content: 'x' }] }).catch(error => error)
    expect(messages).toBeInstanceOf(Anthropic.BadRequestError)
    expect(messages.error.error.message).toMatch(/whitespace \(" \\t" in stop \/ stop_sequences\)/)
    expect(s.claude.received).toHaveLength(0)
    expect(await charged()).toBe(before)
    // No upstream call was made: none is counted, as a failure or otherwise.
    expect(s.t.deps.metrics.registry.render().split('\n').filter(line => line.startsWith('svc_upstream_') && line.includes('anthropic:'))).toEqual([])
  })

  test('an empty stop sequence stops nothing: dropped, the others sent', async () => {
    const completion = await s.openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], stop: ['', 'END'] })
    expect(completion.choices[0]!.message.content).toBe(turn.text!)
    expect(s.claude.received[0]!.body.stop_sequences).toEqual(['END'])
  })

  test('a prefill ending in whitespace is sent without it (Anthropic refuses it there), from Chat Completions and Messages', async () => {
    // Before: sent as is, and Anthropic answered 400 "final assistant content cannot end with
    // trailing whitespace" (not a fault another backend is tried for).
    const completion = await s.openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'Sure, here is ' }] })
    expect(completion.choices[0]!.message.content).toBe(turn.text!)
    const message = await s.anthropic.messages.create({
      model: 'm',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'text', text: 'Step 1:' }, { type: 'text', text: 'then\n\n' }] }],
    })
    expect(message.content).toMatchObject([{ type: 'text', text: turn.text }])
    expect(s.claude.received.map(received => received.body.messages.at(-1))).toEqual([
      { role: 'assistant', content: [{ type: 'text', text: 'Sure, here is' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Step 1:' }, { type: 'text', text: 'then' }] },
    ])
    // An assistant turn the conversation does not end with keeps its text as written.
    await s.openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'Sure. ' }, { role: 'user', content: 'y' }] })
    expect(s.claude.received[2]!.body.messages[1]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'Sure. ' }] })
  })

  test('Chat Completions: a tool history without tools declares the history\'s tools, none callable', async () => {
    const completion = await s.openai.chat.completions.create({
      model: 'm',
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '18 °C' },
        { role: 'user', content: 'Summarize that.' },
      ],
    })
    expect(completion.choices[0]!.message.content).toBe(turn.text!)
    expect(s.claude.received[0]!.body).toMatchObject(DECLARED)
  })

  test('Responses: function_call items without tools, the same', async () => {
    const response = await s.openai.responses.create({
      model: 'm',
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: 'call_1', output: '18 °C' },
      ],
    })
    expect(response.output_text).toBe(turn.text!)
    expect(s.claude.received[0]!.body).toMatchObject(DECLARED)
  })

  test('Messages: tool_use / tool_result without tools, the same, on create and count_tokens', async () => {
    const history: Anthropic.MessageParam[] = [
      { role: 'user', content: 'Weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Rome' } },
          { type: 'tool_use', id: 'toolu_3', name: 'get_time', input: {} },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: '18 °C' },
          { type: 'tool_result', tool_use_id: 'toolu_2', content: '24 °C' },
          { type: 'tool_result', tool_use_id: 'toolu_3', content: '12:00' },
        ],
      },
    ]
    const message = await s.anthropic.messages.create({ model: 'm', max_tokens: 100, messages: history })
    expect(message.content).toMatchObject([{ type: 'text', text: turn.text }])
    const tools = [
      { name: 'get_weather', input_schema: { type: 'object' } },
      { name: 'get_time', input_schema: { type: 'object' } },
    ]
    expect(s.claude.received[0]!.body).toMatchObject({ tools, tool_choice: { type: 'none' } })
    const counted = await s.anthropic.messages.countTokens({ model: 'm', messages: history })
    expect(counted.input_tokens).toBe(42)
    expect(s.claude.received[1]!.body).toMatchObject({ tools, tool_choice: { type: 'none' } })
  })
})
