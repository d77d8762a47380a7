import { describe, expect, test } from 'bun:test'
import type { Message } from '../../src/inference/canonical'
import { RAW_ARGUMENTS_KEY, toUpstream, UnsupportedRequestError } from '../../src/providers/anthropic/to-upstream'
import { chat, SIGNATURE, weatherTool } from '../support/anthropic-to-upstream'
import { CLAUDE_MODEL as MODEL } from './anthropic-wire'

// The Anthropic request body for a conversation's history: thinking and tool calls replayed,
// tool ids respelled, and the turns Anthropic refuses kept from it.

describe('anthropic toUpstream: exact bodies', () => {

  test('thinking is replayed before tool_use across a tool round trip; tool results merge into one user turn first', () => {
    const messages: Message[] = [
      { role: 'system', parts: [{ type: 'text', text: 'Use tools.' }] },
      { role: 'user', parts: [{ type: 'text', text: 'Weather in Paris and Tokyo?' }] },
      {
        role: 'assistant',
        parts: [
          { type: 'text', text: 'Checking both.' },
          { type: 'tool-call', callId: 'toolu_1', name: 'get_weather', arguments: '{"location":"Paris"}' },
          { type: 'tool-call', callId: 'toolu_2', name: 'get_weather', arguments: '{"location":"Tokyo"}' },
          // A dialect may put reasoning anywhere; Anthropic needs it first in the turn.
          { type: 'reasoning', text: 'Two cities: two calls.', signature: SIGNATURE },
        ],
      },
      { role: 'tool', parts: [{ type: 'tool-result', callId: 'toolu_1', content: '18°C' }] },
      { role: 'tool', parts: [{ type: 'tool-result', callId: 'toolu_2', content: 'lookup failed', isError: true }] },
    ]
    const body = toUpstream(
      chat({ messages, tools: [weatherTool], toolChoice: 'auto', reasoning: { effort: 'medium' }, sampling: { maxOutputTokens: 16000, temperature: 0.5, topP: 0.97 } }),
      MODEL,
    )
    expect(body).toEqual({
      model: MODEL,
      max_tokens: 16000,
      system: 'Use tools.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Weather in Paris and Tokyo?' }] },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'Two cities: two calls.', signature: SIGNATURE },
            { type: 'text', text: 'Checking both.' },
            { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { location: 'Paris' } },
            { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { location: 'Tokyo' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: '18°C' },
            { type: 'tool_result', tool_use_id: 'toolu_2', content: 'lookup failed', is_error: true },
          ],
        },
      ],
      tools: [{ name: 'get_weather', description: 'Weather for a city', input_schema: weatherTool.parameters }],
      tool_choice: { type: 'auto' },
      thinking: { type: 'enabled', budget_tokens: 8000 },
      // With thinking on: no temperature; top_p only in [0.95, 1].
      top_p: 0.97,
      stream: true,
    })
  })

  test('a user message after tool results joins their turn, after the results', () => {
    const body = toUpstream(
      chat({
        messages: [
          { role: 'user', parts: [{ type: 'text', text: 'Go' }] },
          { role: 'assistant', parts: [{ type: 'tool-call', callId: 'c1', name: 'get_weather', arguments: '{}' }] },
          { role: 'tool', parts: [{ type: 'tool-result', callId: 'c1', content: '' }] },
          { role: 'user', parts: [{ type: 'text', text: 'And tomorrow?' }] },
        ],
        tools: [weatherTool],
      }),
      MODEL,
    )
    expect(body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Go' }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'c1', name: 'get_weather', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'c1' }, { type: 'text', text: 'And tomorrow?' }] },
    ])
    expect(body.tool_choice).toBeUndefined()
  })

  test("tool call ids Anthropic's pattern refuses (another backend's) are respelled alike in the call and its result; valid ones stay", () => {
    const body = toUpstream(
      chat({
        messages: [
          { role: 'user', parts: [{ type: 'text', text: 'Go' }] },
          {
            role: 'assistant',
            parts: [
              { type: 'tool-call', callId: 'functions.get_weather:0', name: 'get_weather', arguments: '{}' },
              { type: 'tool-call', callId: 'functions_get_weather_0', name: 'get_weather', arguments: '{}' },
              { type: 'tool-call', callId: 'call abc/1', name: 'get_weather', arguments: '{}' },
            ],
          },
          { role: 'tool', parts: [{ type: 'tool-result', callId: 'functions.get_weather:0', content: 'a' }] },
          { role: 'tool', parts: [{ type: 'tool-result', callId: 'functions_get_weather_0', content: 'b' }] },
          { role: 'tool', parts: [{ type: 'tool-result', callId: 'call abc/1', content: 'c' }] },
        ],
        tools: [weatherTool],
      }),
      MODEL,
    )
    const calls = (body.messages[1]!.content as Array<{ id: string }>).map(block => block.id)
    const results = (body.messages[2]!.content as Array<{ tool_use_id: string }>).map(block => block.tool_use_id)
    expect(results).toEqual(calls)
    for (const id of calls) expect(id).toMatch(/^[a-zA-Z0-9_-]+$/)
    expect(new Set(calls).size).toBe(3) // the respelled id does not meet the valid one it resembles
    expect(calls[0]).toStartWith('functions_get_weather_0_')
    expect(calls[1]).toBe('functions_get_weather_0')
    expect(calls[2]).toStartWith('call_abc_1_')
  })

  test('a tool call id an earlier turn used gets a fresh one, unused by any later turn, and so do the results that answer it', () => {
    const turn = (id: string): Message[] => [
      { role: 'assistant', parts: [{ type: 'tool-call', callId: id, name: 'get_weather', arguments: '{}' }] },
      { role: 'tool', parts: [{ type: 'tool-result', callId: id, content: id }] },
    ]
    const body = toUpstream(chat({ messages: [{ role: 'user', parts: [{ type: 'text', text: 'Go' }] }, ...turn('a'), ...turn('a'), ...turn('a_2')], tools: [weatherTool] }), MODEL)
    const calls = body.messages.filter(message => message.role === 'assistant').map(message => (message.content[0] as { id: string }).id)
    const results = body.messages.slice(2).filter(message => message.role === 'user').map(message => (message.content[0] as { tool_use_id: string }).tool_use_id)
    expect(calls).toEqual(['a', 'a_2', 'a_2_2'])
    expect(results).toEqual(calls)
  })

  test('reasoning without a signature is not replayed; redacted reasoning becomes redacted_thinking', () => {
    const body = toUpstream(
      chat({
        messages: [
          { role: 'user', parts: [{ type: 'text', text: 'Q' }] },
          {
            role: 'assistant',
            parts: [
              { type: 'reasoning', text: 'unsigned, from another provider' },
              { type: 'reasoning', text: '', signature: 'opaque-data', redacted: true },
              { type: 'text', text: 'A' },
            ],
          },
          { role: 'user', parts: [{ type: 'text', text: 'Q2' }] },
        ],
      }),
      MODEL,
    )
    expect(body.messages[1]).toEqual({ role: 'assistant', content: [{ type: 'redacted_thinking', data: 'opaque-data' }, { type: 'text', text: 'A' }] })
  })

  test('whitespace-only assistant text (a "\\n\\n" some backends write before tool calls) is not sent: Anthropic refuses such blocks', () => {
    const body = toUpstream(
      chat({
        messages: [
          { role: 'user', parts: [{ type: 'text', text: 'Q' }] },
          { role: 'assistant', parts: [{ type: 'text', text: '\n\n' }, { type: 'tool-call', callId: 'c1', name: 'get_weather', arguments: '{}' }] },
          { role: 'tool', parts: [{ type: 'tool-result', callId: 'c1', content: 'sunny' }] },
          { role: 'assistant', parts: [{ type: 'text', text: ' ' }, { type: 'text', text: 'Sunny.' }] },
          { role: 'user', parts: [{ type: 'text', text: 'Q2' }] },
        ],
        tools: [weatherTool],
      }),
      MODEL,
    )
    expect(body.messages.filter(message => message.role === 'assistant').map(message => message.content)).toEqual([
      [{ type: 'tool_use', id: 'c1', name: 'get_weather', input: {} }],
      [{ type: 'text', text: 'Sunny.' }],
    ])
  })

  test('tool arguments that are not a JSON object are replayed wrapped, never dropped', () => {
    const call = (callId: string, args: string) => ({ type: 'tool-call' as const, callId, name: 'get_weather', arguments: args })
    const body = toUpstream(
      chat({
        messages: [
          { role: 'user', parts: [{ type: 'text', text: 'Q' }] },
          { role: 'assistant', parts: [call('a', '{"location": "Par'), call('b', '[1,2]'), call('c', '  '), call('d', '"x"')] },
        ],
        tools: [weatherTool],
      }),
      MODEL,
    )
    expect(body.messages[1]!.content).toEqual([
      { type: 'tool_use', id: 'a', name: 'get_weather', input: { [RAW_ARGUMENTS_KEY]: '{"location": "Par' } },
      { type: 'tool_use', id: 'b', name: 'get_weather', input: { [RAW_ARGUMENTS_KEY]: '[1,2]' } },
      { type: 'tool_use', id: 'c', name: 'get_weather', input: {} },
      { type: 'tool_use', id: 'd', name: 'get_weather', input: { [RAW_ARGUMENTS_KEY]: '"x"' } },
    ])
  })

  test('a conversation of system text alone, of empty assistant turns, or of a thinking turn sent with thinking off, is refused: Anthropic takes no empty messages list', () => {
    // Before: sent as `messages: []` (with the system text), which Anthropic answers 400.
    const system = { role: 'system' as const, parts: [{ type: 'text' as const, text: 'only system' }] }
    // QA: a lone assistant turn of thinking, with thinking off, was dropped after the check, and `messages: []` sent.
    const thinkingOnly = { role: 'assistant' as const, parts: [{ type: 'reasoning' as const, text: 'x', signature: SIGNATURE }] }
    for (const messages of [[system], [system, { role: 'assistant' as const, parts: [] }], [{ role: 'assistant' as const, parts: [{ type: 'text' as const, text: '' }] }], [thinkingOnly], [system, thinkingOnly]]) {
      let error: unknown
      try {
        toUpstream(chat({ messages }), MODEL)
      } catch (thrown) {
        error = thrown
      }
      expect(error).toBeInstanceOf(UnsupportedRequestError)
      expect((error as UnsupportedRequestError).message).toMatch(/no user or assistant message with content/)
    }
  })

  test('tools without a schema type get an object schema', () => {
    const body = toUpstream(chat({ tools: [{ name: 'now', parameters: {} }] }), MODEL)
    expect(body.tools).toEqual([{ name: 'now', input_schema: { type: 'object' } }])
  })

  test('an empty user message is refused: left out, the assistant turn before it would be continued as a prefill', () => {
    const empty = { role: 'user' as const, parts: [{ type: 'text' as const, text: '' }] }
    const history = [{ role: 'user' as const, parts: [{ type: 'text' as const, text: 'Write a poem' }] }, { role: 'assistant' as const, parts: [{ type: 'text' as const, text: 'Roses are red' }] }]
    expect(() => toUpstream(chat({ messages: [...history, empty] }), MODEL)).toThrow(/A user message is empty/)
    expect(() => toUpstream(chat({ messages: [...history, { role: 'user', parts: [] }] }), MODEL)).toThrow(UnsupportedRequestError)
    // An assistant's blank text is still left out (it says nothing).
    const body = toUpstream(chat({ messages: [history[0]!, { role: 'assistant', parts: [{ type: 'text', text: '\n\n' }, { type: 'tool-call', callId: 'c', name: 'f', arguments: '{}' }] }] }), MODEL)
    expect(body.messages[1]!.content).toEqual([{ type: 'tool_use', id: 'c', name: 'f', input: {} }])
  })

  test('a file part is refused (enrichment turns files into text first)', () => {
    expect(() => toUpstream(chat({ messages: [{ role: 'user', parts: [{ type: 'file', mediaType: 'application/pdf', data: new Uint8Array([37]) }] }] }), MODEL)).toThrow(UnsupportedRequestError)
  })
})
