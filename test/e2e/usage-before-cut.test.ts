import { describe, expect, test } from 'bun:test'
import { chunk, frame, openAIUsage } from '../providers/openai-wire'
import type { FakeResponse } from '../support/fake-upstream'
import { poll } from '../support/poll'
import { oneModelGateway, readUntilFailure, type ServedGateway, type UpstreamType } from '../support/gateway'

// A stream cut after the upstream reported its output count is billed that count, as a finished
// one is (meter.ts: the upstream's own usage wins when reported). Before, only the input count
// of such a report was kept, and the output was billed by the meter's count of what was sent:
// an Anthropic stream cut after message_delta (output_tokens 50) but before message_stop, or a
// Chat Completions stream cut after its finish_reason and usage chunk (100 in / 50 out) but
// before [DONE], was charged 100 in + 10 counted out (QA chaos pass). A report that came before
// the output ended (no message_delta yet, vLLM's continuous usage before the finish_reason)
// cannot cover what followed it: the output sent is counted, as before.

const TEXT = 'The quick brown fox jumps over the dog. ' // 40 bytes: 10 tokens counted
const COUNTED = 10
const INPUT = 100
const REPORTED = 50
/** At 1 USD per million tokens, input and output: 1,000 nanos a token. */
const nanos = (tokens: number) => BigInt(tokens) * 1000n

const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
const BASE = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'x' }

/** A stream of TEXT, cut after the output count was reported (`reported`) or before it. */
function body(type: UpstreamType, reported: boolean): string {
  if (type === 'anthropic') {
    return [
      event('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'x', content: [], stop_reason: null, usage: { input_tokens: INPUT, output_tokens: 1 } } }),
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: TEXT } }),
      event('content_block_stop', { index: 0 }),
      ...(reported ? [event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: REPORTED } })] : []),
    ].join('')
  }
  if (reported) return chunk({ role: 'assistant', content: '' }) + chunk({ content: TEXT }) + chunk({}, 'stop') + frame({ ...BASE, choices: [], usage: openAIUsage({ inputTokens: INPUT, outputTokens: REPORTED }) })
  // vLLM's continuous usage: a count on each chunk, so far; the last output follows it.
  const usage = (outputTokens: number) => ({ usage: openAIUsage({ inputTokens: INPUT, outputTokens }) })
  return chunk({ role: 'assistant', content: '' }, null, usage(0)) + chunk({ content: TEXT.slice(0, 20) }, null, usage(1)) + chunk({ content: TEXT.slice(20) })
}

/** Each streaming client format: the call, which must end in an in-band error. */
const CLIENTS: Record<string, (g: ServedGateway) => Promise<unknown>> = {
  chat: async g => (await readUntilFailure(await g.openai.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }))).failure,
  responses: async g => {
    try {
      for await (const item of await g.openai.responses.create({ model: 'm', stream: true, input: 'hi' })) if (item.type === 'error' || item.type === 'response.failed') return item
    } catch (failure) {
      return failure
    }
    return undefined
  },
  messages: g => g.anthropic.messages.stream({ model: 'm', max_tokens: 1000, messages: [{ role: 'user', content: 'hi' }] }).finalMessage().then(() => undefined, failure => failure),
}

for (const type of ['anthropic', 'openai-compatible'] as const) {
  describe(`${type}: a stream cut before its end`, () => {
    const served = oneModelGateway(type, 'context_length: 8192, max_output_tokens: 1000')

    /**
     * What one call through `client` was charged, its upstream answering `response`. A Chat
     * Completions upstream's answer is whole once its finish_reason and the usage after it came
     * (the cut after them loses nothing): only that one is no failure.
     */
    async function charged(client: string, response: FakeResponse, whole = false): Promise<bigint> {
      served.upstream.enqueue(response)
      const before = (await served.gateway.t.deps.balance(served.gateway.orgId)).prepaidNanos
      const failure = await CLIENTS[client]!(served.gateway)
      if (whole) expect(failure).toBeUndefined()
      else expect(failure).toBeDefined()
      return before - (await served.gateway.t.deps.balance(served.gateway.orgId)).prepaidNanos
    }

    // A clean close before message_stop ends the Anthropic stream in the translator; a reset in the
    // provider's read. A Chat Completions stream closed after its finish_reason is whole, not cut.
    const cuts = type === 'anthropic' ? (['reset', 'close'] as const) : (['reset'] as const)
    for (const client of Object.keys(CLIENTS)) {
      for (const then of cuts) {
        test(`${client}, ${then} after the output count was reported: the reported count is billed`, async () => {
          expect(await charged(client, { kind: 'sse', body: body(type, true), then }, type === 'openai-compatible')).toBe(nanos(INPUT + REPORTED))
        })
      }
      test(`${client}, reset before the output had ended: the output sent is counted`, async () => {
        expect(await charged(client, { kind: 'sse', body: body(type, false), then: 'reset' })).toBe(nanos(INPUT + COUNTED))
      })
    }

    for (const client of Object.keys(CLIENTS)) {
      test(`${client}, reset right after a tool call's name, before its arguments: the call is output, its input charged`, async () => {
        // QA: a tool call's start went out to the client (no fallback, rightly), but the meter saw
        // no output bytes and released the hold: the input the upstream read was free.
        const started = type === 'anthropic'
          ? event('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'x', content: [], stop_reason: null, usage: { input_tokens: INPUT, output_tokens: 1 } } }) +
            event('content_block_start', { index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} } })
          : chunk({ role: 'assistant', content: null }) + chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } }] })
        const cost = await charged(client, { kind: 'sse', body: started, then: 'reset' })
        // Anthropic announced its input; a Chat Completions upstream reported none, so it is
        // estimated. The name sent is output: get_weather, 11 bytes, 3 tokens counted.
        if (type === 'anthropic') expect(cost).toBe(nanos(INPUT + 3))
        else expect(cost).toBeGreaterThan(nanos(3))
      })
    }

    test('a client that leaves after the output count was reported, before the stream ended, is billed that count', async () => {
      // Before, the meter's estimate was billed (10 counted output tokens, not the 50 reported):
      // the count reached it only on a finish or an error event, and a client that left made neither.
      const held = Promise.withResolvers<void>()
      served.upstream.enqueue({ kind: 'sse', body: [body(type, true), held.promise], then: 'stall' })
      const before = (await served.gateway.t.deps.balance(served.gateway.orgId)).prepaidNanos
      const client = new AbortController()
      const response = await fetch(`${served.gateway.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        signal: client.signal,
        headers: { authorization: `Bearer ${served.gateway.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      })
      const reader = response.body!.getReader()
      let text = ''
      while (!text.includes('dog.')) text += new TextDecoder().decode((await reader.read()).value)
      // A Chat Completions answer has already ended at its usage chunk (whole); an Anthropic one waits for message_stop.
      client.abort()
      held.resolve()
      const spent = await poll('the settlement', 200, 10, async () => {
        const after = (await served.gateway.t.deps.balance(served.gateway.orgId)).prepaidNanos
        return after !== before && (served.gateway.t.deps.lifecycle as { inFlight: number }).inFlight === 0 ? before - after : undefined
      })
      expect(spent).toBe(nanos(INPUT + REPORTED))
    })
  })
}
