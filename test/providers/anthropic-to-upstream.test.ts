import { describe, expect, test } from 'bun:test'
import type { ChatRequest, Message } from '../../src/inference/canonical'
import { THINKING_BUDGET_BY_EFFORT } from '../../src/providers/anthropic/thinking-budget'
import { RAW_ARGUMENTS_KEY, toUpstream, UnsupportedRequestError } from '../../src/providers/anthropic/to-upstream'
import { CLAUDE_MODEL as MODEL, claudeRoute as route } from './anthropic-wire'

function chat(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return {
    model: 'claude',
    route: route(),
    messages: [{ role: 'user', parts: [{ type: 'text', text: 'Hi' }] }],
    tools: [],
    sampling: {},
    hosted: { webSearch: false, webFetch: false },
    stream: false,
    ...overrides,
  }
}

const weatherTool = {
  name: 'get_weather',
  description: 'Weather for a city',
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
}

const SIGNATURE = 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds=='

describe('anthropic toUpstream: exact bodies', () => {
  test('json_schema is Anthropic structured output (output_config.format, the description kept in the schema); json_object has no equivalent: refused, never dropped', () => {
    expect(() => toUpstream(chat({ responseFormat: { type: 'json_object' } }), MODEL)).toThrow(/json_object response formats \(response_format\) are not available/)
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false }
    expect(toUpstream(chat({ responseFormat: { type: 'json_schema', name: 'x', schema, strict: false } }), MODEL).output_config).toEqual({ format: { type: 'json_schema', schema } })
    const described = toUpstream(chat({ responseFormat: { type: 'json_schema', name: 'x', schema, description: 'One letter' } }), MODEL).output_config
    expect(described).toEqual({ format: { type: 'json_schema', schema: { ...schema, description: 'One letter' } } })
    expect(toUpstream(chat({ responseFormat: { type: 'text' } }), MODEL).output_config).toBeUndefined()
  })

  test('plain chat: systems joined and hoisted, sampling mapped, user/seed/format never sent, always streamed', () => {
    const body = toUpstream(
      chat({
        messages: [
          { role: 'system', parts: [{ type: 'text', text: 'You are terse.' }] },
          { role: 'user', parts: [{ type: 'text', text: 'Hello' }, { type: 'text', text: '' }] },
          { role: 'assistant', parts: [{ type: 'text', text: 'Hi.' }] },
          { role: 'system', parts: [{ type: 'text', text: 'Answer in French.' }] },
          { role: 'user', parts: [{ type: 'text', text: 'How are you?' }] },
        ],
        sampling: { temperature: 0.2, topP: 0.9, maxOutputTokens: 300, stop: ['END'], seed: 7 },
        user: 'end-user-42',
        responseFormat: { type: 'text' },
        hosted: { webSearch: true, webFetch: true },
      }),
      MODEL,
    )
    expect(body).toEqual({
      model: MODEL,
      max_tokens: 300,
      system: 'You are terse.\n\nAnswer in French.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Hello' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Hi.' }] },
        { role: 'user', content: [{ type: 'text', text: 'How are you?' }] },
      ],
      // temperature and top_p together are a 400 on current models: temperature wins.
      temperature: 0.2,
      stop_sequences: ['END'],
      stream: true,
    })
    expect(JSON.stringify(body)).not.toContain('end-user-42')
  })

  test('max_tokens falls back to the route; top_p alone is sent', () => {
    const body = toUpstream(chat({ sampling: { topP: 0.5 } }), MODEL)
    expect(body).toEqual({ model: MODEL, max_tokens: 8192, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }], top_p: 0.5, stream: true })
  })

  test("a temperature above Anthropic's 1 (an OpenAI client may send up to 2) is refused before the call; 1 is sent", () => {
    expect(() => toUpstream(chat({ sampling: { temperature: 1.5 } }), MODEL)).toThrow(/temperature 1.5 is above 1/)
    expect(toUpstream(chat({ sampling: { temperature: 1 } }), MODEL).temperature).toBe(1)
    // With thinking on a temperature is not sent, but one above 1 is still refused, not dropped.
    expect(() => toUpstream(chat({ sampling: { temperature: 1.5, maxOutputTokens: 4000 }, reasoning: { effort: 'low' } }), MODEL)).toThrow(/temperature 1.5 is above 1/)
  })

  test('images: bytes → base64, https URL → url source, data URL → base64', () => {
    const body = toUpstream(
      chat({
        messages: [
          {
            role: 'user',
            parts: [
              { type: 'text', text: 'Compare' },
              { type: 'image', mediaType: 'image/png', data: new Uint8Array([137, 80, 78, 71]) },
              { type: 'image', mediaType: 'image/jpeg', data: new URL('https://example.com/cat.jpg') },
              { type: 'image', mediaType: 'image/png', data: new URL('data:image/gif;base64,R0lGODlh') },
            ],
          },
        ],
      }),
      MODEL,
    )
    expect(body.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Compare' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw==' } },
          { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
          { type: 'image', source: { type: 'base64', media_type: 'image/gif', data: 'R0lGODlh' } },
        ],
      },
    ])
  })

  test('a percent-encoded data URL decodes to its bytes; malformed encoding is refused', () => {
    const image = (href: string) => toUpstream(chat({ messages: [{ role: 'user', parts: [{ type: 'image', mediaType: 'image/png', data: new URL(href) }] }] }), MODEL).messages[0]!.content[0]
    expect(image('data:image/png,%89PNG')).toEqual({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString('base64') } })
    expect(() => image('data:image/png,%zz')).toThrow(UnsupportedRequestError)
  })

  test('a subarray image sends only its own bytes', () => {
    const backing = new Uint8Array([1, 2, 137, 80, 78, 71, 3])
    const body = toUpstream(chat({ messages: [{ role: 'user', parts: [{ type: 'image', mediaType: 'image/png', data: backing.subarray(2, 6) }] }] }), MODEL)
    expect(body.messages[0]!.content[0]).toEqual({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw==' } })
  })

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

  test('a conversation of system text alone, or of empty assistant turns, is refused: Anthropic takes no empty messages list', () => {
    // Before: sent as `messages: []` (with the system text), which Anthropic answers 400.
    const system = { role: 'system' as const, parts: [{ type: 'text' as const, text: 'only system' }] }
    for (const messages of [[system], [system, { role: 'assistant' as const, parts: [] }], [{ role: 'assistant' as const, parts: [{ type: 'text' as const, text: '' }] }]]) {
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

describe('anthropic toUpstream: tool choice', () => {
  const cases: Array<[string, Partial<ChatRequest>, unknown]> = [
    ['unset', {}, undefined],
    ['auto', { toolChoice: 'auto' }, { type: 'auto' }],
    ['none', { toolChoice: 'none' }, { type: 'none' }],
    ['none ignores parallel=false (Anthropic rejects the flag on none)', { toolChoice: 'none', parallelToolCalls: false }, { type: 'none' }],
    ['required → any', { toolChoice: 'required' }, { type: 'any' }],
    ['{name} → tool', { toolChoice: { name: 'get_weather' } }, { type: 'tool', name: 'get_weather' }],
    ['parallel=false alone → auto without parallel use', { parallelToolCalls: false }, { type: 'auto', disable_parallel_tool_use: true }],
    ['required + parallel=false', { toolChoice: 'required', parallelToolCalls: false }, { type: 'any', disable_parallel_tool_use: true }],
    ['{name} + parallel=false', { toolChoice: { name: 'get_weather' }, parallelToolCalls: false }, { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true }],
    ['parallel=true → nothing to say', { parallelToolCalls: true }, undefined],
  ]
  for (const [name, overrides, expected] of cases) {
    test(name, () => {
      expect(toUpstream(chat({ tools: [weatherTool], ...overrides }), MODEL).tool_choice).toEqual(expected as never)
    })
  }

  test('no tools → neither tools nor tool_choice', () => {
    const body = toUpstream(chat({ toolChoice: 'required', parallelToolCalls: false }), MODEL)
    expect(body.tools).toBeUndefined()
    expect(body.tool_choice).toBeUndefined()
  })
})

describe('anthropic toUpstream: thinking budget', () => {
  const budget = (overrides: Partial<ChatRequest>) => {
    const thinking = toUpstream(chat(overrides), MODEL).thinking
    return thinking?.type === 'enabled' ? thinking.budget_tokens : undefined
  }

  test('effort table, capped at half of max_tokens', () => {
    expect(budget({ reasoning: { effort: 'low' }, sampling: { maxOutputTokens: 64_000 } })).toBe(THINKING_BUDGET_BY_EFFORT.low)
    expect(budget({ reasoning: { effort: 'medium' }, sampling: { maxOutputTokens: 64_000 } })).toBe(THINKING_BUDGET_BY_EFFORT.medium)
    expect(budget({ reasoning: { effort: 'high' }, sampling: { maxOutputTokens: 64_000 } })).toBe(THINKING_BUDGET_BY_EFFORT.high)
    expect(budget({ reasoning: { effort: 'high' } })).toBe(4096) // route max 8192
    expect(budget({ reasoning: { effort: 'low' }, sampling: { maxOutputTokens: 1500 } })).toBe(1024) // raised to the floor
  })

  test('explicit budget wins over effort, capped below max_tokens', () => {
    expect(budget({ reasoning: { effort: 'low', budgetTokens: 5000 } })).toBe(5000)
    expect(budget({ reasoning: { budgetTokens: 50_000 } })).toBe(8191)
    expect(budget({ reasoning: { budgetTokens: 10 } })).toBe(1024)
  })

  test('no form on the binding: the client\'s own form, an effort alone as a budget (what the gateway sent before the setting)', () => {
    const body = (overrides: Partial<ChatRequest>) => {
      const { thinking, output_config } = toUpstream(chat(overrides), MODEL)
      return { thinking, output_config }
    }
    expect(body({ reasoning: { adaptive: true, effort: 'low', summarized: true } })).toEqual({ thinking: { type: 'adaptive', display: 'summarized' }, output_config: { effort: 'low' } })
    expect(body({ reasoning: { adaptive: true }, sampling: { maxOutputTokens: 500 } })).toEqual({ thinking: { type: 'adaptive' }, output_config: undefined })
    expect(body({ reasoning: { budgetTokens: 2000, effort: 'high' } })).toEqual({ thinking: { type: 'enabled', budget_tokens: 2000 }, output_config: { effort: 'high' } })
    expect(body({ reasoning: { effort: 'low' }, sampling: { maxOutputTokens: 64_000 } })).toEqual({ thinking: { type: 'enabled', budget_tokens: THINKING_BUDGET_BY_EFFORT.low }, output_config: undefined })
  })

  test('adaptive on a budget binding is a budget at its effort, else high; only an explicit budget\'s effort goes in output_config', () => {
    const body = (overrides: Partial<ChatRequest>) => {
      const { thinking, output_config } = toUpstream(chat(overrides), MODEL, 'budget')
      return { thinking, output_config }
    }
    expect(body({ reasoning: { adaptive: true }, sampling: { maxOutputTokens: 64_000 } })).toEqual({ thinking: { type: 'enabled', budget_tokens: THINKING_BUDGET_BY_EFFORT.high }, output_config: undefined })
    expect(body({ reasoning: { adaptive: true, effort: 'low', summarized: true } })).toEqual({ thinking: { type: 'enabled', budget_tokens: 2048, display: 'summarized' }, output_config: undefined })
    // No budget fits under max_tokens 500: off, as for an effort.
    expect(body({ reasoning: { adaptive: true }, sampling: { maxOutputTokens: 500 } })).toEqual({ thinking: undefined, output_config: undefined })
    expect(body({ reasoning: { budgetTokens: 2000, effort: 'high' } })).toEqual({ thinking: { type: 'enabled', budget_tokens: 2000 }, output_config: { effort: 'high' } })
    // An effort alone is a budget, as for Chat Completions clients; forced tool use keeps thinking (and its effort) off.
    expect(body({ reasoning: { effort: 'low' }, sampling: { maxOutputTokens: 64_000 } })).toEqual({ thinking: { type: 'enabled', budget_tokens: THINKING_BUDGET_BY_EFFORT.low }, output_config: undefined })
    expect(body({ reasoning: { budgetTokens: 2000, effort: 'low' }, tools: [weatherTool], toolChoice: 'required' })).toEqual({ thinking: undefined, output_config: undefined })
  })

  test('an adaptive binding: adaptive with the effort (an explicit budget read as the lowest effort covering it), no max_tokens floor', () => {
    const body = (overrides: Partial<ChatRequest>) => {
      const { thinking, output_config, temperature } = toUpstream(chat(overrides), MODEL, 'adaptive')
      return { thinking, output_config, temperature }
    }
    const adaptive = (effort?: 'low' | 'medium' | 'high') => ({ thinking: { type: 'adaptive' as const }, output_config: effort ? { effort } : undefined, temperature: undefined })
    expect(body({ reasoning: { effort: 'medium' }, sampling: { temperature: 0.5 } })).toEqual(adaptive('medium'))
    expect(body({ reasoning: { adaptive: true }, sampling: { maxOutputTokens: 500 } })).toEqual(adaptive())
    expect(body({ reasoning: { effort: 'low' }, sampling: { maxOutputTokens: 500 } })).toEqual(adaptive('low'))
    expect(body({ reasoning: { budgetTokens: 1024 } })).toEqual(adaptive('low'))
    expect(body({ reasoning: { budgetTokens: 2049 } })).toEqual(adaptive('medium'))
    expect(body({ reasoning: { budgetTokens: 8192 } })).toEqual(adaptive('medium'))
    expect(body({ reasoning: { budgetTokens: 8193 } })).toEqual(adaptive('high'))
    // The client's own effort wins over the one its budget reads as.
    expect(body({ reasoning: { budgetTokens: 30_000, effort: 'low', summarized: true } })).toEqual({ ...adaptive('low'), thinking: { type: 'adaptive', display: 'summarized' } })
    expect(body({ reasoning: { effort: 'high' }, tools: [weatherTool], toolChoice: 'required', sampling: { temperature: 0.5 } })).toEqual({ thinking: undefined, output_config: undefined, temperature: 0.5 })
    expect(body({})).toEqual({ thinking: undefined, output_config: undefined, temperature: undefined })
    expect(body({ reasoning: { effort: 'high' }, route: route({ capabilities: { ...route().capabilities, reasoning: false } }) }).thinking).toBeUndefined()
  })

  test('off: no request, budget 0, max_tokens ≤ 1024, route without reasoning, forced tool use', () => {
    expect(budget({})).toBeUndefined()
    expect(budget({ reasoning: { budgetTokens: 0 } })).toBeUndefined()
    expect(budget({ reasoning: { effort: 'high' }, sampling: { maxOutputTokens: 1024 } })).toBeUndefined()
    expect(budget({ reasoning: { effort: 'high' }, route: route({ capabilities: { ...route().capabilities, reasoning: false } }) })).toBeUndefined()
    expect(budget({ reasoning: { effort: 'high' }, tools: [weatherTool], toolChoice: 'required' })).toBeUndefined()
    expect(budget({ reasoning: { effort: 'high' }, tools: [weatherTool], toolChoice: { name: 'get_weather' } })).toBeUndefined()
  })

  test('off when the continued tool turn has no thinking to replay (history from another provider)', () => {
    const messages: Message[] = [
      { role: 'user', parts: [{ type: 'text', text: 'Q' }] },
      { role: 'assistant', parts: [{ type: 'reasoning', text: 'unsigned' }, { type: 'tool-call', callId: 'c', name: 'get_weather', arguments: '{}' }] },
      { role: 'tool', parts: [{ type: 'tool-result', callId: 'c', content: 'ok' }] },
    ]
    const body = toUpstream(chat({ messages, tools: [weatherTool], reasoning: { effort: 'low' }, sampling: { temperature: 0.3 } }), MODEL)
    expect(body.thinking).toBeUndefined()
    expect(body.temperature).toBe(0.3) // sampling is back once thinking is off
  })

  test('with thinking off, a final prefill assistant turn loses its thinking blocks', () => {
    const body = toUpstream(
      chat({
        messages: [
          { role: 'user', parts: [{ type: 'text', text: 'Q' }] },
          { role: 'assistant', parts: [{ type: 'reasoning', text: 'r', signature: SIGNATURE }, { type: 'text', text: 'The answer is' }] },
        ],
      }),
      MODEL,
    )
    expect(body.messages[1]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'The answer is' }] })
  })
})
