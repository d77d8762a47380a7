import { describe, expect, test } from 'bun:test'
import { toUpstream, UnsupportedPartError } from '../../src/providers/openai-compatible/to-upstream'
import { END_USER_ID, testRequest, testRoute, timeTool, weatherTool } from './fixtures'

const MODEL = 'meta-llama/Llama-3.3-70B-Instruct'

describe('toUpstream (Chat Completions body)', () => {
  test('a minimal request: streamed with usage, and nothing else', () => {
    const request = testRequest({
      messages: [
        { role: 'system', parts: [{ type: 'text', text: 'Be brief.' }] },
        { role: 'user', parts: [{ type: 'text', text: 'Hi' }] },
      ],
    })
    expect(toUpstream(request, MODEL)).toEqual({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
      stream: true,
      stream_options: { include_usage: true },
    })
  })

  test("participants' names travel on every message that had one", () => {
    const request = testRequest({
      messages: [
        { role: 'system', parts: [{ type: 'text', text: 'Moderate.' }], name: 'rules' },
        { role: 'user', parts: [{ type: 'text', text: 'I say yes' }], name: 'alice' },
        { role: 'user', parts: [{ type: 'text', text: 'I say no' }], name: 'bob' },
        { role: 'assistant', parts: [{ type: 'text', text: 'Noted.' }], name: 'mod' },
        { role: 'user', parts: [{ type: 'text', text: 'And now?' }] },
      ],
    })
    expect(toUpstream(request, MODEL).messages).toEqual([
      { role: 'system', content: 'Moderate.', name: 'rules' },
      { role: 'user', content: 'I say yes', name: 'alice' },
      { role: 'user', content: 'I say no', name: 'bob' },
      { role: 'assistant', content: 'Noted.', name: 'mod' },
      { role: 'user', content: 'And now?' },
    ])
  })

  test('never the end-user id, even though the request carries one', () => {
    const body = toUpstream(testRequest({ user: END_USER_ID }), MODEL)
    expect(JSON.stringify(body)).not.toContain(END_USER_ID)
    expect('user' in body).toBe(false)
  })

  test('a full request: tools, tool choice, sampling, response format, reasoning effort, and a tool round trip', () => {
    const png = new Uint8Array([137, 80, 78, 71])
    const request = testRequest({
      messages: [
        { role: 'system', parts: [{ type: 'text', text: 'You are helpful.' }, { type: 'text', text: 'Use tools.' }] },
        {
          role: 'user',
          parts: [
            { type: 'text', text: 'What is in these, and the weather?' },
            { type: 'image', mediaType: 'image/png', data: png },
            { type: 'image', mediaType: 'image/jpeg', data: new URL('https://images.example/cat.jpg') },
          ],
        },
        {
          role: 'assistant',
          parts: [
            { type: 'reasoning', text: 'The user wants weather.', signature: 'sig' },
            { type: 'text', text: 'Let me look.' },
            { type: 'tool-call', callId: 'call_1', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
            { type: 'tool-call', callId: 'call_2', name: 'get_time', arguments: '{"zone":"Europe/Paris"}' },
          ],
        },
        {
          role: 'tool',
          parts: [
            { type: 'tool-result', callId: 'call_1', content: '{"temp":21}' },
            { type: 'tool-result', callId: 'call_2', content: 'timeout', isError: true },
          ],
        },
      ],
      tools: [weatherTool, { ...timeTool, strict: true }],
      toolChoice: { name: 'get_weather' },
      parallelToolCalls: false,
      sampling: { temperature: 0.3, topP: 0.9, maxOutputTokens: 256, stop: ['END'], seed: 42 },
      responseFormat: { type: 'json_schema', name: 'answer', schema: { type: 'object' }, strict: true },
      reasoning: { effort: 'high', budgetTokens: 8000 },
    })
    expect(toUpstream(request, MODEL)).toEqual({
      model: MODEL,
      messages: [
        { role: 'system', content: 'You are helpful.\n\nUse tools.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in these, and the weather?' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw==' } },
            { type: 'image_url', image_url: { url: 'https://images.example/cat.jpg' } },
          ],
        },
        {
          role: 'assistant',
          content: 'Let me look.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' } },
            { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{"zone":"Europe/Paris"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp":21}' },
        { role: 'tool', tool_call_id: 'call_2', content: 'timeout' },
      ],
      stream: true,
      stream_options: { include_usage: true },
      tools: [
        { type: 'function', function: { name: 'get_weather', description: 'Current weather for a city', parameters: weatherTool.parameters } },
        { type: 'function', function: { name: 'get_time', description: 'Current time in a time zone', parameters: timeTool.parameters, strict: true } },
      ],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
      temperature: 0.3,
      top_p: 0.9,
      max_tokens: 256,
      stop: ['END'],
      seed: 42,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object' }, strict: true } },
      reasoning_effort: 'high',
    })
  })

  test('assistant content is null beside tool calls only; a Messages-style user turn splits into tool messages, then the text', () => {
    const request = testRequest({
      tools: [weatherTool],
      messages: [
        { role: 'user', parts: [{ type: 'text', text: 'Weather?' }] },
        { role: 'assistant', parts: [{ type: 'tool-call', callId: 'toolu_1', name: 'get_weather', arguments: '{}' }] },
        {
          role: 'user',
          parts: [
            { type: 'tool-result', callId: 'toolu_1', content: 'sunny' },
            { type: 'text', text: 'Thanks, and tomorrow?' },
          ],
        },
      ],
    })
    expect(toUpstream(request, MODEL).messages).toEqual([
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny' },
      { role: 'user', content: 'Thanks, and tomorrow?' },
    ])
  })

  test('tool choice strings pass through; tool fields travel only with tools', () => {
    expect(toUpstream(testRequest({ tools: [weatherTool], toolChoice: 'required' }), MODEL).tool_choice).toBe('required')
    const withoutTools = toUpstream(testRequest({ toolChoice: 'none', parallelToolCalls: true }), MODEL)
    expect(withoutTools.tools).toBeUndefined()
    expect(withoutTools.tool_choice).toBeUndefined()
    expect(withoutTools.parallel_tool_calls).toBeUndefined()
  })

  test('reasoning_effort only for a route that advertises reasoning', () => {
    const plain = testRequest({ route: testRoute({ capabilities: { reasoning: false } }), reasoning: { effort: 'low' } })
    expect(toUpstream(plain, MODEL).reasoning_effort).toBeUndefined()
    expect(toUpstream(testRequest({ reasoning: { effort: 'low' } }), MODEL).reasoning_effort).toBe('low')
  })

  test('response formats: text and json_object as they are', () => {
    expect(toUpstream(testRequest({ responseFormat: { type: 'json_object' } }), MODEL).response_format).toEqual({ type: 'json_object' })
    expect(toUpstream(testRequest({ responseFormat: { type: 'text' } }), MODEL).response_format).toEqual({ type: 'text' })
  })

  test('options: max_completion_tokens, and reasoning history as reasoning_content (redacted reasoning never)', () => {
    const request = testRequest({
      sampling: { maxOutputTokens: 100 },
      messages: [
        { role: 'user', parts: [{ type: 'text', text: 'Q' }] },
        {
          role: 'assistant',
          parts: [
            { type: 'reasoning', text: 'opaque', redacted: true },
            { type: 'reasoning', text: 'Think.' },
            { type: 'tool-call', callId: 'c1', name: 'get_time', arguments: '{}' },
          ],
        },
      ],
    })
    const body = toUpstream(request, MODEL, { maxTokensField: 'max_completion_tokens', reasoningHistory: 'reasoning_content' })
    expect(body.max_completion_tokens).toBe(100)
    expect(body.max_tokens).toBeUndefined()
    expect(body.messages[1]).toEqual({ role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_time', arguments: '{}' } }], reasoning_content: 'Think.' })
    // The default drops reasoning history: OpenAI rejects unknown message fields.
    expect(toUpstream(request, MODEL).messages[1]).not.toHaveProperty('reasoning_content')
  })

  test('an empty stop list is not sent', () => {
    expect(toUpstream(testRequest({ sampling: { stop: [] } }), MODEL).stop).toBeUndefined()
  })

  test('parts this wire cannot carry are refused, not dropped', () => {
    const file = testRequest({ messages: [{ role: 'user', parts: [{ type: 'text', text: 'a' }, { type: 'file', mediaType: 'application/pdf', data: new Uint8Array(1) }] }] })
    expect(() => toUpstream(file, MODEL)).toThrow(UnsupportedPartError)
    const systemImage = testRequest({ messages: [{ role: 'system', parts: [{ type: 'image', mediaType: 'image/png', data: new Uint8Array(1) }] }] })
    expect(() => toUpstream(systemImage, MODEL)).toThrow(UnsupportedPartError)
  })
})
