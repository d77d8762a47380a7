import Anthropic from '@anthropic-ai/sdk'
import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { createLogger } from '../../src/observability/logger'
import { anthropicWire } from '../providers/anthropic-wire'
import { chunk, frame, openAIWire } from '../providers/openai-wire'
import { FakeUpstream, type FakeResponse } from '../support/fake-upstream'
import { openAIClient, paygConfig, readUntilFailure, startServedGateway, upstreamProvider } from '../support/gateway'
import { buildConfiguredApp, type TestApp } from '../support/harness'

// A backend that answers 2xx and sends its first event, then fails before any output (Anthropic's
// message_start then an `overloaded_error` event; a Chat Completions role chunk then an error
// chunk or a cut): the next backend answers, the client gets its answer intact through the
// official SDKs, one charge is settled for it, and the log line names it. Once output went out,
// an error still ends the stream in-band and nothing else is tried.

const CREDIT = 10_000_000_000n
const MTOK = 1_000_000n
const PRICE = { input: 1_234_567_891n, output: 3_000_000_007n }
const PRICE_YAML = '{ input_per_mtok: "1.234567891", output_per_mtok: "3.000000007" }'
const USAGE = { inputTokens: 7, outputTokens: 4 }
const ANSWER = 'from the second backend'
/** The catalog price of USAGE, which the second backend reports. */
const SECOND_CHARGE = (BigInt(USAGE.inputTokens) * PRICE.input + BigInt(USAGE.outputTokens) * PRICE.output + MTOK - 1n) / MTOK

const sse = (body: string | string[], then?: 'reset'): FakeResponse => ({ kind: 'sse', body, ...(then ? { then } : {}) })
const anthropicEvent = (data: Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`

/** Each upstream protocol's opening without output, its in-stream error, and a partial answer. */
const WIRES = {
  'openai-compatible': {
    wire: openAIWire,
    opening: [chunk({ role: 'assistant', content: '' })],
    error: frame({ error: { message: 'The server is overloaded', type: 'server_error' } }),
  },
  anthropic: {
    wire: anthropicWire,
    opening: [
      anthropicEvent({ type: 'message_start', message: { id: 'msg_first', type: 'message', role: 'assistant', model: 'claude-first', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 99, output_tokens: 1 } } }),
      anthropicEvent({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }) + anthropicEvent({ type: 'ping' }),
    ],
    error: anthropicEvent({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }),
  },
} as const

for (const type of ['openai-compatible', 'anthropic'] as const) {
  const { wire, opening, error } = WIRES[type]
  const answer = () => sse(wire.stream({ text: ANSWER, finish: 'stop', usage: USAGE }))

  describe(`fallback before the first output, ${type} backends`, () => {
    let t: TestApp
    let primary: FakeUpstream
    let secondary: FakeUpstream
    let openai: OpenAI
    let anthropic: Anthropic
    let orgId: string
    let lines: string[]
    const charged = async () => CREDIT - (await t.deps.balance(orgId)).prepaidNanos
    const slotsInUse = () => t.deps.limits.concurrency.inUse(orgId)
    /** The request log lines' backends, in order. */
    const loggedBackends = () => lines.map(line => JSON.parse(line)).filter(line => line.msg === 'request' && line.model === 'duo').map(line => line.backend)

    beforeEach(async () => {
      primary = await FakeUpstream.start()
      secondary = await FakeUpstream.start()
      lines = []
      const yaml = paygConfig(
        [upstreamProvider('up', type, `${primary.url}/v1`, 'UP_KEY'), upstreamProvider('second', type, `${secondary.url}/v1`, 'UP_KEY')],
        [`  - { id: duo, backends: [{ provider: up, model: model-a }, { provider: second, model: model-b }], price: ${PRICE_YAML}, context_length: 16384, max_output_tokens: 2048 }`],
      )
      const logger = createLogger('info', line => lines.push(line))
      ;({ t, orgId, openai, anthropic } = await startServedGateway(yaml, { UP_KEY: 'sk-upstream-0123456789' }, { credit: CREDIT, overrides: { logger } }))
      await t.deps.database.client.execute({ sql: "UPDATE orgs SET plan_id = 'payg' WHERE id = ?", args: [orgId] })
    })

    afterEach(async () => {
      await t.close()
      await primary.close()
      await secondary.close()
    })

    /** The second backend answered, the first was asked once, one charge for the answer, the log names the second. */
    async function expectServedBySecond(): Promise<void> {
      expect([primary.requests.length, secondary.onlyRequest().body.model]).toEqual([1, 'model-b'])
      expect(await charged()).toBe(SECOND_CHARGE)
      expect(slotsInUse()).toBe(0)
      expect(loggedBackends()).toEqual([`${type}:second/model-b`])
    }

    test('Chat Completions stream: an error right after the opening event falls back; the answer arrives intact', async () => {
      primary.enqueue(sse([...opening, error]))
      secondary.enqueue(answer())
      const stream = await openai.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
      let text = ''
      let roles = 0
      let usage: OpenAI.CompletionUsage | null | undefined
      for await (const part of stream) {
        if (part.choices[0]?.delta.role !== undefined) roles += 1
        text += part.choices[0]?.delta.content ?? ''
        if (part.usage) usage = part.usage
      }
      expect([text, roles, usage?.prompt_tokens, usage?.completion_tokens]).toEqual([ANSWER, 1, USAGE.inputTokens, USAGE.outputTokens])
      await expectServedBySecond()
    })

    /** A streamed Chat Completions call through the fallback: the second backend's answer, whole. */
    async function expectStreamedAnswer(): Promise<void> {
      secondary.enqueue(answer())
      const stream = await openai.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'hi' }], stream: true })
      let text = ''
      for await (const part of stream) text += part.choices[0]?.delta.content ?? ''
      expect(text).toBe(ANSWER)
      await expectServedBySecond()
    }

    test('Chat Completions stream: a cut right after the opening event falls back', async () => {
      primary.enqueue(sse([...opening], 'reset'))
      await expectStreamedAnswer()
    })

    if (type === 'anthropic') {
      test('a cut after a message_delta that came before any content falls back: a usage report is no output', async () => {
        // The usage event the translator yields at message_delta ended the fallback window (QA regression check).
        const delta = anthropicEvent({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 0 } })
        primary.enqueue(sse([opening[0]!, delta], 'reset'))
        await expectStreamedAnswer()
      })
    }

    test('Chat Completions, not streamed (the upstream streams anyway): falls back', async () => {
      primary.enqueue(sse([...opening, error]))
      secondary.enqueue(answer())
      const completion = await openai.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'hi' }] })
      expect([completion.choices[0]!.message.content, completion.usage?.completion_tokens]).toEqual([ANSWER, USAGE.outputTokens])
      await expectServedBySecond()
    })

    test('Responses, streamed and not: fall back', async () => {
      primary.enqueue(sse([...opening, error]))
      secondary.enqueue(answer())
      const streamed = await openai.responses.stream({ model: 'duo', input: 'hi' }).finalResponse()
      expect([streamed.status, streamed.output_text, streamed.usage?.output_tokens]).toEqual(['completed', ANSWER, USAGE.outputTokens])
      await expectServedBySecond()

      primary.enqueue(sse([...opening, error]))
      secondary.enqueue(answer())
      const plain = await openai.responses.create({ model: 'duo', input: 'hi' })
      expect([plain.status, plain.output_text]).toEqual(['completed', ANSWER])
      expect(await charged()).toBe(2n * SECOND_CHARGE)
    })

    test('Messages stream (@anthropic-ai/sdk): falls back; one text block, the second backend\'s usage', async () => {
      primary.enqueue(sse([...opening, error]))
      secondary.enqueue(answer())
      const events: string[] = []
      const stream = anthropic.messages.stream({ model: 'duo', max_tokens: 256, messages: [{ role: 'user', content: 'hi' }] })
      stream.on('streamEvent', event => events.push(event.type))
      const message = await stream.finalMessage()
      expect(message.content.map(block => (block.type === 'text' ? block.text : block.type))).toEqual([ANSWER])
      expect([message.usage.input_tokens, message.usage.output_tokens]).toEqual([USAGE.inputTokens, USAGE.outputTokens])
      expect(events.filter(type => type === 'message_start' || type === 'content_block_start')).toEqual(['message_start', 'content_block_start'])
      await expectServedBySecond()
    })

    test('a stream read whole (declared length) that fails after its opening falls back too', async () => {
      primary.enqueue({ kind: 'text', status: 200, body: [...opening, error].join(''), headers: { 'content-type': 'text/event-stream' } })
      await expectStreamedAnswer()
    })

    test('after the first output, an error still ends the stream in-band: no fallback, the output sent is charged', async () => {
      primary.enqueue(sse([wire.partial('Once upon'), error]))
      const stream = await openai.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'hi' }], stream: true })
      const { text, failure } = await readUntilFailure(stream)
      expect(failure).toBeInstanceOf(OpenAI.APIError)
      expect(text).toBe('Once upon')
      expect([primary.requests.length, secondary.requests.length]).toEqual([1, 0])
      expect(await charged()).toBeGreaterThan(0n)
      expect(slotsInUse()).toBe(0)
      expect(loggedBackends()).toEqual([`${type}:up/model-a`])
    })

    test('every backend failing after the stream opened: the last error ends it in-band, nothing charged', async () => {
      primary.enqueue(sse([...opening, error]))
      secondary.enqueue({ kind: 'json', status: 500, body: wire.errorBody(500, 'internal failure') })
      const stream = await openai.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'hi' }], stream: true })
      const { text, failure } = await readUntilFailure(stream)
      expect(failure).toBeInstanceOf(OpenAI.APIError)
      expect(text).toBe('')
      expect([primary.requests.length, secondary.requests.length]).toEqual([1, 1])
      expect(await charged()).toBe(0n)
      expect(slotsInUse()).toBe(0)
    })
  })
}

describe('fallback before the first output, deadlines', () => {
  test('a backend that goes silent after its opening is cut by its own idle deadline, and the next one answers', async () => {
    const primary = await FakeUpstream.start()
    const secondary = await FakeUpstream.start()
    const t = await buildConfiguredApp(paygConfig(
      [
        `  - { id: up, type: openai-compatible, base_url: "${primary.url}/v1", api_key_env: UP_KEY, retention: none, connect_timeout_ms: 5000, idle_timeout_ms: 1000 }`,
        upstreamProvider('second', 'openai-compatible', `${secondary.url}/v1`, 'UP_KEY'),
      ],
      [`  - { id: duo, backends: [{ provider: up, model: model-a }, { provider: second, model: model-b }], price: ${PRICE_YAML}, context_length: 16384, max_output_tokens: 2048 }`],
    ), { UP_KEY: 'sk-upstream-0123456789' })
    try {
      const org = await t.createOrg('acme', CREDIT)
      const openai = openAIClient(t.listen(), org.adminKey)
      primary.enqueue({ kind: 'sse', body: [...WIRES['openai-compatible'].opening], then: 'stall' })
      secondary.enqueue(sse(openAIWire.stream({ text: ANSWER, finish: 'stop', usage: USAGE })))
      const stream = await openai.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'hi' }], stream: true })
      let text = ''
      for await (const part of stream) text += part.choices[0]?.delta.content ?? ''
      expect(text).toBe(ANSWER)
      // The silent upstream's request was cut (its connection closed), not left open.
      await primary.onlyRequest().disconnected
      expect(secondary.onlyRequest().body.model).toBe('model-b')
    } finally {
      await t.close()
      await primary.close()
      await secondary.close()
    }
  })
})
