import { describe, expect, test } from 'bun:test'
import type { ChatEvent, ChatRequest } from '../../src/inference/canonical'
import { DemoProvider } from '../../src/providers/demo/provider'
import { sampleArguments } from '../../src/providers/demo/sample-arguments'
import { assertEventGrammar, collect, rejection, summarize } from './events'
import { providerCall, providerConfig, testRequest, testRoute, timeTool, weatherTool } from './fixtures'

// No base URL and no key: the embedded default must work offline for a brand-new user.
const demo = new DemoProvider(providerConfig({ type: 'demo', id: 'demo' }))

async function run(request: ChatRequest, signal?: AbortSignal): Promise<ChatEvent[]> {
  const events = await collect(await demo.stream(providerCall(request, 'demo-1', signal)))
  assertEventGrammar(events)
  return events
}

describe('demo provider', () => {
  test('echoes the last user message word by word, with exact usage', async () => {
    const events = await run(testRequest({}, 'Hello demo world'))
    expect(demo.id).toBe('demo:demo')
    expect(events[0]).toMatchObject({ type: 'response-start', id: 'demo-req_test_0001', model: 'demo-1' })
    expect(events.slice(1)).toEqual([
      { type: 'text-start', block: 0 },
      ...['Hello', ' from', ' the', ' demo', ' model.', ' You', ' said:', ' Hello', ' demo', ' world'].map(delta => ({ type: 'text-delta' as const, block: 0, delta })),
      { type: 'text-end', block: 0 },
      // "Hello demo world" is 16 characters: ceil(16 / 4) = 4 input tokens; 10 words out.
      { type: 'finish', reason: 'stop', usage: { inputTokens: 4, outputTokens: 10, webSearchRequests: 0, webFetchRequests: 0 } },
    ])
  })

  test('deterministic: the same request gives the same events', async () => {
    const request = testRequest({ tools: [weatherTool, timeTool], reasoning: { effort: 'low' } }, 'get_time and get_weather please')
    const strip = (events: ChatEvent[]) => events.map(event => (event.type === 'response-start' ? { ...event, createdAt: 0 } : event))
    expect(strip(await run(request))).toEqual(strip(await run(request)))
  })

  test('input tokens: ceil(chars / 4) per message, images flat, tool definitions as JSON', async () => {
    const request = testRequest({
      tools: [timeTool],
      messages: [
        { role: 'system', parts: [{ type: 'text', text: 'Be nice.' }] }, // 8 → 2
        { role: 'user', parts: [{ type: 'text', text: 'Look' }, { type: 'image', mediaType: 'image/png', data: new Uint8Array(10) }] }, // 4 → 1, + 64
        { role: 'assistant', parts: [{ type: 'text', text: 'Nice picture!' }] }, // 13 → 4
        { role: 'user', parts: [{ type: 'text', text: 'Thanks' }] }, // 6 → 2
      ],
    })
    const usage = summarize(await run(request)).finish!.usage
    expect(usage.inputTokens).toBe(2 + 1 + 64 + 4 + 2 + Math.ceil(JSON.stringify([timeTool]).length / 4))
  })

  test('mentions images it was sent', async () => {
    const request = testRequest({ messages: [{ role: 'user', parts: [{ type: 'text', text: 'What is this?' }, { type: 'image', mediaType: 'image/png', data: new Uint8Array(4) }] }] })
    expect(summarize(await run(request)).text).toBe('Hello from the demo model. You said (with 1 image): What is this?')
  })

  test('an empty message still gets an answer', async () => {
    expect(summarize(await run(testRequest({}, '   '))).text).toBe('Hello from the demo model. Send a message and I will repeat it back.')
  })

  describe('tools', () => {
    test('naming a tool calls it, with arguments that satisfy its required properties', async () => {
      const summary = summarize(await run(testRequest({ tools: [timeTool, weatherTool] }, 'What does get_weather say?')))
      expect(summary.text).toBe('')
      expect(summary.toolCalls).toHaveLength(1)
      expect(summary.toolCalls[0]).toMatchObject({ block: 0, name: 'get_weather' })
      expect(JSON.parse(summary.toolCalls[0]!.arguments)).toEqual({ city: 'demo', unit: 'celsius' })
      expect(summary.finish?.reason).toBe('tool-calls')
      // name = 1 token, then 4 characters of arguments per token.
      expect(summary.finish?.usage.outputTokens).toBe(1 + Math.ceil('{"city":"demo","unit":"celsius"}'.length / 4))
    })

    test('naming several tools calls them in parallel, in order of mention, with distinct ids', async () => {
      const summary = summarize(await run(testRequest({ tools: [weatherTool, timeTool] }, 'First get_time, then GET_WEATHER.')))
      expect(summary.toolCalls.map(call => call.name)).toEqual(['get_time', 'get_weather'])
      expect(summary.toolCalls.map(call => call.block)).toEqual([0, 1])
      expect(new Set(summary.toolCalls.map(call => call.callId)).size).toBe(2)
    })

    test('parallel tool calls off: only the first mentioned', async () => {
      const summary = summarize(await run(testRequest({ tools: [weatherTool, timeTool], parallelToolCalls: false }, 'get_time and get_weather')))
      expect(summary.toolCalls.map(call => call.name)).toEqual(['get_time'])
    })

    test('"call" without a name calls the first tool; a name inside another word does not count', async () => {
      expect(summarize(await run(testRequest({ tools: [timeTool, weatherTool] }, 'Please call something'))).toolCalls.map(call => call.name)).toEqual(['get_time'])
      const summary = summarize(await run(testRequest({ tools: [timeTool] }, 'my_get_time_thing is unrelated')))
      expect(summary.toolCalls).toEqual([])
      expect(summary.finish?.reason).toBe('stop')
    })

    test('tool choice: none answers in text, required forces the first tool, a named choice forces that tool', async () => {
      expect(summarize(await run(testRequest({ tools: [weatherTool], toolChoice: 'none' }, 'call get_weather'))).toolCalls).toEqual([])
      expect(summarize(await run(testRequest({ tools: [weatherTool, timeTool], toolChoice: 'required' }, 'hello'))).toolCalls.map(call => call.name)).toEqual(['get_weather'])
      expect(summarize(await run(testRequest({ tools: [weatherTool, timeTool], toolChoice: { name: 'get_time' } }, 'get_weather'))).toolCalls.map(call => call.name)).toEqual(['get_time'])
    })

    test('after a tool result it answers in text using the result', async () => {
      const request = testRequest({
        tools: [weatherTool],
        messages: [
          { role: 'user', parts: [{ type: 'text', text: 'call get_weather' }] },
          { role: 'assistant', parts: [{ type: 'tool-call', callId: 'call_demo_1_0', name: 'get_weather', arguments: '{"city":"demo","unit":"celsius"}' }] },
          { role: 'tool', parts: [{ type: 'tool-result', callId: 'call_demo_1_0', content: '{"temperature":21}' }] },
        ],
      })
      const summary = summarize(await run(request))
      expect(summary.toolCalls).toEqual([])
      expect(summary.text).toBe('The get_weather tool returned: {"temperature":21}')
      expect(summary.finish?.reason).toBe('stop')
    })

    test('a failed tool result (Messages style, inside a user turn) is reported as such', async () => {
      const request = testRequest({
        tools: [weatherTool],
        messages: [
          { role: 'user', parts: [{ type: 'text', text: 'call get_weather' }] },
          { role: 'assistant', parts: [{ type: 'tool-call', callId: 'toolu_9', name: 'get_weather', arguments: '{}' }] },
          { role: 'user', parts: [{ type: 'tool-result', callId: 'toolu_9', content: 'city not found', isError: true }] },
        ],
      })
      expect(summarize(await run(request)).text).toBe('The get_weather tool reported an error: city not found')
    })
  })

  describe('reasoning', () => {
    test('a reasoning block with a signature comes first, counted in output and reasoning tokens', async () => {
      const summary = summarize(await run(testRequest({ reasoning: { effort: 'medium' } }, 'Two words')))
      expect(summary.blocks.map(block => block.kind)).toEqual(['reasoning', 'text'])
      expect(summary.reasoning).toBe('The user wrote 2 words. I will repeat the message back.')
      expect(summary.reasoningSignatures[0]).toMatch(/^demo\.[A-Za-z0-9_-]{43}$/)
      const reasoningWords = summary.reasoning.split(' ').length
      const textWords = summary.text.split(' ').length
      expect(summary.finish?.usage).toMatchObject({ reasoningTokens: reasoningWords, outputTokens: reasoningWords + textWords })
    })

    test('reasoning before a tool call says so', async () => {
      const summary = summarize(await run(testRequest({ tools: [weatherTool], reasoning: { effort: 'low' } }, 'get_weather')))
      expect(summary.blocks.map(block => block.kind)).toEqual(['reasoning', 'tool-call'])
      expect(summary.reasoning).toBe('The user wrote 1 word. I will call get_weather.')
    })

    test('no reasoning when the route does not offer it, or the request did not ask', async () => {
      const route = testRoute({ capabilities: { reasoning: false } })
      expect(summarize(await run(testRequest({ route, reasoning: { effort: 'high' } }, 'hi'))).blocks.map(block => block.kind)).toEqual(['text'])
      const summary = summarize(await run(testRequest({}, 'hi')))
      expect(summary.blocks.map(block => block.kind)).toEqual(['text'])
      expect(summary.finish?.usage.reasoningTokens).toBeUndefined()
    })
  })

  describe('limits', () => {
    test('maxOutputTokens stops the text and finishes length', async () => {
      const summary = summarize(await run(testRequest({ sampling: { maxOutputTokens: 3 } }, 'one two three four')))
      expect(summary.text).toBe('Hello from the')
      expect(summary.finish).toMatchObject({ reason: 'length', usage: { outputTokens: 3 } })
    })

    test('the budget covers reasoning first: with 2 tokens there is no text', async () => {
      const summary = summarize(await run(testRequest({ sampling: { maxOutputTokens: 2 }, reasoning: { effort: 'low' } }, 'hi')))
      expect(summary.blocks.map(block => block.kind)).toEqual(['reasoning'])
      expect(summary.reasoning).toBe('The user')
      expect(summary.finish).toMatchObject({ reason: 'length', usage: { outputTokens: 2, reasoningTokens: 2 } })
    })

    test('a budget that ends inside tool-call arguments truncates them and finishes length', async () => {
      const summary = summarize(await run(testRequest({ tools: [weatherTool], sampling: { maxOutputTokens: 3 } }, 'get_weather')))
      expect(summary.toolCalls[0]!.arguments).toBe('{"city":')
      expect(summary.finish).toMatchObject({ reason: 'length', usage: { outputTokens: 3 } })
    })

    test('a zero budget: no blocks, finish length', async () => {
      const events = await run(testRequest({ sampling: { maxOutputTokens: 0 } }, 'hi'))
      expect(events.map(event => event.type)).toEqual(['response-start', 'finish'])
      expect(summarize(events).finish).toMatchObject({ reason: 'length', usage: { outputTokens: 0 } })
    })

    test("the route's cap applies when the request sets none", async () => {
      const summary = summarize(await run(testRequest({ route: testRoute({ maxOutputTokens: 4 }) }, 'a b c d e f')))
      expect(summary.text).toBe('Hello from the demo')
      expect(summary.finish?.reason).toBe('length')
    })

    test('a stop sequence cuts the text before it and finishes stop', async () => {
      // Everything before the sequence, the space too (QA: the text's trailing whitespace was never a token).
      const summary = summarize(await run(testRequest({ sampling: { stop: ['zzz', 'said'] } }, 'alpha beta')))
      expect(summary.text).toBe('Hello from the demo model. You ')
      expect(summary.finish).toMatchObject({ reason: 'stop', stopSequence: 'said', usage: { outputTokens: 7 } })
    })
  })

  describe('cancellation and pacing', () => {
    test('an aborted signal ends the iterator without a terminal event', async () => {
      const controller = new AbortController()
      const events: ChatEvent[] = []
      for await (const event of await demo.stream(providerCall(testRequest({}, 'one two three four five'), 'demo-1', controller.signal))) {
        events.push(event)
        if (event.type === 'text-delta') controller.abort()
      }
      assertEventGrammar(events, { terminal: false })
      expect(events.filter(event => event.type === 'text-delta')).toHaveLength(1)
    })

    test('a signal aborted before the call rejects as aborted', async () => {
      const controller = new AbortController()
      controller.abort()
      expect((await rejection(demo.stream(providerCall(testRequest(), 'demo-1', controller.signal)))).kind).toBe('aborted')
    })

    test('a token delay paces the stream without changing it', async () => {
      const paced = new DemoProvider(providerConfig({ type: 'demo', id: 'demo' }), { tokenDelayMs: 1 })
      const events = await collect(await paced.stream(providerCall(testRequest({}, 'x'), 'demo-1')))
      expect(summarize(events).text).toBe('Hello from the demo model. You said: x')
    })
  })
})

describe('sampleArguments', () => {
  test('required properties only, with simple values of their type', () => {
    expect(
      sampleArguments({
        type: 'object',
        properties: {
          name: { type: 'string' },
          count: { type: 'integer', minimum: 3 },
          ratio: { type: 'number', maximum: 0.5 },
          flag: { type: 'boolean' },
          mode: { enum: ['fast', 'slow'] },
          fixed: { const: 42 },
          preset: { type: 'string', default: 'standard' },
          tags: { type: 'array', items: { type: 'string' }, minItems: 2 },
          nothing: { type: 'null' },
          maybe: { type: ['null', 'integer'] },
          either: { anyOf: [{ type: 'boolean' }, { type: 'string' }] },
          nested: { type: 'object', properties: { id: { type: 'string', minLength: 6 }, note: { type: 'string' } }, required: ['id'] },
          optional: { type: 'string' },
        },
        required: ['name', 'count', 'ratio', 'flag', 'mode', 'fixed', 'preset', 'tags', 'nothing', 'maybe', 'either', 'nested'],
      }),
    ).toEqual({ name: 'demo', count: 3, ratio: 0.5, flag: true, mode: 'fast', fixed: 42, preset: 'standard', tags: ['demo', 'demo'], nothing: null, maybe: 1, either: true, nested: { id: 'demoooo'.slice(0, 6) } })
  })

  test('a schema that is not an object schema still gives an object', () => {
    expect(sampleArguments({ type: 'string' })).toEqual({})
    expect(sampleArguments({})).toEqual({})
  })

  test('self-nesting schemas stop at a depth limit', () => {
    const node: Record<string, unknown> = { type: 'object', required: ['child'], properties: {} }
    ;(node.properties as Record<string, unknown>).child = node
    expect(() => JSON.stringify(sampleArguments(node))).not.toThrow()
  })
})
