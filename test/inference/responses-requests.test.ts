import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { MiB } from '../../src/http/body-limit'
import { decodeResponses } from '../../src/inference/dialects/responses/decode'
import type { ResponsesRequest } from '../../src/inference/dialects/responses/schema'
import { events, ROUTE, seen, server, setup } from './scripted-app'

// What POST /v1/responses accepts and how it maps to the canonical request; what it refuses,
// always as a 400 in the OpenAI envelope naming the field, before anything is reserved.

const ok = [
  { type: 'response-start', id: 'u', model: 'm', createdAt: 0 },
  { type: 'finish', reason: 'stop', usage: { inputTokens: 1, outputTokens: 1, webSearchRequests: 0, webFetchRequests: 0 } },
] as const
const decode = (body: Record<string, unknown>) => decodeResponses({ model: 'scripted', ...body } as ResponsesRequest, ROUTE)
const PNG = Buffer.from('89504e470d0a1a0a', 'hex')

describe('Responses → canonical', () => {
  test('items: instructions and system/developer messages, user content parts, one assistant turn per run of assistant items', () => {
    const request = decode({
      instructions: 'Be terse.',
      input: [
        { role: 'developer', content: 'Answer in French.' },
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'Read these:' },
            { type: 'input_image', image_url: `data:image/png;base64,${PNG.toString('base64')}`, detail: 'auto' },
            { type: 'input_image', image_url: 'https://example.com/cat.png', detail: 'low' },
            { type: 'input_file', filename: 'notes.pdf', file_data: `data:application/pdf;base64,${Buffer.from('%PDF-1.4').toString('base64')}` },
          ],
        },
        { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'First.' }, { type: 'summary_text', text: 'Second.' }] },
        { type: 'message', role: 'assistant', id: 'msg_1', status: 'completed', content: [{ type: 'output_text', text: 'Let me look.', annotations: [], logprobs: [] }] },
        { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'lookup', arguments: '{}', status: 'completed', parsed_arguments: null },
        { type: 'function_call_output', call_id: 'call_1', output: 'found' },
        { type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: 'Raw thought.' }], encrypted_content: 'sig-2' },
        { role: 'assistant', content: 'Trouvé.' },
        { role: 'user', content: 'Merci' },
      ],
    })
    expect(request.messages).toEqual([
      { role: 'system', parts: [{ type: 'text', text: 'Be terse.' }] },
      { role: 'system', parts: [{ type: 'text', text: 'Answer in French.' }] },
      {
        role: 'user',
        parts: [
          { type: 'text', text: 'Read these:' },
          { type: 'image', mediaType: 'image/png', data: Uint8Array.from(PNG), param: 'input.1.content.1.image_url' },
          { type: 'image', mediaType: 'image/*', data: new URL('https://example.com/cat.png'), param: 'input.1.content.2.image_url' },
          { type: 'file', mediaType: 'application/pdf', filename: 'notes.pdf', data: Uint8Array.from(Buffer.from('%PDF-1.4')) },
        ],
      },
      {
        role: 'assistant',
        parts: [
          { type: 'reasoning', text: 'First.\n\nSecond.' },
          { type: 'text', text: 'Let me look.' },
          { type: 'tool-call', callId: 'call_1', name: 'lookup', arguments: '{}' },
        ],
      },
      { role: 'tool', parts: [{ type: 'tool-result', callId: 'call_1', content: 'found' }] },
      { role: 'assistant', parts: [{ type: 'reasoning', text: 'Raw thought.', signature: 'sig-2' }, { type: 'text', text: 'Trouvé.' }] },
      { role: 'user', parts: [{ type: 'text', text: 'Merci' }] },
    ])
  })

  test('calls and outputs keep their order: a call after an output may depend on it (a sequential chain), so it opens a turn', () => {
    const request = decode({
      input: [
        { role: 'user', content: 'Weather where I am?' },
        { type: 'function_call', call_id: 'c1', name: 'get_location', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'Paris' },
        { type: 'function_call', call_id: 'c2', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: 'c2', output: 'sunny' },
      ],
    })
    expect(request.messages.map(message => [message.role, ...message.parts.map(part => ('callId' in part ? part.callId : part.type))])).toEqual([
      ['user', 'text'],
      ['assistant', 'c1'],
      ['tool', 'c1'],
      ['assistant', 'c2'],
      ['tool', 'c2'],
    ])
  })

  test('controls: tools, tool_choice, reasoning, sampling, text.format json_schema, hosted web tools as flags', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false }
    const request = decode({
      input: 'x',
      tools: [{ type: 'function', name: 'f', description: 'does f', parameters: schema, strict: true }, { type: 'web_search_preview' }, { type: 'web_fetch' }],
      tool_choice: { type: 'function', name: 'f' },
      parallel_tool_calls: false,
      reasoning: { effort: 'minimal', summary: 'detailed' },
      max_output_tokens: 300,
      temperature: 0.5,
      top_p: 0.9,
      text: { format: { type: 'json_schema', name: 'answer', schema, strict: true } },
      stream: true,
      user: 'u-1',
    })
    expect(request.tools).toEqual([{ name: 'f', description: 'does f', parameters: schema, strict: true }])
    expect([request.toolChoice, request.parallelToolCalls, request.reasoning, request.sampling]).toEqual([{ name: 'f' }, false, { effort: 'low', summarized: true }, { temperature: 0.5, topP: 0.9, maxOutputTokens: 300 }])
    expect(request.responseFormat).toEqual({ type: 'json_schema', name: 'answer', schema, strict: true, description: undefined })
    expect([request.hosted, request.stream, request.user]).toEqual([{ webSearch: true, webFetch: true }, true, 'u-1'])
    // Summary-only reasoning asks for the default effort (responses-reasoning-summary.test.ts); safety_identifier wins over the deprecated user.
    expect(decode({ input: 'x', reasoning: { summary: 'auto' }, safety_identifier: 's', user: 'u' })).toMatchObject({ reasoning: { summarized: true }, user: 's' })
  })
})

describe("a history from OpenAI replays: its function_call items' own fields at their defaults (QA)", () => {
  test('caller null or direct, async false and namespace null are accepted as the plain call', () => {
    // Before: 400 unknown field "input.1.caller", though the SDK's ResponseFunctionToolCall has them.
    for (const extra of [{ caller: null }, { caller: { type: 'direct' } }, { async: false, namespace: null }]) {
      const request = decode({ input: [{ role: 'user', content: 'q' }, { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}', ...extra }, { type: 'function_call_output', call_id: 'c1', output: 'r' }] })
      expect(request.messages[1]).toEqual({ role: 'assistant', parts: [{ type: 'tool-call', callId: 'c1', name: 'f', arguments: '{}' }] })
    }
  })
})

describe('POST /v1/responses refuses what it cannot carry', () => {
  test('each is a 400 invalid_request naming the field; nothing is reserved or sent upstream', async () => {
    const { client, charged } = await setup(() => events([...ok]))
    const call = (extra: Record<string, unknown>) => ({ model: 'scripted', input: 'x', ...extra })
    const item = (value: Record<string, unknown>) => ({ input: [value] })
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [call({ store: true }), 'store', /stores no responses/],
      [call({ previous_response_id: 'resp_123' }), 'previous_response_id', /stores no responses/],
      [call({ conversation: 'conv_1' }), 'conversation', /stores no conversations/],
      [call({ background: true }), 'background', /background/],
      [call({ prompt: { id: 'pmpt_1' } }), 'prompt', /prompt/],
      [call({ model: 'nope' }), 'model', /unknown model/],
      [call({ model: 'scripted:encrypted' }), 'model', /supported only on POST \/v1\/chat\/completions/],
      [call({ bogus: 1 }), 'bogus', /unknown field/],
      [call({ input: 42 }), 'input', /string or an array/],
      [call({ include: ['file_search_call.results'] }), 'include.0', /not supported/],
      [call({ truncation: 'auto' }), 'truncation', /never drops/],
      [call({ top_logprobs: 2 }), 'top_logprobs', /logprobs/],
      [call({ max_tool_calls: 3 }), 'max_tool_calls', /not supported/],
      [call({ service_tier: 'flex' }), 'service_tier', /flex/],
      [call({ text: { verbosity: 'low' } }), 'text.verbosity', /medium/],
      [call({ reasoning: { effort: 'none' } }), 'reasoning.effort', /"none"/],
      [call({ max_output_tokens: 5000 }), 'max_output_tokens', /max_output_tokens 5000 exceeds model .*maximum output of 1024/],
      // Without max_output_tokens no output bound is named (it was "plus up to 1 output tokens").
      [call({ input: 'x'.repeat(40_000) }), 'input', /^400 the request \(about \d+ input tokens\) does not fit model scripted's context of \d+ tokens with room for an answer; shorten the input$/],
      // The message names the Responses fields too (before: "shorten the messages or lower max_tokens").
      [call({ input: 'x '.repeat(15_000), max_output_tokens: 1000 }), 'input', /does not fit .*; shorten the input or lower max_output_tokens$/],
      [call(item({ type: 'item_reference', id: 'msg_1' })), 'input.0', /stores no items/],
      [call(item({ type: 'computer_call_output', call_id: 'c', output: {} })), 'input.0.type', /"computer_call_output" is not supported/],
      // A name of Object.prototype's is no item type (before: a 500, the table's lookup found a function).
      [call(item({ type: 'toString', role: 'user', content: 'hi' })), 'input.0.type', /"toString" is not supported/],
      [call(item({ type: 'function_call', call_id: 'c', arguments: '{}' })), 'input.0.name', /input\.0\.name/],
      [call(item({ role: 'user', content: 'x', extra: true })), 'input.0.extra', /unknown field "input.0.extra"/],
      // Before: "input.0.role: Expected union value" (and the same for status and phase), naming no value the field may have.
      [call(item({ role: 'tool', content: 'x' })), 'input.0.role', /^400 input\.0\.role: should be one of "user", "system", "developer", "assistant"$/],
      [call(item({ role: 'user', content: 'x', status: 'done' })), 'input.0.status', /^400 input\.0\.status: should be one of "in_progress", "completed", "incomplete", null$/],
      [call(item({ role: 'user', content: [{ type: 'input_text' }] })), 'input.0.content.0.text', /required/],
      [call(item({ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] })), 'input.0.content.0', /must be a valid input_text, input_image/],
      [call({ input: [{ type: 'function_call_output', call_id: 'ghost', output: 'x' }] }), 'input.0.call_id', /no function_call with call_id "ghost"/],
      // OpenAI's own function_call fields beyond their defaults (the defaults pass: see the next test).
      [call(item({ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', caller: { type: 'program', caller_id: 'p1' } })), 'input.0.caller', /"program" caller is not supported/],
      [call(item({ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', namespace: 'ns' })), 'input.0.namespace', /namespace/],
      [call(item({ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', async: true })), 'input.0.async', /async/],
      [call(item({ role: 'assistant', content: [{ type: 'input_image', image_url: 'https://example.com/a.png', detail: 'auto' }] })), 'input.0.content.0', /only accepted in user messages/],
      [call(item({ role: 'user', content: [{ type: 'input_image', file_id: 'file-1', detail: 'auto' }] })), 'input.0.content.0.file_id', /no file storage/],
      [call(item({ role: 'user', content: [{ type: 'input_file', file_url: 'https://example.com/a.pdf' }] })), 'input.0.content.0.file_url', /inline/],
      [call(item({ role: 'user', content: [{ type: 'input_file', file_data: `data:application/pdf;base64,${Buffer.alloc(MiB + 1).toString('base64')}` }] })), 'input.0.content.0.file_data', /1 MiB/],
      [call(item({ role: 'user', content: [{ type: 'input_file', file_data: 'not base64!' }] })), 'input.0.content.0.file_data', /base64/],
      [call({ input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' }, { type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', image_url: 'https://example.com/a.png', detail: 'auto' }] }] }), 'input.1.output.0', /carry text/],
      [call({ tools: [{ type: 'file_search', vector_store_ids: [] }] }), 'tools.0', /"file_search" is not supported/],
      [call({ tools: [{ type: 'function', name: 'bad name', parameters: {} }] }), 'tools.0.name', /1-64 letters/],
      [call({ tools: [{ type: 'function', name: 'f' }, { type: 'function', name: 'f' }] }), 'tools.1', /duplicate/],
      [call({ tools: [{ type: 'web_search' }] }), 'tools', /does not support hosted web_search/],
      [call({ tool_choice: { type: 'web_search_preview' } }), 'tool_choice', /not supported/],
      [call({ tool_choice: { type: 'function', name: 'ghost' } }), 'tool_choice', /not among the tools/],
      [call({ tool_choice: 'required' }), 'tool_choice', /at least one function tool/],
      // A message of no content parts (before: sent upstream as no message, or with instructions as the system message alone).
      [call(item({ role: 'user', content: [] })), 'input.0.content', /^400 input\.0\.content must not be empty/],
      [call({ instructions: 'Be terse.', input: [{ role: 'user', content: [] }] }), 'input.0.content', /must not be empty/],
      [call({ input: [{ role: 'user', content: 'hi' }, { type: 'message', role: 'assistant', content: [] }] }), 'input.1.content', /must not be empty/],
      // OpenAI's metadata limits: 16 pairs, keys of 64 characters, values of 512.
      [call({ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }), 'metadata', /metadata takes at most 16 pairs/],
      [call({ metadata: { ['k'.repeat(65)]: 'v' } }), `metadata.${'k'.repeat(65)}`, /keys of at most 64 characters/],
      [call({ metadata: { k: 'v'.repeat(513) } }), 'metadata.k', /metadata values must be strings of at most 512 characters/],
      // A client's key is named cut at 200 UTF-16 units (QA: a 100 KB key was echoed whole).
      [call({ metadata: { ['k'.repeat(100_000)]: 'v' } }), `metadata.${'k'.repeat(200)}…`, /keys of at most 64 characters/],
      [call({ metadata: { [`a${'🔑'.repeat(150)}`]: 'v' } }), `metadata.a${'🔑'.repeat(99)}…`, /keys of at most 64 characters/],
      // Characters are code points: one past the limit in emoji (two UTF-16 units each).
      [call({ metadata: { ['🔑'.repeat(65)]: 'v' } }), `metadata.${'🔑'.repeat(65)}`, /keys of at most 64 characters/],
      [call({ metadata: { k: '🔑'.repeat(513) } }), 'metadata.k', /metadata values must be strings of at most 512 characters/],
    ]
    for (const [body, param, message] of cases) {
      const error = await client.responses.create(body as never).catch(error => error)
      expect(error).toBeInstanceOf(OpenAI.APIError)
      expect([JSON.stringify(body).slice(0, 120), error.status, error.code, error.type, error.param]).toEqual([JSON.stringify(body).slice(0, 120), 400, 'invalid_request', 'invalid_request_error', param])
      expect(error.message).toMatch(message)
    }
    expect(seen).toHaveLength(0)
    expect(await charged()).toBe(0n)

    // store: false (what the SDK's users send for stateless use) and no store at all are fine.
    await client.responses.create({ model: 'scripted', input: 'x', store: false, include: ['reasoning.encrypted_content'], service_tier: 'auto', truncation: 'disabled' })
    await client.responses.create({ model: 'scripted', input: 'x', previous_response_id: null })
    // Metadata at OpenAI's limits is fine.
    const metadata = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`${i}`.padEnd(64, 'k'), 'v'.repeat(512)]))
    expect((await client.responses.create({ model: 'scripted', input: 'x', metadata })).metadata).toEqual(metadata)
    // In emoji too: 64 of them in a key, 512 in a value (128 and 1024 UTF-16 units).
    const emoji = { ['🔑'.repeat(64)]: '🔑'.repeat(512) }
    expect((await client.responses.create({ model: 'scripted', input: 'x', metadata: emoji })).metadata).toEqual(emoji)
    expect(seen).toHaveLength(4)
  })

  test('Encrypted headers are refused: Encrypted is Chat Completions only (spec §4.10)', async () => {
    const { org } = await setup(() => events([...ok]))
    const response = await fetch(`http://127.0.0.1:${server()!.port}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json', 'svc-encrypted': '1' },
      body: JSON.stringify({ model: 'scripted', input: 'x' }),
    })
    expect(response.status).toBe(400)
    expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(/supported only on POST \/v1\/chat\/completions/)
    expect(seen).toHaveLength(0)
  })

  test('the body limit is 4 MiB: larger is 413 before any byte is parsed', async () => {
    const { post } = await setup(() => events([...ok]))
    const over = await post({ model: 'scripted', input: 'x'.repeat(4 * MiB) })
    expect(over.status).toBe(413)
    expect(((await over.json()) as { error: unknown }).error).toMatchObject({ code: 'payload_too_large', type: 'invalid_request_error' })
    // Just under the limit the body is read and judged on its content (here: too long for the context).
    const under = await post({ model: 'scripted', input: 'x'.repeat(4 * MiB - 100) })
    expect(under.status).toBe(400)
    expect(seen).toHaveLength(0)
  })
})
