import { describe, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import OpenAI from 'openai'
import type { ModelRoute } from '../../src/catalog/types'
import { decodeSse } from '../../src/http/sse'
import type { ChatEvent, ChatRequest } from '../../src/inference/canonical'
import { decodeResponses } from '../../src/inference/dialects/responses/decode'
import { echoOf } from '../../src/inference/dialects/responses/encode'
import { ResponsesStreamEncoder } from '../../src/inference/dialects/responses/encode-stream'
import type { ResponsesRequest } from '../../src/inference/dialects/responses/schema'
import { toApiError } from '../../src/inference/upstream-errors'
import { toUpstream as toAnthropic } from '../../src/providers/anthropic/to-upstream'
import { AnthropicStreamTranslator } from '../../src/providers/anthropic/from-upstream-stream'
import { toUpstream as toOpenAI } from '../../src/providers/openai-compatible/to-upstream'
import { fromUpstreamStream } from '../../src/providers/openai-compatible/from-upstream-stream'
import { assertEventGrammar } from '../providers/events'

// Golden translations for the Responses client format × each HTTP backend, stored as fixtures
// under test/fixtures/responses/<case>/:
//   request.json → canonical.json → upstream.<backend>.json           (the request direction)
//   test/fixtures/upstream/<backend>/<stream>.sse → <backend>.events.json → <backend>.client.sse
// The upstream streams are recorded wire text; everything else is what the code produces,
// reviewed when written. Rewrite after a deliberate change with UPDATE_GOLDEN=1.

const UPDATE = process.env.UPDATE_GOLDEN === '1'
const FIXTURES = new URL('../fixtures/', import.meta.url)
const NOW = Date.UTC(2026, 0, 15, 12, 0, 0)
const META = { id: 'resp_golden', model: 'golden', createdAt: NOW / 1000, includeUsage: true, estimatedInputTokens: 0 }

const ROUTE: ModelRoute = {
  id: 'golden', modelId: 'golden', level: 'private', routing: 'ordered', contextLength: 200_000, maxOutputTokens: 8192,
  price: { inputPerMillion: 1_000n, outputPerMillion: 2_000n },
  backends: [{ provider: 'golden', model: 'golden-upstream', weight: 1, uncensored: false }],
  capabilities: { tools: true, reasoning: true, vision: true, supportsWebFetch: false, supportsWebSearch: false, fileInput: false },
}

type Backend = 'openai-compatible' | 'anthropic'

interface Case {
  readonly name: string
  /** The upstream stream each backend answers with (test/fixtures/upstream/<backend>/<name>.sse). */
  readonly streams: Partial<Record<Backend, string>>
}

const CASES: Case[] = [
  { name: 'text', streams: { 'openai-compatible': 'text', anthropic: 'text' } },
  { name: 'reasoning-tools', streams: { 'openai-compatible': 'reasoning-tool', anthropic: 'thinking-tool' } },
  { name: 'redacted-thinking', streams: { anthropic: 'redacted-thinking' } },
  { name: 'error-mid-stream', streams: { 'openai-compatible': 'error-mid-stream', anthropic: 'error-mid-stream' } },
]

/** Compares `actual` with the stored fixture (or writes it in update mode). */
async function golden(path: string, actual: string): Promise<void> {
  const url = new URL(path, FIXTURES)
  if (UPDATE) {
    await Bun.write(url, actual)
    return
  }
  if (!existsSync(url)) throw new Error(`missing golden fixture ${path}: run with UPDATE_GOLDEN=1 and review it`)
  expect(actual).toBe(await Bun.file(url).text())
}

const json = (value: unknown) => `${JSON.stringify(value, replacer, 2)}\n`

/** Bytes and URLs as readable JSON; the bound route by its id. */
function replacer(key: string, value: unknown): unknown {
  if (value instanceof Uint8Array) return { base64: Buffer.from(value).toString('base64') }
  if (value instanceof URL) return { url: value.href }
  if (key === 'route' && typeof value === 'object' && value !== null) return (value as ModelRoute).id
  if (value instanceof Error) return { ...value, name: value.constructor.name, message: value.message }
  return value
}

/** An upstream SSE fixture through the backend's real decoder and translator. */
async function translate(backend: Backend, sse: string): Promise<ChatEvent[]> {
  async function* bytes() {
    yield new TextEncoder().encode(sse)
  }
  const events: ChatEvent[] = []
  if (backend === 'openai-compatible') {
    for await (const event of fromUpstreamStream(decodeSse(bytes()), { provider: 'openai-compatible:golden', model: 'golden-upstream', requestId: 'req_golden' })) events.push(event)
    return events
  }
  const translator = new AnthropicStreamTranslator({ provider: 'anthropic:golden', model: 'golden-upstream' }, () => NOW)
  for await (const frame of decodeSse(bytes())) {
    events.push(...translator.push(frame))
    if (translator.done) return events
  }
  events.push(...translator.end())
  return events
}

/** Canonical events → the client's Responses stream, as stream-response.ts drives the encoder. */
function encode(body: ResponsesRequest, events: ChatEvent[]): string {
  const encoder = new ResponsesStreamEncoder(META, echoOf(body))
  const frames = encoder.start()
  for (const event of events) {
    if (event.type === 'finish') frames.push(...encoder.finish(event.reason, event.usage))
    else if (event.type === 'error') frames.push(...encoder.fail(toApiError(event.error)))
    else frames.push(...encoder.push(event))
  }
  return frames.join('')
}

for (const { name, streams } of CASES) {
  describe(`Responses golden: ${name}`, () => {
    let body: ResponsesRequest
    let canonical: ChatRequest

    test('wire request → canonical → each upstream request', async () => {
      body = await Bun.file(new URL(`responses/${name}/request.json`, FIXTURES)).json()
      canonical = decodeResponses(body, ROUTE)
      await golden(`responses/${name}/canonical.json`, json(canonical))
      await golden(`responses/${name}/upstream.openai-compatible.json`, json(toOpenAI(canonical, 'golden-upstream', { reasoningHistory: 'reasoning_content' })))
      await golden(`responses/${name}/upstream.anthropic.json`, json(toAnthropic(canonical, 'golden-upstream')))
    })

    for (const [backend, stream] of Object.entries(streams) as Array<[Backend, string]>) {
      test(`${backend} upstream stream → canonical events → client stream`, async () => {
        body ??= await Bun.file(new URL(`responses/${name}/request.json`, FIXTURES)).json()
        const events = await translate(backend, await Bun.file(new URL(`upstream/${backend}/${stream}.sse`, FIXTURES)).text())
        assertEventGrammar(events)
        await golden(`responses/${name}/${backend}.events.json`, json(events))
        const sse = encode(body, events)
        await golden(`responses/${name}/${backend}.client.sse`, sse)

        // The official SDK's stream helper accepts every event and ends where the stream says.
        const client = new OpenAI({ apiKey: 'k', baseURL: 'http://golden.invalid/v1', maxRetries: 0, fetch: async () => new Response(sse, { headers: { 'content-type': 'text/event-stream' } }) })
        // (Without text.format: the recorded upstream texts are not the JSON it would parse.)
        const { text: _format, ...params } = body
        const final = await client.responses.stream(params as never).finalResponse()
        const terminal = events[events.length - 1]!
        const text = events.flatMap(event => (event.type === 'text-delta' ? [event.delta] : [])).join('')
        expect([final.id, final.status, final.output_text]).toEqual(['resp_golden', terminal.type === 'finish' ? (terminal.reason === 'length' ? 'incomplete' : 'completed') : 'failed', text])
        expect(final.output).toHaveLength(new Set(events.flatMap(event => ('block' in event ? [event.block] : []))).size)
      })
    }
  })
}
