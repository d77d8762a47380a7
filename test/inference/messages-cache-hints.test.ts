import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { anthropicWire } from '../providers/anthropic-wire'
import { openAIWire } from '../providers/openai-wire'
import { anthropicClient } from '../support/gateway'
import type { TestApp } from '../support/harness'
import { startPassThroughGateway } from '../support/pass-through'
import type { FakeUpstream } from '../support/fake-upstream'

// A Messages client's cache_control hints (system blocks, content blocks, tools, the top-level
// automatic caching) reach an Anthropic backend where the client put them, with their ttl, on
// create and count_tokens; an OpenAI-compatible backend is sent none; a ttl Anthropic does not
// know is a 400 naming it. (QA: every hint was dropped, so Anthropic backends never cached.)

const MODEL = 'backends: [{ provider: up, model: claude-x }], price: { input_per_mtok: "3", output_per_mtok: "7" }, context_length: 100000, max_output_tokens: 4096, capabilities: { tools: true, vision: true, file_input: true }'
const TURN = { text: 'ok', finish: 'stop', usage: { inputTokens: 40, outputTokens: 1 } } as const
// A 1×1 PNG.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='
const HOUR = { type: 'ephemeral', ttl: '1h' } as const
const FIVE = { type: 'ephemeral', ttl: '5m' } as const
const PLAIN = { type: 'ephemeral' } as const

/** Every place Anthropic takes a hint, each with one. */
const hinted = {
  model: 'm',
  cache_control: PLAIN,
  system: [
    { type: 'text' as const, text: 'You are terse.' },
    { type: 'text' as const, text: 'The long shared instructions.', cache_control: HOUR },
  ],
  tools: [{ name: 'lookup', description: 'looks up', input_schema: { type: 'object' as const, properties: { q: { type: 'string' } } }, cache_control: HOUR }],
  messages: [
    {
      role: 'user' as const,
      content: [
        { type: 'document' as const, source: { type: 'text' as const, media_type: 'text/plain' as const, data: 'the manual' }, title: 'manual.txt', cache_control: FIVE },
        { type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png' as const, data: PNG }, cache_control: PLAIN },
        { type: 'text' as const, text: 'look it up' },
      ],
    },
    { role: 'assistant' as const, content: [{ type: 'tool_use' as const, id: 'toolu_1', name: 'lookup', input: { q: 'x' }, cache_control: FIVE }] },
    {
      role: 'user' as const,
      content: [
        // A hint inside a tool result goes on the result, whose content is sent as one text.
        { type: 'tool_result' as const, tool_use_id: 'toolu_1', content: [{ type: 'text' as const, text: 'found', cache_control: FIVE }] },
        { type: 'text' as const, text: 'and now?', cache_control: PLAIN },
      ],
    },
  ],
}

/** `hinted` without its document: count_tokens counts a request with one itself (documents are extracted only by a real call). */
const hintedWithoutDocument = { ...hinted, messages: [{ ...hinted.messages[0]!, content: hinted.messages[0]!.content.slice(1) }, ...hinted.messages.slice(1)] }

/** What each hinted place of `hinted` must look like upstream (the rest of each block aside). */
function expectHintsInPlace(body: any, document = true): void {
  expect(body.cache_control).toEqual(PLAIN)
  expect(body.system).toEqual([{ type: 'text', text: 'You are terse.' }, { type: 'text', text: 'The long shared instructions.', cache_control: HOUR }])
  expect(body.tools).toEqual([{ name: 'lookup', description: 'looks up', input_schema: { type: 'object', properties: { q: { type: 'string' } } }, cache_control: HOUR }])
  const [first, second, third] = body.messages
  // The document reaches Anthropic as its extracted text, still with its hint.
  expect(first.content.map((block: any) => [block.type, block.cache_control])).toEqual([...(document ? [['text', FIVE]] : []), ['image', PLAIN], ['text', undefined]])
  if (document) expect(first.content[0].text).toContain('the manual')
  expect(second.content).toEqual([{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'x' }, cache_control: FIVE }])
  expect(third.content).toEqual([{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'found', cache_control: FIVE }, { type: 'text', text: 'and now?', cache_control: PLAIN }])
}

describe('an Anthropic backend', () => {
  let t: TestApp
  let upstream: FakeUpstream
  let sdk: Anthropic
  beforeAll(async () => {
    const started = await startPassThroughGateway('anthropic', MODEL, 'cache-hints', 'cch')
    ;({ t, upstream } = started)
    sdk = anthropicClient(t.listen(), started.org.adminKey)
  })
  afterAll(async () => {
    await upstream.close()
    await t.close()
  })

  test('is sent every hint where the client set it, with its ttl, streamed or not, and on count_tokens', async () => {
    upstream.enqueue({ kind: 'sse', body: anthropicWire.stream(TURN) }, { kind: 'sse', body: anthropicWire.stream(TURN) }, { kind: 'json', body: { input_tokens: 40 } })
    const message = await sdk.messages.create({ ...hinted, max_tokens: 50 })
    expect(message.content).toEqual([{ type: 'text', text: 'ok' }] as never)
    await sdk.messages.stream({ ...hinted, max_tokens: 50 }).finalMessage()
    expect((await sdk.messages.countTokens(hintedWithoutDocument)).input_tokens).toBe(40)
    expect(upstream.requests.map(request => request.path)).toEqual(['/v1/messages', '/v1/messages', '/v1/messages/count_tokens'])
    expectHintsInPlace(upstream.requests[0]!.body)
    expectHintsInPlace(upstream.requests[1]!.body)
    expectHintsInPlace(upstream.requests[2]!.body, false)
  })

  test('without a hint on it, system is still sent as one string, and no cache_control appears', async () => {
    upstream.requests.length = 0
    upstream.enqueue({ kind: 'sse', body: anthropicWire.stream(TURN) })
    await sdk.messages.create({ model: 'm', max_tokens: 50, system: [{ type: 'text', text: 'A' }, { type: 'text', text: 'B' }], messages: [{ role: 'user', content: 'hi' }] })
    expect(upstream.onlyRequest().body.system).toBe('A\n\nB')
    expect(upstream.onlyRequest().text).not.toContain('cache_control')
  })

  test("a tool_result's hints merge onto it as the longest-lived one, the latest on a tie", async () => {
    // QA: inner [1h, 5m] kept only the last one's 5m, losing the 1-hour breakpoint. The longest is
    // kept: in a request Anthropic accepts (1h breakpoints before 5m ones), it stays accepted.
    const text = (value: string, cache_control?: typeof HOUR | typeof FIVE | typeof PLAIN) => ({ type: 'text' as const, text: value, ...(cache_control ? { cache_control } : {}) })
    const cases: Array<[Record<string, unknown>, unknown]> = [
      [{ content: [text('a', HOUR), text('b', FIVE)] }, HOUR],
      [{ content: [text('a', HOUR), text('b', FIVE)], cache_control: FIVE }, HOUR],
      [{ content: [text('a', PLAIN), text('b', FIVE)] }, FIVE],
      [{ content: [text('a', FIVE), text('b')], cache_control: PLAIN }, PLAIN],
      [{ content: [text('a'), text('b')] }, undefined],
    ]
    upstream.requests.length = 0
    for (const [result, expected] of cases) {
      upstream.enqueue({ kind: 'sse', body: anthropicWire.stream(TURN) })
      await sdk.messages.create({
        model: 'm',
        max_tokens: 50,
        messages: [
          { role: 'user', content: 'go' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', ...result } as never] },
        ],
      })
      expect(upstream.requests.at(-1)!.body.messages[2].content[0].cache_control).toEqual(expected)
    }
  })

  test('a ttl other than 5m or 1h is a 400 naming the field, and nothing reaches the upstream', async () => {
    upstream.requests.length = 0
    const bad = { type: 'ephemeral', ttl: '10m' } as never
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ cache_control: bad }, 'cache_control.ttl'],
      [{ system: [{ type: 'text', text: 'S', cache_control: bad }] }, 'system.0.cache_control.ttl'],
      [{ messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: bad }] }] }, 'messages.0.content.0.cache_control.ttl'],
    ]
    for (const [fields, param] of cases) {
      const failure = await sdk.messages.create({ model: 'm', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }], ...fields } as never).catch(error => error)
      expect(failure).toBeInstanceOf(Anthropic.BadRequestError)
      expect(failure.error.error.message).toContain(param)
      expect(failure.error.error.message).toContain('should be one of "5m", "1h"')
    }
    expect(upstream.requests).toEqual([])
  })
})

test('an OpenAI-compatible backend is sent no cache hint', async () => {
  const { t, upstream, org } = await startPassThroughGateway('openai-compatible', MODEL, 'cache-hints-openai', 'cco')
  try {
    upstream.enqueue({ kind: 'sse', body: openAIWire.stream(TURN) })
    const message = await anthropicClient(t.listen(), org.adminKey).messages.create({ ...hinted, max_tokens: 50 })
    expect(message.content).toEqual([{ type: 'text', text: 'ok' }] as never)
    const sent = upstream.onlyRequest()
    expect(sent.path).toBe('/v1/chat/completions')
    expect(sent.text).not.toContain('cache_control')
    expect(sent.text).not.toContain('"cache"')
    expect(sent.text).not.toContain('ephemeral')
  } finally {
    await upstream.close()
    await t.close()
  }
})
