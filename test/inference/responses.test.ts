import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import type { ChatEvent } from '../../src/inference/canonical'
import { UpstreamError } from '../../src/providers/types'
import { poll } from '../support/poll'
import { EXPECTED_CHARGE, events, seen, setup, sseEvents, t, textReply, usage } from './scripted-app'

// POST /v1/responses over a scripted router: the official SDK as the client (its stream helper
// validates every event's ids and indexes), billing that equals price × reported usage (the
// same as Chat Completions for the same usage), settled once on every path.

const start = textReply[0]!

const SIGNATURE = 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds=='
const toolEvents: ChatEvent[] = [
  start,
  { type: 'reasoning-start', block: 0 },
  { type: 'reasoning-delta', block: 0, delta: 'Need the ' },
  { type: 'reasoning-delta', block: 0, delta: 'weather.' },
  { type: 'reasoning-end', block: 0, signature: SIGNATURE },
  { type: 'tool-call-start', block: 1, callId: 'call_a', name: 'weather' },
  { type: 'tool-call-delta', block: 1, argumentsDelta: '{"city":' },
  { type: 'tool-call-start', block: 2, callId: 'toolu_b', name: 'weather' },
  { type: 'tool-call-delta', block: 2, argumentsDelta: '{"city":"Oslo"}' },
  { type: 'tool-call-delta', block: 1, argumentsDelta: '"Rome"}' },
  { type: 'tool-call-end', block: 1 },
  { type: 'tool-call-end', block: 2 },
  { type: 'finish', reason: 'tool-calls', usage: { ...usage, reasoningTokens: 5, cachedInputTokens: 40 } },
]
const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: null }]

describe('POST /v1/responses', () => {
  test('non-streaming through the openai SDK: a response object, usage, the exact charge', async () => {
    const { org, client, charged } = await setup(() => events(textReply))
    const response = await client.responses.create({ model: 'scripted', input: 'hi', instructions: 'Be brief.', safety_identifier: 'end-user-7', store: false, temperature: 0.3 })
    expect(response.id).toMatch(/^resp_/)
    expect([response.object, response.status, response.model, response.error, response.incomplete_details]).toEqual(['response', 'completed', 'scripted', null, null])
    expect(response.output_text).toBe('Hello, world')
    expect(response.output).toEqual([
      { id: expect.stringMatching(/^msg_/), type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hello, world', annotations: [], logprobs: [] }] },
    ])
    expect(response.usage).toEqual({ input_tokens: 100, input_tokens_details: { cached_tokens: 0 }, output_tokens: 50, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 150 } as never)
    // The request's settings are echoed, as the API does.
    expect([response.instructions, response.temperature, (response as { store?: boolean }).store, response.tool_choice, response.previous_response_id]).toEqual(['Be brief.', 0.3, false, 'auto', null])
    expect(await charged()).toBe(EXPECTED_CHARGE)
    expect(seen[0]!.messages).toEqual([
      { role: 'system', parts: [{ type: 'text', text: 'Be brief.' }] },
      { role: 'user', parts: [{ type: 'text', text: 'hi' }] },
    ])
    expect([seen[0]!.user, seen[0]!.stream, seen[0]!.sampling.temperature]).toEqual(['end-user-7', false, 0.3])
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
  })

  test('streamed: the exact event sequence, sequence numbers from 0, usage on response.completed, charged before it', async () => {
    const { client, charged, post } = await setup(() => events(textReply))
    const raw = await sseEvents(await post({ model: 'scripted', input: 'hi', stream: true }))
    expect(raw.map(frame => frame.data.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ])
    expect(raw.map(frame => frame.event)).toEqual(raw.map(frame => frame.data.type))
    expect(raw.map(frame => frame.data.sequence_number)).toEqual(raw.map((_, index) => index))
    const itemId = raw[2]!.data.item.id
    for (const frame of raw.slice(3, 8)) expect([frame.data.item_id, frame.data.output_index, frame.data.content_index]).toEqual([itemId, 0, 0])
    expect(raw[0]!.data.response).toMatchObject({ status: 'in_progress', output: [], usage: null })
    const completed = raw[9]!.data.response
    expect(completed).toMatchObject({ id: raw[0]!.data.response.id, status: 'completed', usage: { input_tokens: 100, output_tokens: 50, total_tokens: 150 } })
    expect(completed.output).toEqual([raw[8]!.data.item])
    expect(await charged()).toBe(EXPECTED_CHARGE)

    // The SDK's helper accumulates the same stream into the final response.
    const final = await client.responses.stream({ model: 'scripted', input: 'hi' }).finalResponse()
    expect(final.output_text).toBe('Hello, world')
    expect(final.usage?.output_tokens).toBe(50)
    expect(await charged()).toBe(2n * EXPECTED_CHARGE)
  })

  test('billing equals Chat Completions billing for the same usage, streamed and not', async () => {
    const { client, charged } = await setup(() => events(toolEvents))
    await client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'x' }] })
    const chat = await charged()
    await client.responses.create({ model: 'scripted', input: 'x' })
    expect((await charged()) - chat).toBe(chat)
    await client.responses.stream({ model: 'scripted', input: 'x' }).finalResponse()
    expect((await charged()) - 2n * chat).toBe(chat)
  })

  test('reasoning and parallel tool calls: items with ids, the signature as encrypted_content, and both round-trip', async () => {
    const { client } = await setup(() => events(toolEvents))
    const question: OpenAI.Responses.ResponseInputItem = { role: 'user', content: 'Weather in Rome and Oslo?' }
    for (const streamed of [false, true]) {
      const response = streamed
        ? await client.responses.stream({ model: 'scripted', input: [question], tools, reasoning: { effort: 'low', summary: 'auto' } }).finalResponse()
        : await client.responses.create({ model: 'scripted', input: [question], tools, reasoning: { effort: 'low', summary: 'auto' } })
      expect(response.output.map(item => item.type)).toEqual(['reasoning', 'function_call', 'function_call'])
      const [reasoning, first, second] = response.output as [OpenAI.Responses.ResponseReasoningItem, OpenAI.Responses.ResponseFunctionToolCall, OpenAI.Responses.ResponseFunctionToolCall]
      expect(reasoning.id).toMatch(/^rs_/)
      expect(reasoning).toMatchObject({ summary: [{ type: 'summary_text', text: 'Need the weather.' }], encrypted_content: SIGNATURE })
      expect([first.call_id, first.name, first.arguments, first.status]).toEqual(['call_a', 'weather', '{"city":"Rome"}', 'completed'])
      expect([second.call_id, second.arguments]).toEqual(['toolu_b', '{"city":"Oslo"}'])
      expect(first.id).toMatch(/^fc_/)
      expect(response.usage).toMatchObject({ input_tokens_details: { cached_tokens: 40 }, output_tokens_details: { reasoning_tokens: 5 } })

      // The next turn sends the output back with the results: one assistant turn, ids kept.
      await client.responses.create({
        model: 'scripted',
        tools,
        input: [
          question,
          ...(response.output as OpenAI.Responses.ResponseInputItem[]),
          { type: 'function_call_output', call_id: 'call_a', output: 'sunny' },
          { type: 'function_call_output', call_id: 'toolu_b', output: [{ type: 'input_text', text: 'snow' }] },
        ],
      })
      expect(seen[seen.length - 1]!.messages).toEqual([
        { role: 'user', parts: [{ type: 'text', text: 'Weather in Rome and Oslo?' }] },
        {
          role: 'assistant',
          parts: [
            { type: 'reasoning', text: 'Need the weather.', signature: SIGNATURE },
            { type: 'tool-call', callId: 'call_a', name: 'weather', arguments: '{"city":"Rome"}' },
            { type: 'tool-call', callId: 'toolu_b', name: 'weather', arguments: '{"city":"Oslo"}' },
          ],
        },
        { role: 'tool', parts: [{ type: 'tool-result', callId: 'call_a', content: 'sunny' }] },
        { role: 'tool', parts: [{ type: 'tool-result', callId: 'toolu_b', content: 'snow' }] },
      ])
    }
  })

  test('redacted reasoning survives the round trip as opaque encrypted_content', async () => {
    const { client } = await setup(() =>
      events([
        start,
        { type: 'reasoning-start', block: 0 },
        { type: 'reasoning-end', block: 0, signature: 'opaque-data', redacted: true },
        { type: 'text-start', block: 1 },
        { type: 'text-delta', block: 1, delta: 'Done.' },
        { type: 'text-end', block: 1 },
        { type: 'finish', reason: 'stop', usage },
      ]),
    )
    const response = await client.responses.stream({ model: 'scripted', input: 'x' }).finalResponse()
    const reasoning = response.output[0] as OpenAI.Responses.ResponseReasoningItem
    expect(reasoning.summary).toEqual([])
    expect(reasoning.encrypted_content).toBe('redacted:opaque-data')
    await client.responses.create({ model: 'scripted', input: [{ role: 'user', content: 'x' }, ...(response.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'y' }] })
    expect(seen[1]!.messages[1]!.parts).toEqual([{ type: 'reasoning', text: '', signature: 'opaque-data', redacted: true }, { type: 'text', text: 'Done.' }])
  })

  test("a refused answer round-trips: the SDK's output, with the parsed: null it adds to every content part, is the next turn's input", async () => {
    const { client } = await setup(() =>
      events([
        start,
        { type: 'text-start', block: 0 },
        { type: 'text-delta', block: 0, delta: 'I cannot help.', refusal: true },
        { type: 'text-end', block: 0 },
        { type: 'finish', reason: 'stop', usage },
      ]),
    )
    const response = await client.responses.stream({ model: 'scripted', input: 'hi' }).finalResponse()
    expect((response.output[0] as OpenAI.Responses.ResponseOutputMessage).content).toEqual([{ type: 'refusal', refusal: 'I cannot help.', parsed: null } as never])
    // Before: 400 unknown field "input.1.content.0.parsed".
    await client.responses.create({ model: 'scripted', input: [{ role: 'user', content: 'hi' }, ...(response.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'please' }] })
    expect(seen[1]!.messages).toEqual([
      { role: 'user', parts: [{ type: 'text', text: 'hi' }] },
      { role: 'assistant', parts: [{ type: 'text', text: 'I cannot help.' }] },
      { role: 'user', parts: [{ type: 'text', text: 'please' }] },
    ])
  })

  test('truncation: status incomplete with max_output_tokens, streamed as response.incomplete', async () => {
    const cut: ChatEvent[] = [start, { type: 'text-start', block: 0 }, { type: 'text-delta', block: 0, delta: 'Once upon' }, { type: 'text-end', block: 0 }, { type: 'finish', reason: 'length', usage }]
    const { client, post } = await setup(() => events(cut))
    const response = await client.responses.create({ model: 'scripted', input: 'story', max_output_tokens: 16 })
    expect([response.status, response.incomplete_details?.reason, response.max_output_tokens]).toEqual(['incomplete', 'max_output_tokens', 16])
    expect((response.output[0] as OpenAI.Responses.ResponseOutputMessage).status).toBe('incomplete')
    expect(seen[0]!.sampling.maxOutputTokens).toBe(16)
    const raw = await sseEvents(await post({ model: 'scripted', input: 'story', stream: true }))
    expect(raw[raw.length - 1]!.data).toMatchObject({ type: 'response.incomplete', response: { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } } })
    const final = await client.responses.stream({ model: 'scripted', input: 'story' }).finalResponse()
    expect([final.status, final.output_text]).toEqual(['incomplete', 'Once upon'])
  })

  test('upstream failure before output: 502 provider_error in the OpenAI envelope, nothing charged', async () => {
    const { client, charged } = await setup(() => Promise.reject(new UpstreamError('server', 'boom', 'fake', 'm', { status: 500 })))
    const error = await client.responses.create({ model: 'scripted', input: 'x', stream: true }).catch(error => error)
    expect(error).toBeInstanceOf(OpenAI.APIError)
    expect([error.status, error.code, error.type]).toEqual([502, 'provider_error', 'server_error'])
    expect(await charged()).toBe(0n)
  })

  test('mid-stream upstream failure: response.failed in-band with the output so far; the output sent is charged', async () => {
    const failing: ChatEvent[] = [
      start,
      { type: 'text-start', block: 0 },
      { type: 'text-delta', block: 0, delta: 'abcdefgh' },
      { type: 'error', error: new UpstreamError('server', 'reset', 'fake', 'm') },
    ]
    const { client, charged, post } = await setup(() => events(failing))
    const raw = await sseEvents(await post({ model: 'scripted', input: 'hi', stream: true }))
    const last = raw[raw.length - 1]!
    expect(raw.map(frame => frame.data.type).slice(-2)).toEqual(['response.output_text.delta', 'response.failed'])
    expect(last.data.sequence_number).toBe(raw.length - 1)
    expect(last.data.response).toMatchObject({ status: 'failed', error: { code: 'server_error' }, usage: null })
    expect(last.data.response.output).toEqual([{ id: raw[2]!.data.item.id, type: 'message', status: 'incomplete', role: 'assistant', content: [{ type: 'output_text', text: 'abcdefgh', annotations: [], logprobs: [] }] }])
    // Fallback: the input estimate plus 2 output tokens (8 bytes / 4), never zero.
    const first = await charged()
    expect(first).toBeGreaterThan(2n * 2000n)

    // The SDK's helper ends with the failed response; its events are all accepted.
    const final = await client.responses.stream({ model: 'scripted', input: 'hi' }).finalResponse()
    expect([final.status, final.error?.code, final.output_text]).toEqual(['failed', 'server_error', 'abcdefgh'])
    expect(await charged()).toBe(2n * first)
  })

  test('client disconnect mid-stream aborts the upstream, frees the slot and charges the output sent', async () => {
    let upstreamAborted = false
    const { org, charged, post } = await setup((_request, signal) => {
      signal.addEventListener('abort', () => (upstreamAborted = true))
      return events([start, { type: 'text-start', block: 0 }, { type: 'text-delta', block: 0, delta: 'partial' }], signal)
    })
    const abort = new AbortController()
    const response = await post({ model: 'scripted', input: 'hi', stream: true }, abort.signal)
    const reader = response.body!.getReader()
    let received = ''
    while (!received.includes('partial')) received += new TextDecoder().decode((await reader.read()).value)
    abort.abort()
    await poll('the upstream to be aborted and the slot freed', 200, 5, () => (upstreamAborted && t.deps.limits.concurrency.inUse(org.orgId) === 0 ? true : undefined))
    await poll('the settlement', 200, 5, async () => ((await charged()) > 0n ? true : undefined))
  })
})
