import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { jsonSchemaOutputFormat } from '@anthropic-ai/sdk/helpers/json-schema'
import type { WireScript } from '../providers/conformance'
import { anthropicWire } from '../providers/anthropic-wire'
import { openAIWire } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { paygConfig, startServedGateway, upstreamProvider } from '../support/gateway'
import { json, type TestApp } from '../support/harness'

// The official Anthropic SDK's structured outputs (`output_config.format`, messages.parse()),
// `output_config.effort` and adaptive thinking, through the gateway to a (fake) Anthropic
// upstream and a (fake) OpenAI-compatible one: what each upstream receives, what the SDK parses,
// and the values the gateway cannot honour refused by name before any upstream call.

const CREDIT = 10_000_000_000n
const UPSTREAM_KEY = 'sk-upstream-0123456789'

const TARGETS: Array<{ readonly type: 'openai-compatible' | 'anthropic'; readonly wire: WireScript }> = [
  { type: 'openai-compatible', wire: openAIWire },
  { type: 'anthropic', wire: anthropicWire },
]

const citySchema = {
  type: 'object',
  properties: { city: { type: 'string' }, population: { type: 'integer' } },
  required: ['city', 'population'],
  additionalProperties: false,
} as const

for (const target of TARGETS) {
  describe(`output_config and adaptive thinking: Anthropic SDK → gateway → ${target.type} backend`, () => {
    let t: TestApp
    let upstream: FakeUpstream
    let anthropic: Anthropic
    let orgId: string
    let apiKey: string

    const charged = async () => CREDIT - (await t.deps.balance(orgId)).prepaidNanos
    const answer = (text: string, reasoning?: { text: string; signature: string }) =>
      upstream.enqueue({ kind: 'sse', body: target.wire.stream({ ...(reasoning ? { reasoning } : {}), text, finish: 'stop', usage: { inputTokens: 20, outputTokens: 10 } }) })

    beforeEach(async () => {
      upstream = await FakeUpstream.start()
      ;({ t, orgId, key: apiKey, anthropic } = await startServedGateway(paygConfig(
        [upstreamProvider('up', target.type, `${upstream.url}/v1`, 'UPSTREAM_KEY')],
        // The Anthropic binding is an adaptive model (Claude 4.6 on); the budget form has its own tests (anthropic-thinking-form.test.ts).
        [`  - { id: m, backends: [{ provider: up, model: upstream-m${target.type === 'anthropic' ? ', thinking: adaptive' : ''} }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 16384, max_output_tokens: 4096, capabilities: { tools: true, reasoning: true } }`],
      ), { UPSTREAM_KEY }, { credit: CREDIT }))
    })

    afterEach(async () => {
      await upstream.close()
      await t.close()
    })

    test('messages.parse() with a JSON schema format: the upstream gets its own structured output, the SDK the parsed object', async () => {
      answer('{"city":"Lyon","population":522250}')
      const format = jsonSchemaOutputFormat(citySchema)
      const message = await anthropic.messages.parse({ model: 'm', max_tokens: 200, messages: [{ role: 'user', content: 'The biggest city near the Alps, as JSON.' }], output_config: { format } })
      expect(message.parsed_output).toEqual({ city: 'Lyon', population: 522250 })
      // What the SDK put on the wire (its helper rewrites the schema), and what the upstream got.
      const sent = { ...format } as Record<string, unknown>
      delete sent.parse
      const received = upstream.onlyRequest().body
      if (target.type === 'anthropic') {
        expect(received.output_config).toEqual({ format: sent })
        expect(received.response_format).toBeUndefined()
      } else {
        expect(received.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'response', schema: sent.schema } })
        expect(received.output_config).toBeUndefined()
      }
      expect(await charged()).toBeGreaterThan(0n)
    })

    test('stream().finalMessage() with a JSON schema format carries the parsed object too', async () => {
      answer('{"city":"Graz","population":291072}')
      const stream = anthropic.messages.stream({ model: 'm', max_tokens: 200, messages: [{ role: 'user', content: 'A city, as JSON.' }], output_config: { format: jsonSchemaOutputFormat(citySchema) } })
      const final = await stream.finalMessage()
      expect(final.parsed_output).toEqual({ city: 'Graz', population: 291072 })
      expect(upstream.onlyRequest().body[target.type === 'anthropic' ? 'output_config' : 'response_format']).toBeDefined()
    })

    test('thinking {type: adaptive}: Anthropic gets adaptive thinking as sent, an OpenAI-compatible backend its default amount', async () => {
      const signature = target.wire.reasoningSignatures ? 'sig-adaptive' : ''
      answer('Four.', { text: 'Two plus two.', signature: 'sig-adaptive' })
      const message = await anthropic.messages.create({ model: 'm', max_tokens: 1000, thinking: { type: 'adaptive' }, messages: [{ role: 'user', content: '2+2?' }] })
      expect(message.content).toEqual([{ type: 'thinking', thinking: 'Two plus two.', signature }, { type: 'text', text: 'Four.' }] as Anthropic.ContentBlock[])
      const received = upstream.requests[0]!.body
      if (target.type === 'anthropic') {
        // No budget: max_tokens 1000 is below the floor a budget would need, and adaptive needs none.
        expect(received.thinking).toEqual({ type: 'adaptive' })
        expect(received.output_config).toBeUndefined()
      } else {
        expect(received.reasoning_effort).toBeUndefined()
      }

      // With an effort and display: summarized, both forwarded where the wire has them.
      answer('Four.')
      await anthropic.messages.create({
        model: 'm',
        max_tokens: 1000,
        thinking: { type: 'adaptive', display: 'summarized' },
        output_config: { effort: 'medium' },
        messages: [{ role: 'user', content: '2+2?' }],
      })
      const steered = upstream.requests[1]!.body
      if (target.type === 'anthropic') {
        expect(steered.thinking).toEqual({ type: 'adaptive', display: 'summarized' })
        expect(steered.output_config).toEqual({ effort: 'medium' })
      } else {
        expect(steered.reasoning_effort).toBe('medium')
      }
    })

    test('output_config.effort alone is a reasoning effort: reasoning_effort, or adaptive thinking at that effort on an adaptive Anthropic binding', async () => {
      answer('ok')
      await anthropic.messages.create({ model: 'm', max_tokens: 4096, output_config: { effort: 'low' }, messages: [{ role: 'user', content: 'hi' }] })
      const received = upstream.onlyRequest().body
      if (target.type === 'anthropic') expect([received.thinking, received.output_config]).toEqual([{ type: 'adaptive' }, { effort: 'low' }])
      else expect(received.reasoning_effort).toBe('low')
    })

    test('countTokens takes output_config and adaptive thinking: sent to Anthropic\'s count, the estimate elsewhere', async () => {
      if (target.type === 'anthropic') upstream.enqueue({ kind: 'json', body: { input_tokens: 321 } })
      const format = { type: 'json_schema' as const, schema: { ...citySchema } }
      const count = await anthropic.messages.countTokens({
        model: 'm',
        thinking: { type: 'adaptive' },
        output_config: { format, effort: 'high' },
        messages: [{ role: 'user', content: 'How many tokens is this?' }],
      })
      if (target.type === 'anthropic') {
        expect(count.input_tokens).toBe(321)
        const received = upstream.onlyRequest()
        expect(received.path).toBe('/v1/messages/count_tokens')
        expect(received.body).toEqual({
          model: 'upstream-m',
          messages: [{ role: 'user', content: [{ type: 'text', text: 'How many tokens is this?' }] }],
          thinking: { type: 'adaptive' },
          output_config: { format, effort: 'high' },
        })
      } else {
        expect(count.input_tokens).toBe(Math.ceil(Buffer.byteLength('How many tokens is this?') / 4) + 4)
        expect(upstream.requests).toHaveLength(0)
      }
      expect(await charged()).toBe(0n)
    })

    test('values the gateway cannot honour: 400 naming the field, on both routes, before any upstream call, nothing charged', async () => {
      const base = { model: 'm', max_tokens: 2000, messages: [{ role: 'user', content: 'hi' }] }
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{ thinking: { type: 'adaptive', display: 'omitted' } }, /thinking\.display "omitted"/],
        [{ thinking: { type: 'enabled', budget_tokens: 1024, display: 'omitted' } }, /thinking\.display "omitted"/],
        [{ thinking: { type: 'adaptive', display: 'hidden' } }, /thinking\.display/],
        [{ thinking: { type: 'disabled' }, output_config: { effort: 'low' } }, /output_config\.effort/],
        [{ output_config: { effort: 'extreme' } }, /output_config\.effort/],
        [{ output_config: { format: { type: 'json_object' } } }, /output_config\.format/],
        [{ output_config: { format: { type: 'json_schema' } } }, /output_config\.format\.schema/],
        [{ output_config: { verbosity: 'low' } }, /output_config\.verbosity/],
      ]
      for (const [extra, message] of cases) {
        const failure = await anthropic.messages.create({ ...base, ...extra } as never).catch(error => error)
        expect(failure).toBeInstanceOf(Anthropic.BadRequestError)
        expect(failure.error.error.type).toBe('invalid_request_error')
        expect(failure.error.error.message).toMatch(message)
        const { max_tokens: _, ...countable } = { ...base, ...extra }
        const counted = await t.app.handle(
          new Request('http://localhost/v1/messages/count_tokens', { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': apiKey }, body: JSON.stringify(countable) }),
        )
        expect(counted.status).toBe(400)
        expect((await json(counted)).error.message).toMatch(message)
      }
      expect(upstream.requests).toHaveLength(0)
      expect(await charged()).toBe(0n)
    })
  })
}
