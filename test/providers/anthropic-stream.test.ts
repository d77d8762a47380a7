import { describe, expect, test } from 'bun:test'
import { decodeSse, type SseEvent } from '../../src/http/sse'
import type { ChatEvent } from '../../src/inference/canonical'
import { AnthropicStreamTranslator } from '../../src/providers/anthropic/from-upstream-stream'
import { mapFinishReason } from '../../src/providers/anthropic/map-finish-reason'
import { UpstreamError } from '../../src/providers/types'

const NOW = Date.UTC(2026, 0, 15, 12, 0, 0)
const CONTEXT = { provider: 'anthropic:claude', model: 'claude-sonnet-4-5-20250929' }
const fixture = (name: string) => Bun.file(new URL(`../fixtures/upstream/anthropic/${name}`, import.meta.url)).text()
const SIGNATURE = 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds=='

/** Runs raw SSE bytes, cut into `chunks`, through decodeSse and the translator. */
async function translate(chunks: Uint8Array[]): Promise<ChatEvent[]> {
  const translator = new AnthropicStreamTranslator(CONTEXT, () => NOW, 'req_1')
  async function* source() {
    yield* chunks
  }
  const events: ChatEvent[] = []
  for await (const sse of decodeSse(source())) {
    events.push(...translator.push(sse))
    if (translator.done) return events
  }
  events.push(...translator.end())
  return events
}

/** Feeds already-decoded events (for shapes no fixture has). */
function run(...payloads: unknown[]): ChatEvent[] {
  const translator = new AnthropicStreamTranslator(CONTEXT, () => NOW, 'req_1')
  const events: ChatEvent[] = []
  for (const payload of payloads) {
    const sse: SseEvent = typeof payload === 'string' ? { event: undefined, data: payload } : { event: (payload as { type: string }).type, data: JSON.stringify(payload) }
    events.push(...translator.push(sse))
  }
  return events
}

const usage = (inputTokens: number, outputTokens: number, cachedInputTokens?: number) => ({
  inputTokens,
  ...(cachedInputTokens !== undefined ? { cachedInputTokens } : {}),
  outputTokens,
  webSearchRequests: 0,
  webFetchRequests: 0,
})

/** message_start's usage is announced on response-start as the canonical prompt total (cache reads and writes included). */
const start = (id: string, inputTokens: number, model = CONTEXT.model, cachedInputTokens?: number) => ({ type: 'response-start', id, model, createdAt: NOW, inputTokens, ...(cachedInputTokens ? { cachedInputTokens } : {}) })

/** `events` with the usage event message_delta yields (its counts are the finish's) before the finish. */
function withReportedUsage(events: ChatEvent[]): ChatEvent[] {
  const finish = events.at(-1)!
  return finish.type === 'finish' ? [...events.slice(0, -1), { type: 'usage', usage: finish.usage }, finish] : events
}

const EXPECTED: Record<string, ChatEvent[]> = {
  'text.sse': withReportedUsage([
    start('msg_01TextFixture', 25) as ChatEvent,
    { type: 'text-start', block: 0 },
    { type: 'text-delta', block: 0, delta: 'Héllo' },
    { type: 'text-delta', block: 0, delta: ' wörld 🌍, ' },
    { type: 'text-delta', block: 0, delta: 'こんにちは\n' },
    { type: 'text-end', block: 0 },
    { type: 'finish', reason: 'stop', usage: usage(25, 15, 0) },
  ]),
  'thinking-tool.sse': withReportedUsage([
    start('msg_01ThinkTool', 472) as ChatEvent,
    { type: 'reasoning-start', block: 0 },
    { type: 'reasoning-delta', block: 0, delta: 'The user wants the weather in Paris.\n' },
    { type: 'reasoning-delta', block: 0, delta: 'I should call get_weather.' },
    { type: 'reasoning-end', block: 0, signature: SIGNATURE },
    { type: 'text-start', block: 1 },
    { type: 'text-delta', block: 1, delta: 'Let me check.' },
    { type: 'text-end', block: 1 },
    { type: 'tool-call-start', block: 2, callId: 'toolu_01Weather', name: 'get_weather', jsonObject: true },
    { type: 'tool-call-delta', block: 2, argumentsDelta: '{"locat' },
    { type: 'tool-call-delta', block: 2, argumentsDelta: 'ion": "Par' },
    { type: 'tool-call-delta', block: 2, argumentsDelta: 'is", "unit": "°C"}' },
    { type: 'tool-call-end', block: 2 },
    { type: 'finish', reason: 'tool-calls', usage: usage(472, 89, 0) },
  ]),
  'parallel-tools.sse': withReportedUsage([
    // Its message_start reports 2,000 cache reads and 50 cache writes among the 2,062 input tokens.
    { ...start('msg_01Parallel', 2062, CONTEXT.model, 2000), cacheWriteInputTokens: 50 } as ChatEvent,
    { type: 'tool-call-start', block: 0, callId: 'toolu_01Paris', name: 'get_weather', jsonObject: true },
    { type: 'tool-call-delta', block: 0, argumentsDelta: '{"location":' },
    { type: 'tool-call-delta', block: 0, argumentsDelta: ' "Paris"}' },
    { type: 'tool-call-end', block: 0 },
    { type: 'tool-call-start', block: 1, callId: 'toolu_01Tokyo', name: 'get_weather', jsonObject: true },
    { type: 'tool-call-delta', block: 1, argumentsDelta: '{"location": "Tok' },
    { type: 'tool-call-delta', block: 1, argumentsDelta: 'yo"}' },
    { type: 'tool-call-end', block: 1 },
    // input 12 + cache writes 50 + cache reads 2000; reads are the cached part, writes told apart.
    { type: 'finish', reason: 'tool-calls', usage: { ...usage(2062, 64, 2000), cacheWriteInputTokens: 50 } },
  ]),
  'redacted-thinking.sse': withReportedUsage([
    start('msg_01Redacted', 40, 'claude-3-7-sonnet-20250219') as ChatEvent,
    { type: 'reasoning-start', block: 0 },
    { type: 'reasoning-end', block: 0, signature: 'EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP', redacted: true } as ChatEvent,
    { type: 'text-start', block: 1 },
    { type: 'text-delta', block: 1, delta: '42' },
    { type: 'text-end', block: 1 },
    { type: 'finish', reason: 'length', usage: usage(40, 300) },
  ]),
}

describe('anthropic stream translation: fixtures split at every byte', () => {
  for (const [name, expected] of Object.entries(EXPECTED)) {
    test(`${name}: one chunk, then every two-way cut, then 1-byte chunks`, async () => {
      const bytes = new TextEncoder().encode(await fixture(name))
      expect(await translate([bytes])).toEqual(expected)
      for (let cut = 1; cut < bytes.length; cut += 1) {
        const events = await translate([bytes.subarray(0, cut), bytes.subarray(cut)])
        if (!Bun.deepEquals(events, expected)) expect({ cut, events }).toEqual({ cut, events: expected })
      }
      expect(await translate([...bytes].map(byte => new Uint8Array([byte])))).toEqual(expected)
    })
  }

  test('thinking-tool.sse: the tool arguments reassemble to the JSON the model wrote', async () => {
    const events = await translate([new TextEncoder().encode(await fixture('thinking-tool.sse'))])
    const args = events.flatMap(event => (event.type === 'tool-call-delta' ? [event.argumentsDelta] : [])).join('')
    expect(JSON.parse(args)).toEqual({ location: 'Paris', unit: '°C' })
  })

  test('error-mid-stream.sse: text so far, then one in-band error classified from the event', async () => {
    const events = await translate([new TextEncoder().encode(await fixture('error-mid-stream.sse'))])
    expect(events.slice(0, -1)).toEqual([start('msg_01Overload', 9) as ChatEvent, { type: 'text-start', block: 0 }, { type: 'text-delta', block: 0, delta: 'Partial' }])
    const last = events.at(-1)
    expect(last?.type).toBe('error')
    const error = (last as Extract<ChatEvent, { type: 'error' }>).error
    expect(error).toBeInstanceOf(UpstreamError)
    expect(error.kind).toBe('server')
    expect(error.provider).toBe(CONTEXT.provider)
    expect(error.model).toBe(CONTEXT.model)
    expect(error.message).toContain('overloaded_error')
  })

  test('a stream cut before message_stop ends with an in-band server error', async () => {
    const text = await fixture('text.sse')
    const cut = text.slice(0, text.indexOf('event: message_delta'))
    const events = await translate([new TextEncoder().encode(cut)])
    // Everything before message_delta: no usage event, no finish.
    expect(events.slice(0, -1)).toEqual(EXPECTED['text.sse']!.slice(0, -2))
    const last = events.at(-1) as Extract<ChatEvent, { type: 'error' }>
    expect(last.type).toBe('error')
    expect(last.error.kind).toBe('server')
    expect(last.error.message).toContain('message_stop')
  })
})

describe('anthropic stream translation: protocol details', () => {
  const messageStart = (usage: Record<string, number> = { input_tokens: 10, output_tokens: 1 }) => ({
    type: 'message_start',
    message: { id: 'msg_x', type: 'message', role: 'assistant', model: 'claude-x', content: [], usage },
  })

  test('content after the message_delta that stopped the answer is not output, so not billed unreported', () => {
    // Before, a broken upstream's 4,000 bytes after message_delta (output_tokens 1) reached the client, billed 1 token.
    const events = run(
      messageStart(),
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'ok' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 1 } },
      { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'x'.repeat(4000) } },
      { type: 'content_block_stop', index: 1 },
      { type: 'message_stop' },
    )
    expect(events.filter(event => event.type === 'text-delta')).toEqual([{ type: 'text-delta', block: 0, delta: 'ok' }])
    expect(events.at(-1)).toEqual({ type: 'finish', reason: 'stop', usage: usage(10, 1) })
  })

  test('message_delta usage is cumulative and replaces what message_start said', () => {
    const events = run(
      messageStart({ input_tokens: 10, cache_read_input_tokens: 5, output_tokens: 1 }),
      { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 7 } },
      { type: 'message_delta', delta: {}, usage: { input_tokens: 12, cache_read_input_tokens: 6, output_tokens: 9 } },
      { type: 'message_stop' },
    )
    expect(events.at(-1)).toEqual({ type: 'finish', reason: 'stop', usage: usage(18, 9, 6) })
  })

  // QA: a relay writing input_tokens 0 in message_delta ("not repeated") made a finished stream
  // bill the gateway's estimate instead of the input message_start announced.
  test("message_delta's input-side counts below message_start's are not taken: cumulative counts never fall", () => {
    const events = run(
      messageStart({ input_tokens: 427, cache_read_input_tokens: 5, output_tokens: 1 }),
      { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 9 } },
      { type: 'message_stop' },
    )
    expect(events.at(-1)).toEqual({ type: 'finish', reason: 'stop', usage: usage(432, 9, 5) })
  })

  test("cache writes split by lifetime: the 1-hour part as cache_creation says, kept when message_delta repeats 0; unsplit, read by the request's hints", () => {
    const start = { type: 'message_start', message: { id: 'msg_x', type: 'message', role: 'assistant', model: 'claude-x', content: [], usage: { input_tokens: 4, cache_creation_input_tokens: 30, cache_creation: { ephemeral_5m_input_tokens: 10, ephemeral_1h_input_tokens: 20 }, output_tokens: 1 } } }
    const delta = { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 9, cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 } } }
    const events = run(start, delta, { type: 'message_stop' })
    expect(events[0]).toMatchObject({ type: 'response-start', inputTokens: 34, cacheWriteInputTokens: 30, cacheWrite1hInputTokens: 20 })
    expect(events.at(-1)).toEqual({ type: 'finish', reason: 'stop', usage: { ...usage(34, 9), cacheWriteInputTokens: 30, cacheWrite1hInputTokens: 20 } })
    // Without cache_creation: 1-hour writes only when the request set a 1-hour hint (the dearer reading).
    const unsplit = { ...start, message: { ...start.message, usage: { input_tokens: 4, cache_creation_input_tokens: 30, output_tokens: 1 } } }
    const finish = (oneHourHints: boolean) => {
      const translator = new AnthropicStreamTranslator(CONTEXT, () => NOW, 'req_1', oneHourHints)
      return [unsplit, { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 9 } }, { type: 'message_stop' }].flatMap(payload => translator.push({ event: payload.type, data: JSON.stringify(payload) })).at(-1)
    }
    expect(finish(false)).toEqual({ type: 'finish', reason: 'stop', usage: { ...usage(34, 9), cacheWriteInputTokens: 30 } })
    expect(finish(true)).toEqual({ type: 'finish', reason: 'stop', usage: { ...usage(34, 9), cacheWriteInputTokens: 30, cacheWrite1hInputTokens: 30 } })
  })

  test('a stop_sequence stop names its sequence on finish (end_turn does not)', () => {
    const stopped = run(messageStart(), { type: 'message_delta', delta: { stop_reason: 'stop_sequence', stop_sequence: '###' }, usage: { output_tokens: 2 } }, { type: 'message_stop' })
    expect(stopped.at(-1)).toEqual({ type: 'finish', reason: 'stop', usage: usage(10, 2), stopSequence: '###' })
    const ended = run(messageStart(), { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } }, { type: 'message_stop' })
    expect(ended.at(-1)).toEqual({ type: 'finish', reason: 'stop', usage: usage(10, 2) })
  })

  test('unknown events, server-tool blocks and unknown deltas are ignored; block numbers stay dense', () => {
    const events = run(
      messageStart(),
      { type: 'content_block_start', index: 0, content_block: { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} } },
      { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"q":1}' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'some_future_event', payload: 1 },
      { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '', citations: [] } },
      { type: 'content_block_delta', index: 1, delta: { type: 'citations_delta', citation: { type: 'web_search_result_location' } } },
      { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'ok' } },
      { type: 'content_block_delta', index: 7, delta: { type: 'text_delta', text: 'orphan' } },
      { type: 'content_block_stop', index: 1 },
      { type: 'message_delta', delta: { stop_reason: 'pause_turn' }, usage: { output_tokens: 3 } },
      { type: 'message_stop' },
      { type: 'message_start', message: { id: 'late' } },
    )
    expect(events).toEqual([
      start('msg_x', 10, 'claude-x') as ChatEvent,
      { type: 'text-start', block: 0 },
      { type: 'text-delta', block: 0, delta: 'ok' },
      { type: 'text-end', block: 0 },
      { type: 'usage', usage: usage(10, 3) },
      { type: 'finish', reason: 'other', usage: usage(10, 3) },
    ])
  })

  test('a block left open at message_stop is closed before finish', () => {
    const events = run(
      messageStart(),
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'sig' } },
      { type: 'message_stop' },
    )
    expect(events.slice(1)).toEqual([
      { type: 'reasoning-start', block: 0 },
      { type: 'reasoning-end', block: 0, signature: 'sig' },
      { type: 'finish', reason: 'other', usage: usage(10, 0) },
    ])
  })

  // message_start's output_tokens is Anthropic's placeholder (1, before anything was generated):
  // only message_delta's valid count is the answer's. Without one the finish reports 0 output
  // tokens, which the meter replaces with its count of the output sent (meter.ts).
  for (const [name, deltaUsage] of [
    ['no usage', undefined],
    ['a negative count', { output_tokens: -1 }],
    ['a string', { output_tokens: '40' }],
    ['null', { output_tokens: null }],
  ] as const) {
    test(`message_delta with ${name}: message_start's placeholder output count is not the answer's`, () => {
      const events = run(
        messageStart({ input_tokens: 10, cache_read_input_tokens: 4, output_tokens: 1 }),
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'a long answer' } },
        { type: 'content_block_stop', index: 0 },
        { type: 'message_delta', delta: { stop_reason: 'end_turn' }, ...(deltaUsage === undefined ? {} : { usage: deltaUsage }) },
        { type: 'message_stop' },
      )
      expect(events.at(-1)).toEqual({ type: 'finish', reason: 'stop', usage: usage(14, 0, 4) })
    })
  }

  test('a stream cut after message_delta carries its usage on the error event; cut before it, the input only', () => {
    const text = [
      messageStart({ input_tokens: 10, output_tokens: 1 }),
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'answer' } },
      { type: 'content_block_stop', index: 0 },
    ]
    const cutAfter = new AnthropicStreamTranslator(CONTEXT, () => NOW, 'req_1')
    for (const payload of [...text, { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 7 } }]) cutAfter.push({ event: payload.type, data: JSON.stringify(payload) })
    expect(cutAfter.end()).toMatchObject([{ type: 'error', usage: usage(10, 7) }])
    const cutBefore = new AnthropicStreamTranslator(CONTEXT, () => NOW, 'req_1')
    for (const payload of text) cutBefore.push({ event: payload.type, data: JSON.stringify(payload) })
    expect(cutBefore.end()).toMatchObject([{ type: 'error', usage: usage(10, 0) }])
    // Nothing reported: no usage on the error.
    expect(new AnthropicStreamTranslator(CONTEXT, () => NOW, 'req_1').end()[0]).not.toHaveProperty('usage')
  })

  test('no message_delta at all: no output count; a whole message without one neither', () => {
    expect(run(messageStart(), { type: 'message_stop' }).at(-1)).toEqual({ type: 'finish', reason: 'other', usage: usage(10, 0) })
    const whole = new AnthropicStreamTranslator(CONTEXT, () => NOW, 'req_1').message(
      JSON.stringify({ id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [{ type: 'text', text: 'hi' }], stop_reason: 'end_turn', usage: { input_tokens: 3, output_tokens: 'x' } }),
    )
    expect(whole.at(-1)).toEqual({ type: 'finish', reason: 'stop', usage: usage(3, 0) })
  })

  test('a tool call without input has the arguments "{}", streamed and whole, as Chat Completions clients parse them', () => {
    // Anthropic streams a no-argument tool_use as `input: {}` and at most an empty
    // input_json_delta: its input is the object {}, never an empty text.
    const streamed = run(
      messageStart(),
      { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 'now', input: {} } },
      { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_2', name: 'later', input: {} } },
      { type: 'message_stop' },
    )
    expect(streamed.slice(1, -1)).toEqual([
      { type: 'tool-call-start', block: 0, callId: 'toolu_1', name: 'now', jsonObject: true },
      { type: 'tool-call-delta', block: 0, argumentsDelta: '{}' },
      { type: 'tool-call-end', block: 0 },
      { type: 'tool-call-start', block: 1, callId: 'toolu_2', name: 'later', jsonObject: true },
      { type: 'tool-call-delta', block: 1, argumentsDelta: '{}' },
      { type: 'tool-call-end', block: 1 },
    ])
    const whole = new AnthropicStreamTranslator(CONTEXT, () => NOW, 'req_1').message(
      JSON.stringify({ id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [{ type: 'tool_use', id: 'toolu_1', name: 'now', input: {} }], stop_reason: 'tool_use', usage: { input_tokens: 3, output_tokens: 2 } }),
    )
    expect(whole.filter(event => event.type === 'tool-call-delta')).toEqual([{ type: 'tool-call-delta', block: 0, argumentsDelta: '{}' }])
  })

  test('content before message_start still yields response-start first', () => {
    const events = run({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: 'pre' } }, { type: 'message_stop' })
    expect(events).toEqual([
      { type: 'response-start', id: '', model: CONTEXT.model, createdAt: NOW },
      { type: 'text-start', block: 0 },
      { type: 'text-delta', block: 0, delta: 'pre' },
      { type: 'text-end', block: 0 },
      { type: 'finish', reason: 'other', usage: usage(0, 0) },
    ])
  })

  test('data that is not a JSON object is a protocol error; nothing follows it', () => {
    const events = run(messageStart(), 'not json', { type: 'message_stop' })
    expect(events).toHaveLength(2)
    const error = (events[1] as Extract<ChatEvent, { type: 'error' }>).error
    expect(error.kind).toBe('server')
  })

  test('in-stream error types map to kinds', () => {
    const kinds: Record<string, string> = {
      overloaded_error: 'server',
      api_error: 'server',
      rate_limit_error: 'rate-limited',
      authentication_error: 'auth',
      permission_error: 'auth',
      invalid_request_error: 'bad-request',
      request_too_large: 'bad-request',
      not_found_error: 'not-found',
      never_heard_of_it: 'server',
    }
    for (const [type, kind] of Object.entries(kinds)) {
      const [event] = run({ type: 'error', error: { type, message: 'm' } })
      const actual: string = (event as Extract<ChatEvent, { type: 'error' }>).error.kind
      expect({ type, kind: actual }).toEqual({ type, kind })
    }
  })

  test('stop reasons', () => {
    const reasons: Array<[string | null, string]> = [
      ['end_turn', 'stop'],
      ['stop_sequence', 'stop'],
      ['max_tokens', 'length'],
      ['model_context_window_exceeded', 'length'],
      ['tool_use', 'tool-calls'],
      ['refusal', 'content-filter'],
      ['pause_turn', 'other'],
      [null, 'other'],
      ['brand_new_reason', 'other'],
    ]
    for (const [reason, finish] of reasons) expect({ reason, finish: mapFinishReason(reason) as string }).toEqual({ reason, finish })
  })
})
