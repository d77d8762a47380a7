import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readdirSync } from 'node:fs'
import OpenAI from 'openai'
import { jsonFromSse, type CollectBackend } from '../providers/collect-conformance'
import { FakeUpstream, type FakeResponse } from '../support/fake-upstream'
import { fixture, FIXTURES } from '../support/golden'
import { startServedGateway, upstreamProvider, type UpstreamType } from '../support/gateway'
import { type TestApp } from '../support/harness'

// A non-streamed client asks the gateway for one answer, and the gateway asks its upstream for
// one JSON answer (stream: false) instead of a stream. Every recorded upstream stream
// (test/fixtures/upstream/<backend>/*.sse) is played both ways behind the real app, for each
// client format with its official SDK: once as that SSE (what the gateway collected before), once
// as the JSON answer the same upstream gives to stream: false. The client must get the same reply
// (ids and times aside) and be charged the same nanos. The one documented difference: an
// Anthropic tool call's arguments come as compact JSON (a collected answer carries the input as
// an object), so they are compared as JSON values.

const CREDIT = 10_000_000_000n
const PRICE_YAML = '{ input_per_mtok: "1.234567891", output_per_mtok: "3.000000007", cached_input_per_mtok: "0.3", reasoning_per_mtok: "7.5" }'
const BACKENDS: CollectBackend[] = ['openai-compatible', 'anthropic']
const weather = { type: 'object', properties: { location: { type: 'string' }, city: { type: 'string' }, unit: { type: 'string' } } }

let t: TestApp
const upstreams = {} as Record<CollectBackend | 'failing', FakeUpstream>
let openai: OpenAI
let anthropic: Anthropic
let orgId: string

beforeAll(async () => {
  for (const name of [...BACKENDS, 'failing'] as const) upstreams[name] = await FakeUpstream.start()
  const provider = (id: string, type: UpstreamType, url: string) => upstreamProvider(id, type, `${url}/v1`, 'UP_KEY')
  const model = (id: string, backends: string) =>
    `  - { id: ${id}, backends: ${backends}, price: ${PRICE_YAML}, context_length: 16384, max_output_tokens: 2048, capabilities: { tools: true, reasoning: true } }`
  const yaml = [
    'providers:',
    provider('oa', 'openai-compatible', upstreams['openai-compatible'].url),
    provider('an', 'anthropic', upstreams.anthropic.url),
    provider('failing', 'openai-compatible', upstreams.failing.url),
    'models:',
    model('m-openai-compatible', '[{ provider: oa, model: up-oa }]'),
    model('m-anthropic', '[{ provider: an, model: up-an }]'),
    model('fallback', '[{ provider: failing, model: up-bad }, { provider: oa, model: up-oa }]'),
    'plans: { payg: { monthly_allowance: "0", fusion: false } }',
    'limits: { inference: { key: { burst: 1000, per_second: 100 }, org: { burst: 1000, per_second: 100 } } }',
  ]
  ;({ t, orgId, openai, anthropic } = await startServedGateway(yaml, { UP_KEY: 'sk-upstream-collected-0123' }, { credit: CREDIT }))
})

afterAll(async () => {
  await Promise.all(Object.values(upstreams).map(upstream => upstream.close()))
  await t?.close()
})

const spent = async () => CREDIT - (await t.deps.balance(orgId)).prepaidNanos
const question = 'What is the weather in Paris and Oslo?'

/** Each client format's non-streamed request, through its official SDK; a refusal is its status and body. */
const CLIENTS: Record<string, (model: string) => Promise<unknown>> = {
  'chat-completions': model =>
    openai.chat.completions.create({ model, messages: [{ role: 'user', content: question }], tools: [{ type: 'function', function: { name: 'get_weather', parameters: weather } }] }),
  messages: model =>
    anthropic.messages.create({ model, max_tokens: 1024, messages: [{ role: 'user', content: question }], tools: [{ name: 'get_weather', input_schema: weather as Anthropic.Tool.InputSchema }] }),
  responses: model => openai.responses.create({ model, input: question, tools: [{ type: 'function', name: 'get_weather', parameters: weather, strict: false }] }),
}

async function reply(client: string, model: string): Promise<unknown> {
  try {
    return { ok: await CLIENTS[client]!(model) }
  } catch (error) {
    if (error instanceof OpenAI.APIError || error instanceof Anthropic.APIError) return { status: error.status, error: error.error }
    throw error
  }
}

/**
 * `a` and `b` with the values that name or time the reply itself (gateway and request ids, timestamps) set
 * aside where they differ, and tool arguments compared as JSON values.
 */
function aligned(a: unknown, b: unknown, key = ''): [unknown, unknown] {
  if (['id', 'request_id', 'created', 'created_at', 'completed_at'].includes(key) && a !== b) return ['<varies>', '<varies>']
  if (key === 'arguments' && typeof a === 'string' && typeof b === 'string') {
    try {
      return [JSON.parse(a), JSON.parse(b)]
    } catch {
      return [a, b]
    }
  }
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    const pairs = a.map((item, index) => aligned(item, b[index]))
    return [pairs.map(pair => pair[0]), pairs.map(pair => pair[1])]
  }
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null && !Array.isArray(a)) {
    const left: Record<string, unknown> = {}
    const right: Record<string, unknown> = {}
    for (const name of new Set([...Object.keys(a), ...Object.keys(b)])) {
      ;[left[name], right[name]] = aligned((a as Record<string, unknown>)[name], (b as Record<string, unknown>)[name], name)
    }
    return [left, right]
  }
  return [a, b]
}

for (const backend of BACKENDS) {
  const names = readdirSync(new URL(`upstream/${backend}/`, FIXTURES)).filter(name => name.endsWith('.sse'))
  describe(`${backend} upstream answers, streamed vs one JSON answer`, () => {
    for (const name of names) {
      for (const client of Object.keys(CLIENTS)) {
        test(`${name} → ${client}: the same reply and the same charge`, async () => {
          const sse = await fixture(`upstream/${backend}/${name}`)
          const upstream = upstreams[backend]
          const asked = upstream.requests.length
          const run = async (answer: FakeResponse) => {
            upstream.enqueue(answer)
            const before = await spent()
            const result = await reply(client, `m-${backend}`)
            return { result, charged: (await spent()) - before }
          }
          const streamed = await run({ kind: 'sse', body: sse, chunkBytes: 50 })
          const collected = await run({ kind: 'json', body: jsonFromSse(backend, sse) })
          const [streamedReply, collectedReply] = aligned(streamed.result, collected.result)
          expect(collectedReply).toEqual(streamedReply)
          expect(collected.charged).toBe(streamed.charged)
          // A failed answer is never charged; a delivered one always is.
          expect(collected.charged > 0n).toBe('ok' in (collected.result as object))
          // The gateway asked for one JSON answer both times (the first upstream streamed anyway).
          for (const request of upstream.requests.slice(asked)) expect(request.body.stream).toBe(false)
        })
      }
    }
  })
}

test('an error object in a 200 JSON answer falls back to the next backend; only the answer is charged', async () => {
  const sse = await fixture('upstream/openai-compatible/text.sse')
  upstreams.failing.enqueue({ kind: 'json', body: { error: { message: 'The engine is currently overloaded', type: 'server_error' } } })
  upstreams['openai-compatible'].enqueue({ kind: 'json', body: jsonFromSse('openai-compatible', sse) })
  const before = await spent()
  const fallback = await reply('chat-completions', 'fallback')
  const charged = (await spent()) - before

  upstreams['openai-compatible'].enqueue({ kind: 'json', body: jsonFromSse('openai-compatible', sse) })
  const direct = await reply('chat-completions', 'm-openai-compatible')
  const [fromFallback, fromDirect] = aligned(fallback, direct)
  expect(fromFallback).toMatchObject({ ok: { model: 'fallback' } })
  const answer = (value: unknown) => (value as { ok: Record<string, unknown> }).ok
  expect({ ...answer(fromFallback), model: 'm-openai-compatible' } as unknown).toEqual(answer(fromDirect))
  expect(charged).toBe((await spent()) - before - charged)
  expect(upstreams.failing.requests.at(-1)!.body.stream).toBe(false)
})
