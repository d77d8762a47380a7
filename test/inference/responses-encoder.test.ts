import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { ApiError } from '../../src/http/errors'
import type { ChatEvent, Usage } from '../../src/inference/canonical'
import type { ChatResult } from '../../src/inference/collect'
import { echoOf, encodeResponse } from '../../src/inference/dialects/responses/encode'
import { ResponsesStreamEncoder } from '../../src/inference/dialects/responses/encode-stream'

// The Responses stream encoder on its own: shapes the pipeline can produce that the route tests
// do not reach, each replayed through the openai SDK's stream helper.

// (estimatedInputTokens: a ResponseMeta field on branches whose dialects announce the prompt early.)
const META = { id: 'resp_unit', model: 'unit', createdAt: 1_768_478_400, includeUsage: true, estimatedInputTokens: 0 }
const USAGE: Usage = { inputTokens: 10, outputTokens: 20, reasoningTokens: 8, webSearchRequests: 0, webFetchRequests: 0 }

const encoder = () => new ResponsesStreamEncoder(META, echoOf({ model: 'unit', input: 'x' }))
const parse = (frames: string[]) => frames.map(frame => JSON.parse(frame.slice(frame.indexOf('data: ') + 6)))

/** The SDK's final response for a complete SSE body. */
function sdkFinal(sse: string) {
  const client = new OpenAI({ apiKey: 'k', baseURL: 'http://unit.invalid/v1', maxRetries: 0, fetch: async () => new Response(sse, { headers: { 'content-type': 'text/event-stream' } }) })
  return client.responses.stream({ model: 'unit', input: 'x' }).finalResponse()
}

describe('ResponsesStreamEncoder', () => {
  test('interleaved thinking: reasoning, call, reasoning, text become four items in order, each reasoning with its own signature', async () => {
    const events: ChatEvent[] = [
      { type: 'reasoning-start', block: 0 },
      { type: 'reasoning-delta', block: 0, delta: 'First thought.' },
      { type: 'reasoning-end', block: 0, signature: 'sig-1' },
      { type: 'tool-call-start', block: 1, callId: 'toolu_1', name: 'look' },
      { type: 'tool-call-delta', block: 1, argumentsDelta: '{}' },
      { type: 'tool-call-end', block: 1 },
      { type: 'reasoning-start', block: 2 },
      { type: 'reasoning-delta', block: 2, delta: 'Second thought.' },
      { type: 'reasoning-end', block: 2, signature: 'sig-2' },
      { type: 'text-start', block: 3 },
      { type: 'text-delta', block: 3, delta: 'Answer.' },
      { type: 'text-end', block: 3 },
    ]
    const stream = encoder()
    const frames = [...stream.start(), ...events.flatMap(event => stream.push(event)), ...stream.finish('stop', USAGE)]
    const final = await sdkFinal(frames.join(''))
    expect(final.output.map(item => [item.type, item.id, 'encrypted_content' in item ? item.encrypted_content : undefined])).toEqual([
      ['reasoning', 'rs_unit0', 'sig-1'],
      ['function_call', 'fc_unit1', undefined],
      ['reasoning', 'rs_unit2', 'sig-2'],
      ['message', 'msg_unit3', undefined],
    ])
    expect((final.output[2] as OpenAI.Responses.ResponseReasoningItem).summary[0]!.text).toBe('Second thought.')
    expect(final.usage?.output_tokens_details.reasoning_tokens).toBe(8)
  })

  test('parallel calls ended only at the finish (a Chat Completions backend) still stream one item after the other', async () => {
    // The openai-compatible translator ends every tool call at the finish. The API finishes an
    // item (output_item.done) before it adds the next; so does the encoder, as the Messages one does.
    const call = (block: number, callId: string, args: string): ChatEvent[] => [
      { type: 'tool-call-start', block, callId, name: 'look' },
      { type: 'tool-call-delta', block, argumentsDelta: args },
    ]
    const stream = encoder()
    const events: ChatEvent[] = [
      { type: 'text-start', block: 0 },
      { type: 'text-delta', block: 0, delta: 'Looking.' },
      { type: 'text-end', block: 0 },
      ...call(1, 'call_a', '{"q":"a"}'),
      ...call(2, 'call_b', '{"q":"b"}'),
      { type: 'tool-call-end', block: 1 },
      { type: 'tool-call-end', block: 2 },
    ]
    const frames = [...stream.start(), ...events.flatMap(event => stream.push(event)), ...stream.finish('tool-calls', USAGE)]
    const items = parse(frames).flatMap(event => (event.type.startsWith('response.output_item.') ? [`${event.type.slice(21)} ${event.output_index}`] : []))
    expect(items).toEqual(['added 0', 'done 0', 'added 1', 'done 1', 'added 2', 'done 2'])
    const done = parse(frames).filter(event => event.type === 'response.function_call_arguments.done')
    expect(done.map(event => [event.output_index, event.arguments])).toEqual([[1, '{"q":"a"}'], [2, '{"q":"b"}']])
    const final = await sdkFinal(frames.join(''))
    expect(final.output.map(item => (item.type === 'function_call' ? item.arguments : item.type))).toEqual(['message', '{"q":"a"}', '{"q":"b"}'])
  })

  test('interleaved call arguments: the next items wait for the open call to end; done events carry whole arguments, no delta follows them', async () => {
    const stream = encoder()
    const events: ChatEvent[] = [
      { type: 'tool-call-start', block: 0, callId: 'call_a', name: 'look' },
      { type: 'tool-call-delta', block: 0, argumentsDelta: '{"q":' },
      { type: 'tool-call-start', block: 1, callId: 'call_b', name: 'look' },
      { type: 'tool-call-delta', block: 1, argumentsDelta: '{"q":' },
      { type: 'tool-call-delta', block: 0, argumentsDelta: '"a"}' },
      { type: 'text-start', block: 2 },
      { type: 'text-delta', block: 2, delta: 'Also.' },
      { type: 'text-end', block: 2 },
      { type: 'tool-call-delta', block: 1, argumentsDelta: '"b"}' },
      { type: 'tool-call-end', block: 0 },
      // block 1 never ends: the finish ends it, and writes what waited behind it.
    ]
    const frames = [...stream.start(), ...events.flatMap(event => stream.push(event)), ...stream.finish('tool-calls', USAGE)]
    const parsed = parse(frames)
    const closed = new Set<number>()
    for (const event of parsed) {
      if (event.type === 'response.output_item.done') closed.add(event.output_index)
      else if (event.output_index !== undefined) expect(closed.has(event.output_index)).toBe(false)
    }
    const items = parsed.flatMap(event => (event.type.startsWith('response.output_item.') ? [`${event.type.slice(21)} ${event.output_index}`] : []))
    expect(items).toEqual(['added 0', 'done 0', 'added 1', 'done 1', 'added 2', 'done 2'])
    const done = parsed.filter(event => event.type === 'response.function_call_arguments.done' || (event.type === 'response.output_item.done' && event.item.type === 'function_call'))
    expect(done.map(event => event.arguments ?? event.item.arguments)).toEqual(['{"q":"a"}', '{"q":"a"}', '{"q":"b"}', '{"q":"b"}'])
    const final = await sdkFinal(frames.join(''))
    expect(final.output.map(item => (item.type === 'function_call' ? item.arguments : item.type))).toEqual(['{"q":"a"}', '{"q":"b"}', 'message'])
  })

  test('a refusal is a refusal content part, as the SDK parse() expects it (not text to parse as JSON)', async () => {
    const stream = encoder()
    const events: ChatEvent[] = [
      { type: 'text-start', block: 0 },
      { type: 'text-delta', block: 0, delta: "I'm sorry,", refusal: true },
      { type: 'text-delta', block: 0, delta: ' no.', refusal: true },
      { type: 'text-end', block: 0 },
    ]
    const frames = [...stream.start(), ...events.flatMap(event => stream.push(event)), ...stream.finish('stop', USAGE)]
    expect(parse(frames).map(event => event.type).filter(type => type.includes('refusal') || type.includes('output_text'))).toEqual(['response.refusal.delta', 'response.refusal.delta', 'response.refusal.done'])
    const text = { format: { type: 'json_schema' as const, name: 'answer', strict: true, schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false } } }
    const client = new OpenAI({ apiKey: 'k', baseURL: 'http://unit.invalid/v1', maxRetries: 0, fetch: async () => new Response(frames.join(''), { headers: { 'content-type': 'text/event-stream' } }) })
    const final = await client.responses.stream({ model: 'unit', input: 'x', text }).finalResponse()
    const refusal = { type: 'refusal', refusal: "I'm sorry, no." }
    expect([(final.output[0] as OpenAI.Responses.ResponseOutputMessage).content, final.output_parsed]).toEqual([[refusal], null])
    const result = { blocks: [{ type: 'text', text: "I'm sorry, no." }], text: "I'm sorry, no.", reasoning: '', toolCalls: [], refusal: "I'm sorry, no.", finishReason: 'stop', usage: USAGE } as unknown as ChatResult
    expect((encodeResponse(result, USAGE, META, echoOf({ model: 'unit', input: 'x' })).output[0] as { content: unknown }).content).toEqual([refusal])
  })

  test('settlement failing after finish: response.failed replaces the final frames and continues the sequence', () => {
    const stream = encoder()
    const sent = [...stream.start(), ...stream.push({ type: 'text-start', block: 0 }), ...stream.push({ type: 'text-delta', block: 0, delta: 'Hi' })]
    const withheld = stream.finish('stop', USAGE) // closes the open item, then response.completed
    expect(parse(withheld).map(event => event.type)).toContain('response.completed')
    const failed = parse(stream.fail(new ApiError('unavailable', 'the ledger could not record this charge')))
    expect(failed).toHaveLength(1)
    expect(failed[0]).toMatchObject({ type: 'response.failed', sequence_number: sent.length, response: { status: 'failed', error: { code: 'server_error', message: 'the ledger could not record this charge' } } })
  })

  test("an in-band failure's code says whose fault it was: invalid_prompt for a request refused as invalid, rate_limit_exceeded, else server_error (QA)", () => {
    // Before: an upstream's mid-stream invalid_request_error reached the client as server_error,
    // which clients retry forever; Chat Completions named it invalid_request.
    const code = (error: ApiError) => parse(encoder().fail(error))[0]!.response.error.code
    expect(code(new ApiError('invalid_request', 'the upstream provider rejected the request: prompt is too long'))).toBe('invalid_prompt')
    expect(code(new ApiError('rate_limited', 'slow down'))).toBe('rate_limit_exceeded')
    expect(code(new ApiError('provider_error', 'the upstream failed'))).toBe('server_error')
  })

  test('empty deltas send nothing; a reasoning block without text has no summary part; blocks left open are closed at finish', async () => {
    const stream = encoder()
    const frames = [
      ...stream.start(),
      ...stream.push({ type: 'response-start', id: 'u', model: 'm', createdAt: 0 }),
      ...stream.push({ type: 'reasoning-start', block: 0 }),
      ...stream.push({ type: 'reasoning-delta', block: 0, delta: '' }),
      ...stream.push({ type: 'reasoning-end', block: 0, signature: 'opaque', redacted: true }),
      ...stream.push({ type: 'text-start', block: 1 }),
      ...stream.push({ type: 'text-delta', block: 1, delta: '' }),
      ...stream.push({ type: 'text-delta', block: 1, delta: 'cut' }),
      ...stream.finish('length', USAGE),
    ]
    const types = parse(frames).map(event => event.type)
    expect(types).not.toContain('response.reasoning_summary_part.added')
    expect(types.filter(type => type === 'response.output_text.delta')).toHaveLength(1)
    expect(types.at(-1)).toBe('response.incomplete')
    const final = await sdkFinal(frames.join(''))
    expect([final.status, final.incomplete_details?.reason, final.output_text]).toEqual(['incomplete', 'max_output_tokens', 'cut'])
    expect(final.output[0]).toEqual({ id: 'rs_unit0', type: 'reasoning', summary: [], encrypted_content: 'redacted:opaque', status: 'completed' })
    expect((final.output[1] as OpenAI.Responses.ResponseOutputMessage).status).toBe('incomplete')
  })

  test('reasoning cut by max_output_tokens (the last item) is incomplete, in its output_item.done as in the response; finished reasoning is completed', async () => {
    const stream = encoder()
    const reasoning = (block: number, text: string): ChatEvent[] => [
      { type: 'reasoning-start', block },
      { type: 'reasoning-delta', block, delta: text },
      { type: 'reasoning-end', block, signature: `sig-${block}` },
    ]
    // A provider ends the block before its finish, as the demo and Anthropic ones do.
    const frames = [...stream.start(), ...[...reasoning(0, 'Done.'), ...reasoning(1, 'Cut')].flatMap(event => stream.push(event)), ...stream.finish('length', USAGE)]
    const parsed = parse(frames)
    const items = parsed.filter(event => event.type.startsWith('response.output_item.')).map(event => [event.type.slice(21), event.output_index, event.item.status])
    // Before: no status at all, and the cut item's done said nothing of the cut.
    expect(items).toEqual([['added', 0, 'in_progress'], ['done', 0, 'completed'], ['added', 1, 'in_progress'], ['done', 1, 'incomplete']])
    expect(parsed.at(-1).response.output.map((item: { status?: string }) => item.status)).toEqual(['completed', 'incomplete'])
    const final = await sdkFinal(frames.join(''))
    expect(final.output.map(item => (item as OpenAI.Responses.ResponseReasoningItem).status)).toEqual(['completed', 'incomplete'])
    // The same answer collected: the JSON response says the same.
    const blocks = [{ type: 'reasoning', text: 'Done.', signature: 'sig-0' }, { type: 'reasoning', text: 'Cut', signature: 'sig-1' }]
    const result = { blocks, text: '', reasoning: 'Done.Cut', toolCalls: [], finishReason: 'length', usage: USAGE, error: undefined } as unknown as ChatResult
    expect(encodeResponse(result, USAGE, META, echoOf({ model: 'unit', input: 'x' })).output.map(item => (item as { status?: string }).status)).toEqual(['completed', 'incomplete'])
  })

  test('a truncated answer marks the call cut short incomplete, wherever it stands, not the last item', async () => {
    // A Chat Completions backend interleaves two parallel calls and stops at max tokens inside
    // the first one's arguments; its translator ends both calls before the finish.
    const run = (reason: 'length' | 'tool-calls') => {
      const stream = encoder()
      const events: ChatEvent[] = [
        { type: 'tool-call-start', block: 0, callId: 'call_A', name: 'f' },
        { type: 'tool-call-delta', block: 0, argumentsDelta: '{"city": "Os' },
        { type: 'tool-call-start', block: 1, callId: 'call_B', name: 'g' },
        { type: 'tool-call-delta', block: 1, argumentsDelta: '{"x": 1}' },
        { type: 'tool-call-delta', block: 0, argumentsDelta: 'lo", "more' },
        { type: 'tool-call-end', block: 0 },
        { type: 'tool-call-end', block: 1 },
      ]
      return [...stream.start(), ...events.flatMap(event => stream.push(event)), ...stream.finish(reason, USAGE)]
    }
    const truncated = run('length')
    const done = parse(truncated).filter(event => event.type === 'response.output_item.done').map(event => [event.item.call_id, event.item.status])
    expect(done.sort()).toEqual([['call_A', 'incomplete'], ['call_B', 'completed']])
    const final = await sdkFinal(truncated.join(''))
    expect(final.output.map(item => [(item as OpenAI.Responses.ResponseFunctionToolCall).call_id, (item as OpenAI.Responses.ResponseFunctionToolCall).status])).toEqual([
      ['call_A', 'incomplete'],
      ['call_B', 'completed'],
    ])
    // Not truncated: both completed, even the one whose arguments are no JSON.
    const finished = await sdkFinal(run('tool-calls').join(''))
    expect(finished.output.map(item => (item as OpenAI.Responses.ResponseFunctionToolCall).status)).toEqual(['completed', 'completed'])
    // A call cut short, then text: the text is what max_tokens cut.
    const stream = encoder()
    const mixed = [
      ...stream.start(),
      ...stream.push({ type: 'tool-call-start', block: 0, callId: 'call_A', name: 'f' }),
      ...stream.push({ type: 'tool-call-delta', block: 0, argumentsDelta: '{"city": "Os' }),
      ...stream.push({ type: 'tool-call-end', block: 0 }),
      ...stream.push({ type: 'text-start', block: 1 }),
      ...stream.push({ type: 'text-delta', block: 1, delta: 'and then' }),
      ...stream.finish('length', USAGE),
    ]
    expect(parse(mixed).filter(event => event.type === 'response.output_item.done').map(event => event.item.status)).toEqual(['completed', 'incomplete'])
    // The call is done in its place, before the message is added: items stream one after the other.
    expect(
      parse(mixed)
        .filter(event => event.type.startsWith('response.output_item.'))
        .map(event => `${event.type.slice(21)} ${event.output_index}`),
    ).toEqual(['added 0', 'done 0', 'added 1', 'done 1'])
  })

  test('a text block opens its message at its first text: an empty one is no item; one with text is written as before', async () => {
    const stream = encoder()
    const types = (frames: string[]) => parse(frames).map(event => event.type)
    expect(stream.start()).toHaveLength(2)
    // An empty text block before a tool call (Claude): nothing, not even after an empty delta.
    expect(stream.push({ type: 'text-start', block: 0 })).toEqual([])
    expect(stream.push({ type: 'text-delta', block: 0, delta: '' })).toEqual([])
    expect(stream.push({ type: 'text-end', block: 0 })).toEqual([])
    expect(types(stream.push({ type: 'tool-call-start', block: 1, callId: 'toolu_1', name: 'look' }))).toEqual(['response.output_item.added'])
    stream.push({ type: 'tool-call-delta', block: 1, argumentsDelta: '{}' })
    stream.push({ type: 'tool-call-end', block: 1 })
    // Text after it: the item, its part and the delta come with the first text, nothing held past it.
    expect(stream.push({ type: 'text-start', block: 2 })).toEqual([])
    const first = parse(stream.push({ type: 'text-delta', block: 2, delta: 'after' }))
    expect(first.map(event => event.type)).toEqual([
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
    ])
    expect(first[2]).toMatchObject({ output_index: 1, item: { id: 'msg_unit1', type: 'message' } })
    const frames = [...stream.push({ type: 'text-end', block: 2 }), ...stream.finish('tool-calls', USAGE)]
    expect(parse(frames).at(-1).response.output.map((item: { type: string }) => item.type)).toEqual(['function_call', 'message'])
  })
})

describe('encodeResponse (non-streamed)', () => {
  test('a collector that keeps blocks apart: one item per block, each reasoning with its own signature, in place', () => {
    const blocks = [
      { type: 'reasoning', text: 'First.', signature: 'sig-1' },
      { type: 'tool-call', callId: 'toolu_1', name: 'look', arguments: '{}' },
      { type: 'reasoning', text: '', signature: 'opaque', redacted: true },
      { type: 'text', text: 'Cut' },
    ]
    const result = { blocks, text: 'Cut', reasoning: 'First.', toolCalls: [blocks[1]], finishReason: 'length', usage: USAGE, error: undefined } as unknown as ChatResult
    const response = encodeResponse(result, USAGE, META, echoOf({ model: 'unit', input: 'x' }))
    expect([response.status, response.incomplete_details]).toEqual(['incomplete', { reason: 'max_output_tokens' }])
    expect(response.output).toEqual([
      { id: 'rs_unit0', type: 'reasoning', summary: [{ type: 'summary_text', text: 'First.' }], encrypted_content: 'sig-1', status: 'completed' },
      { id: 'fc_unit1', type: 'function_call', status: 'completed', arguments: '{}', call_id: 'toolu_1', name: 'look' },
      { id: 'rs_unit2', type: 'reasoning', summary: [], encrypted_content: 'redacted:opaque', status: 'completed' },
      { id: 'msg_unit3', type: 'message', status: 'incomplete', role: 'assistant', content: [{ type: 'output_text', text: 'Cut', annotations: [], logprobs: [] }] },
    ])
  })

  test('a truncated answer marks the call cut short incomplete, not the last item', () => {
    const blocks = [
      { type: 'tool-call', callId: 'call_A', name: 'f', arguments: '{"city": "Oslo", "more' },
      { type: 'tool-call', callId: 'call_B', name: 'g', arguments: '{"x": 1}' },
    ]
    const result = { blocks, text: '', reasoning: '', toolCalls: blocks, finishReason: 'length', usage: USAGE, error: undefined } as unknown as ChatResult
    const response = encodeResponse(result, USAGE, META, echoOf({ model: 'unit', input: 'x' }))
    expect(response.output.map(item => (item as { status: string }).status)).toEqual(['incomplete', 'completed'])
    // A call cut short before other output was not what max_tokens cut: the text after it was.
    const mixed = { ...result, blocks: [blocks[0], { type: 'text', text: 'and then' }] } as unknown as ChatResult
    expect(encodeResponse(mixed, USAGE, META, echoOf({ model: 'unit', input: 'x' })).output.map(item => (item as { status: string }).status)).toEqual(['completed', 'incomplete'])
  })
})
