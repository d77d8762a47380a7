import { describe, expect, test } from 'bun:test'
import { decodeSse } from '../../src/http/sse'
import type { ChatEvent } from '../../src/inference/canonical'
import { fromUpstreamStream } from '../../src/providers/openai-compatible/from-upstream-stream'
import { mapFinishReason } from '../../src/providers/openai-compatible/map-finish-reason'
import { splitEvery } from '../support/fake-upstream'
import { assertEventGrammar, summarize } from './events'
import { chunk, DONE, frame } from './openai-wire'

const CONTEXT = { provider: 'openai-compatible:test', model: 'upstream-model', requestId: 'req_1' }

/** Runs SSE text through the real decoder and the translator, split every `size` bytes. */
async function translate(body: string, size = 1 << 20): Promise<ChatEvent[]> {
  async function* bytes() {
    yield* splitEvery(new TextEncoder().encode(body), size)
  }
  const events: ChatEvent[] = []
  for await (const event of fromUpstreamStream(decodeSse(bytes()), CONTEXT)) events.push(event)
  assertEventGrammar(events)
  return events
}

const START = chunk({ role: 'assistant', content: '' })

describe('fromUpstreamStream', () => {
  test('the exact event sequence of a text stream with usage', async () => {
    const events = await translate(
      START +
        chunk({ content: 'Hel' }) +
        chunk({ content: 'lo' }) +
        chunk({}, 'stop') +
        frame({ id: 'x', choices: [], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7, prompt_tokens_details: { cached_tokens: 3 }, completion_tokens_details: { reasoning_tokens: 0 } } }) +
        DONE,
    )
    expect(events).toEqual([
      { type: 'response-start', id: 'chatcmpl-test123', model: 'upstream-model-2025', createdAt: 1_700_000_000_000 },
      { type: 'text-start', block: 0 },
      { type: 'text-delta', block: 0, delta: 'Hel' },
      { type: 'text-delta', block: 0, delta: 'lo' },
      { type: 'text-end', block: 0 },
      { type: 'finish', reason: 'stop', usage: { inputTokens: 5, cachedInputTokens: 3, outputTokens: 2, reasoningTokens: 0, webSearchRequests: 0, webFetchRequests: 0 } },
    ])
  })

  test('`reasoning` (Ollama, newer vLLM) and `reasoning_content` (DeepSeek, older vLLM) both become reasoning; both at once count once', async () => {
    const summary = summarize(
      await translate(START + chunk({ reasoning: 'a ' }) + chunk({ reasoning_content: 'b ' }) + chunk({ reasoning: 'c', reasoning_content: 'c' }) + chunk({ content: 'done' }, 'stop') + DONE),
    )
    expect(summary.reasoning).toBe('a b c')
    expect(summary.blocks.map(block => block.kind)).toEqual(['reasoning', 'text'])
    expect(summary.reasoningSignatures).toEqual([undefined])
  })

  test('usage riding on the finish chunk (no separate usage chunk) is kept', async () => {
    const summary = summarize(await translate(START + chunk({ content: 'x' }) + chunk({}, 'stop', { usage: { prompt_tokens: 9, completion_tokens: 1 } }) + DONE))
    expect(summary.finish?.usage).toEqual({ inputTokens: 9, outputTokens: 1, webSearchRequests: 0, webFetchRequests: 0 })
  })

  test('continuous usage (vLLM): the last report wins', async () => {
    const body = chunk({ content: 'a' }, null, { usage: { prompt_tokens: 4, completion_tokens: 1 } }) + chunk({ content: 'b' }, 'stop', { usage: { prompt_tokens: 4, completion_tokens: 2 } }) + DONE
    expect(summarize(await translate(body)).finish?.usage).toMatchObject({ inputTokens: 4, outputTokens: 2 })
  })

  test('the answer ends at a usage after the finish_reason, not at [DONE]: a cut after it loses nothing', async () => {
    // Before, the finish waited for [DONE]: a client that left, or a reset, in between was billed
    // the meter's estimate instead of the count the upstream had reported.
    async function* bytes() {
      yield new TextEncoder().encode(START + chunk({ content: 'x' }) + chunk({}, 'stop') + frame({ id: 'x', choices: [], usage: { prompt_tokens: 9, completion_tokens: 500 } }))
      throw new Error('connection reset')
    }
    const events: ChatEvent[] = []
    for await (const event of fromUpstreamStream(decodeSse(bytes()), CONTEXT)) events.push(event)
    assertEventGrammar(events)
    expect(summarize(events).finish).toEqual({ reason: 'stop', usage: { inputTokens: 9, outputTokens: 500, webSearchRequests: 0, webFetchRequests: 0 } })
  })

  test('a usage from before the finish_reason, none after: its input only, for the output that followed it is not in it', async () => {
    // Before, its completion_tokens (1) was billed for all the text after it.
    const body = START + frame({ id: 'x', choices: [], usage: { prompt_tokens: 9, completion_tokens: 1 } }) + chunk({ content: 'and a great deal of text after it' }) + chunk({}, 'stop') + DONE
    expect(summarize(await translate(body)).finish?.usage).toEqual({ inputTokens: 9, outputTokens: 0, webSearchRequests: 0, webFetchRequests: 0 })
  })

  test('no usage reported: finish carries zeros and no subsets (the meter estimates)', async () => {
    const summary = summarize(await translate(START + chunk({ content: 'no usage here' }) + chunk({}, 'stop') + DONE))
    expect(summary.finish).toEqual({ reason: 'stop', usage: { inputTokens: 0, outputTokens: 0, webSearchRequests: 0, webFetchRequests: 0 } })
  })

  test('parallel tool calls with interleaved deltas stay apart by index', async () => {
    const body =
      START +
      chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }] }) +
      chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{"zo' } }] }) +
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }) +
      chunk({ tool_calls: [{ index: 1, function: { arguments: 'ne":"UTC"}' } }] }) +
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }) +
      chunk({}, 'tool_calls') +
      DONE
    const summary = summarize(await translate(body))
    expect(summary.toolCalls).toEqual([
      { block: 0, callId: 'call_a', name: 'get_weather', arguments: '{"city":"Oslo"}' },
      { block: 1, callId: 'call_b', name: 'get_time', arguments: '{"zone":"UTC"}' },
    ])
    expect(summary.finish?.reason).toBe('tool-calls')
  })

  test('several tool calls in one delta; a missing id gets a stable one; a name arriving late keeps the early arguments', async () => {
    const body =
      START +
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a"' } }] }) +
      chunk({ tool_calls: [{ index: 0, function: { name: 'get_time', arguments: ':1}' } }, { index: 1, id: 'call_x', function: { name: 'get_weather', arguments: '{}' } }] }) +
      chunk({}, 'tool_calls') +
      DONE
    const summary = summarize(await translate(body))
    expect(summary.toolCalls).toEqual([
      { block: 0, callId: 'call_req_1_0', name: 'get_time', arguments: '{"a":1}' },
      { block: 1, callId: 'call_x', name: 'get_weather', arguments: '{}' },
    ])
  })

  test('Ollama: parallel calls each whole in its own chunk at index 0, or with no index, are separate calls by their ids', async () => {
    for (const index of [{ index: 0 }, {}]) {
      const body =
        START +
        chunk({ tool_calls: [{ ...index, id: 'call_AAA111', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Oslo"}' } }] }) +
        chunk({ tool_calls: [{ ...index, id: 'call_BBB222', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] }) +
        chunk({ tool_calls: [{ ...index, id: 'call_BBB222', function: { arguments: '' } }] }) + // the same id again: the same call
        chunk({}, 'tool_calls') +
        DONE
      expect(summarize(await translate(body)).toolCalls).toEqual([
        { block: 0, callId: 'call_AAA111', name: 'get_weather', arguments: '{"city": "Oslo"}' },
        { block: 1, callId: 'call_BBB222', name: 'get_weather', arguments: '{"city": "Paris"}' },
      ])
    }
  })

  test('text before a tool call ends before the call starts', async () => {
    const events = await translate(START + chunk({ content: 'Checking.' }) + chunk({ tool_calls: [{ index: 0, id: 'c', function: { name: 'f', arguments: '{}' } }] }) + chunk({}, 'tool_calls') + DONE)
    expect(events.map(event => event.type)).toEqual(['response-start', 'text-start', 'text-delta', 'text-end', 'tool-call-start', 'tool-call-delta', 'tool-call-end', 'finish'])
  })

  test('finish "stop" after tool calls (forced tool_choice, Ollama) reports tool-calls', async () => {
    const summary = summarize(await translate(START + chunk({ tool_calls: [{ index: 0, id: 'c', function: { name: 'f', arguments: '{}' } }] }) + chunk({}, 'stop') + DONE))
    expect(summary.finish?.reason).toBe('tool-calls')
  })

  test('the legacy function_call delta is a tool call', async () => {
    const summary = summarize(await translate(START + chunk({ function_call: { name: 'f', arguments: '{"x"' } }) + chunk({ function_call: { arguments: ':2}' } }) + chunk({}, 'function_call') + DONE))
    expect(summary.toolCalls).toEqual([{ block: 0, callId: 'call_req_1_0', name: 'f', arguments: '{"x":2}' }])
    expect(summary.finish?.reason).toBe('tool-calls')
  })

  test('a refusal is shown as text; content_filter maps to content-filter', async () => {
    const summary = summarize(await translate(START + chunk({ refusal: "I can't help with that." }) + chunk({}, 'content_filter') + DONE))
    expect(summary.text).toBe("I can't help with that.")
    expect(summary.finish?.reason).toBe('content-filter')
  })

  test('an in-band error chunk ends the stream with a server error carrying its message', async () => {
    const events = await translate(START + chunk({ content: 'partial' }) + frame({ error: { message: 'upstream overloaded', type: 'server_error' } }) + chunk({ content: 'ignored' }) + DONE)
    const summary = summarize(events)
    expect(summary.text).toBe('partial')
    expect(summary.error?.kind).toBe('server')
    expect(summary.error?.message).toContain('upstream overloaded')
    expect(summary.error?.provider).toBe(CONTEXT.provider)
  })

  test('an in-band rate limit is a rate-limited error, as the same refusal as HTTP 429 is', async () => {
    for (const error of [{ message: 'slow down', code: 'rate_limit_exceeded' }, { message: 'slow down', type: 'requests', code: 429 }, { object: 'error', message: 'slow down', type: 'RateLimitError', code: 429 }]) {
      const body = 'object' in error ? frame(error) : frame({ error })
      expect(summarize(await translate(body + DONE)).error?.kind).toBe('rate-limited')
    }
  })

  test('a clean end after finish_reason without [DONE] finishes; [DONE] without finish_reason finishes "other"', async () => {
    expect(summarize(await translate(START + chunk({ content: 'a' }) + chunk({}, 'stop') + frame({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } }))).finish).toMatchObject({ reason: 'stop', usage: { inputTokens: 1 } })
    expect(summarize(await translate(START + chunk({ content: 'a' }) + DONE)).finish?.reason).toBe('other')
  })

  test('no chunk at all, or nothing but [DONE]: one error, never an empty success', async () => {
    for (const body of ['', ': just a comment\n\n', DONE]) {
      const events = await translate(body)
      expect(events).toHaveLength(1)
      expect(events[0]).toMatchObject({ type: 'error', error: { kind: 'server' } })
    }
  })

  test('a choice other than 0, an empty delta and a null finish_reason are ignored', async () => {
    const body =
      START +
      frame({ id: 'x', choices: [{ index: 1, delta: { content: 'other choice' }, finish_reason: null }] }) +
      chunk({}) +
      chunk({ content: 'mine' }) +
      chunk({}, 'stop') +
      DONE
    expect(summarize(await translate(body)).text).toBe('mine')
  })

  test('a delta after the finish_reason cannot reopen blocks', async () => {
    const events = await translate(START + chunk({ content: 'a' }) + chunk({}, 'stop') + chunk({ content: 'late' }) + DONE)
    expect(summarize(events).text).toBe('a')
  })

  test('every split of a realistic stream gives the same events', async () => {
    const body =
      START +
      chunk({ reasoning_content: 'Hmm… 🤔 ' }) +
      chunk({ content: 'Grüße ' }) +
      chunk({ content: '世界' }) +
      chunk({ tool_calls: [{ index: 0, id: 'c1', function: { name: 'f', arguments: '{"q":"é"}' } }] }) +
      chunk({}, 'tool_calls') +
      frame({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 8 } }) +
      DONE
    const whole = await translate(body)
    for (const size of [1, 2, 3, 4, 5, 6, 7, 11, 17, 64]) expect(await translate(body, size)).toEqual(whole)
  })

  test('malformed JSON, a non-object chunk: one server error', async () => {
    for (const bad of ['data: {"choices": [\n\n', 'data: 42\n\n', 'data: "text"\n\n']) {
      const summary = summarize(await translate(START + bad + chunk({ content: 'never' }) + DONE))
      expect(summary.error?.kind).toBe('server')
      expect(summary.text).toBe('')
    }
  })
})

describe('fromUpstreamStream with oversized lines', () => {
  test('a 1 MB malformed line is one error; a 1 MB delta passes whole', async () => {
    const garbage = summarize(await translate(START + `data: ${'x'.repeat(1_000_000)}\n\n` + DONE, 65_536))
    expect(garbage.error?.kind).toBe('server')
    const big = 'y'.repeat(1_000_000)
    const whole = summarize(await translate(START + chunk({ content: big }) + chunk({}, 'stop') + DONE, 65_536))
    expect(whole.text).toBe(big)
  })
})

describe('mapFinishReason', () => {
  test('every known reason', () => {
    expect(mapFinishReason('stop', false)).toBe('stop')
    expect(mapFinishReason('eos', false)).toBe('stop')
    expect(mapFinishReason('length', false)).toBe('length')
    expect(mapFinishReason('length', true)).toBe('length')
    expect(mapFinishReason('tool_calls', false)).toBe('tool-calls')
    expect(mapFinishReason('function_call', false)).toBe('tool-calls')
    expect(mapFinishReason('stop', true)).toBe('tool-calls')
    expect(mapFinishReason('content_filter', false)).toBe('content-filter')
    expect(mapFinishReason('something_new', false)).toBe('other')
  })
})
