import { describe, expect, test } from 'bun:test'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { ChatRequest } from '../../src/inference/canonical'
import { collect } from '../../src/inference/collect'
import { decodeMessages } from '../../src/inference/dialects/messages/decode'
import { encodeMessage } from '../../src/inference/dialects/messages/encode'
import { MessagesStreamEncoder } from '../../src/inference/dialects/messages/encode-stream'
import type { MessagesRequest } from '../../src/inference/dialects/messages/schema'
import { typicalInputTokens } from '../../src/inference/meter'
import type { ThinkingForm } from '../../src/catalog/types'
import { toUpstream as toAnthropic } from '../../src/providers/anthropic/to-upstream'
import { toUpstream as toOpenAI } from '../../src/providers/openai-compatible/to-upstream'
import { openAIWire } from '../providers/openai-wire'
import { testRoute } from '../providers/fixtures'
import { type Backend, UPDATE_GOLDEN, goldenJson, replay, upstreamEvents } from '../support/golden'

// Golden translation fixtures for the Messages dialect × {openai-compatible, anthropic}: each
// fixture holds the client's wire request, the canonical request it decodes to, the upstream
// request the backend's adapter builds, the upstream's stream, the canonical events it becomes,
// and what the client receives (the SSE stream and the non-streamed message). A change to any
// step shows up as a diff of a reviewed file. Regenerate with UPDATE_GOLDEN=1 and review the diff.

const ROOT = join(import.meta.dir, '../fixtures/messages')

interface Case {
  name: string
  backend: Backend
  request: MessagesRequest
  /** The upstream's SSE body. */
  upstream: string
  /** The Anthropic binding's thinking form (default budget). */
  thinking?: ThinkingForm
}

const tools = [{ name: 'get_weather', description: 'Current weather', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }]

/** A second turn of a tool conversation with thinking: the history Anthropic must see in order. */
const toolTurn: MessagesRequest = {
  model: 'test-model',
  max_tokens: 4096,
  system: [{ type: 'text', text: 'You are terse.' }, { type: 'text', text: 'Use tools when useful.' }],
  thinking: { type: 'enabled', budget_tokens: 2048 },
  tools,
  tool_choice: { type: 'auto' },
  metadata: { user_id: 'end-user-golden' },
  messages: [
    { role: 'user', content: 'Weather in Paris and Tokyo?' },
    {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: 'Two cities: two calls.', signature: 'sig-A' },
        { type: 'redacted_thinking', data: 'opaque-B' },
        { type: 'tool_use', id: 'toolu_P', name: 'get_weather', input: { city: 'Paris' } },
        { type: 'thinking', thinking: 'Now Tokyo.', signature: 'sig-C' },
        { type: 'tool_use', id: 'toolu_T', name: 'get_weather', input: { city: 'Tokyo' } },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_P', content: '18 °C' },
        { type: 'tool_result', tool_use_id: 'toolu_T', content: [{ type: 'text', text: 'error: ' }, { type: 'text', text: 'timeout' }], is_error: true },
        { type: 'text', text: 'Summarise.' },
      ],
    },
  ],
}

const plain: MessagesRequest = {
  model: 'test-model',
  max_tokens: 300,
  system: 'Be brief.',
  temperature: 0.3,
  top_k: 20,
  stop_sequences: ['###'],
  messages: [
    {
      role: 'user',
      content: [
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
        { type: 'text', text: 'What is this?' },
      ],
    },
  ],
}

// Structured output (what messages.parse() sends) with adaptive thinking and an effort.
const structured: MessagesRequest = {
  model: 'test-model',
  max_tokens: 1000,
  thinking: { type: 'adaptive', display: 'summarized' },
  output_config: {
    format: { type: 'json_schema', schema: { type: 'object', properties: { greeting: { type: 'string' } }, required: ['greeting'], additionalProperties: false } },
    effort: 'medium',
  },
  messages: [{ role: 'user', content: 'Greet me in French, as JSON.' }],
}

const read = (path: string) => readFileSync(join(import.meta.dir, path), 'utf8')

const CASES: Case[] = [
  { name: 'tool-history-thinking', backend: 'anthropic', request: toolTurn, upstream: read('../fixtures/upstream/anthropic/thinking-tool.sse') },
  { name: 'images-sampling-redacted', backend: 'anthropic', request: plain, upstream: read('../fixtures/upstream/anthropic/redacted-thinking.sse') },
  { name: 'tool-history-thinking', backend: 'openai-compatible', request: toolTurn, upstream: openAIWire.stream({
      reasoning: { text: 'Both results are in.' },
      text: 'Paris 18 °C; Tokyo timed out.',
      toolCalls: [{ callId: 'call_1', name: 'get_weather', arguments: '{"city":"Tokyo"}' }],
      finish: 'tool-calls',
      usage: { inputTokens: 310, outputTokens: 42, cachedInputTokens: 128, reasoningTokens: 6 },
    }) },
  { name: 'images-sampling', backend: 'openai-compatible', request: plain, upstream: openAIWire.stream({ text: 'A cat.', finish: 'stop', usage: { inputTokens: 1700, outputTokens: 3 } }) },
  { name: 'structured-adaptive', backend: 'anthropic', request: structured, upstream: read('../fixtures/upstream/anthropic/json.sse'), thinking: 'adaptive' },
  { name: 'structured-adaptive', backend: 'openai-compatible', request: structured, upstream: openAIWire.stream({ text: '{"greeting":"Bonjour !"}', finish: 'stop', usage: { inputTokens: 30, outputTokens: 9 } }) },
]

/** JSON-safe canonical request: bytes as base64, URLs as strings, the route by id. */
const canonicalJson = (request: ChatRequest): unknown => JSON.parse(goldenJson(request))

async function render(entry: Case) {
  const canonical = decodeMessages(structuredClone(entry.request), testRoute())
  canonical.stream = true
  const upstreamRequest = entry.backend === 'anthropic' ? toAnthropic(canonical, 'upstream-model', entry.thinking) : toOpenAI(canonical, 'upstream-model')
  const events = await upstreamEvents(entry.backend, entry.upstream, { name: 'up', model: 'upstream-model', now: 0 })
  const meta = { id: 'msg_golden', model: entry.request.model, createdAt: 0, includeUsage: true, estimatedInputTokens: typicalInputTokens(canonical) }
  const encoder = new MessagesStreamEncoder(meta)
  let clientStream = encoder.start().join('')
  let finished = false
  for (const event of events) {
    if (event.type === 'finish') {
      clientStream += encoder.finish(event.reason, event.usage, event).join('')
      finished = true
    } else if (event.type !== 'error') clientStream += encoder.push(event).join('')
  }
  expect(finished).toBe(true)
  const result = await collect(replay(events), () => {})
  return {
    request: entry.request,
    canonical: canonicalJson(canonical),
    upstreamRequest,
    upstreamStream: entry.upstream,
    events,
    clientStream,
    message: encodeMessage(result, result.usage!, meta),
  }
}

describe('golden: Messages × backend, wire → canonical → upstream and upstream stream → canonical → client', () => {
  for (const entry of CASES) {
    test(`${entry.backend}/${entry.name}`, async () => {
      const path = join(ROOT, entry.backend, `${entry.name}.json`)
      const actual = await render(entry)
      if (UPDATE_GOLDEN || !existsSync(path)) {
        mkdirSync(dirname(path), { recursive: true })
        writeFileSync(path, `${JSON.stringify(actual, null, 2)}\n`)
      }
      expect(JSON.parse(JSON.stringify(actual))).toEqual(JSON.parse(readFileSync(path, 'utf8')))
    })
  }
})
