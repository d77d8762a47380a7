import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import type { ChatEvent, ChatRequest } from '../../src/inference/canonical'
import { decodeResponses } from '../../src/inference/dialects/responses/decode'
import { echoOf } from '../../src/inference/dialects/responses/encode'
import { ResponsesStreamEncoder } from '../../src/inference/dialects/responses/encode-stream'
import type { ResponsesRequest } from '../../src/inference/dialects/responses/schema'
import { toUpstream as toAnthropic } from '../../src/providers/anthropic/to-upstream'
import { toUpstream as toOpenAI } from '../../src/providers/openai-compatible/to-upstream'
import { assertEventGrammar } from '../providers/events'
import { encodeEvents } from '../support/pass-through'
import { type Backend, FIXTURES, golden, goldenJson as json, upstreamEvents, anthropicBodyOrRefusal, GOLDEN_NOW as NOW, GOLDEN_ROUTE as ROUTE, type GoldenCase } from '../support/golden'

// Golden translations for the Responses client format × each HTTP backend, stored as fixtures
// under test/fixtures/responses/<case>/:
//   request.json → canonical.json → upstream.<backend>.json           (the request direction)
//   test/fixtures/upstream/<backend>/<stream>.sse → <backend>.events.json → <backend>.client.sse
// The upstream streams are recorded wire text; everything else is what the code produces,
// reviewed when written. Rewrite after a deliberate change with UPDATE_GOLDEN=1.

const META = { id: 'resp_golden', model: 'golden', createdAt: NOW / 1000, includeUsage: true, estimatedInputTokens: 0 }


const CASES: GoldenCase[] = [
  { name: 'text', streams: { 'openai-compatible': 'text', anthropic: 'text' } },
  { name: 'reasoning-tools', streams: { 'openai-compatible': 'reasoning-tool', anthropic: 'thinking-tool' } },
  { name: 'redacted-thinking', streams: { anthropic: 'redacted-thinking' } },
  { name: 'error-mid-stream', streams: { 'openai-compatible': 'error-mid-stream', anthropic: 'error-mid-stream' } },
]

const translate = (backend: Backend, sse: string) => upstreamEvents(backend, sse, { name: 'golden', model: 'golden-upstream', now: NOW })

/** Canonical events → the client's Responses stream, as stream-response.ts drives the encoder. */
function encode(body: ResponsesRequest, events: ChatEvent[]): string {
  return encodeEvents(new ResponsesStreamEncoder(META, echoOf(body)), events)
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
      await golden(`responses/${name}/upstream.anthropic.json`, json(anthropicBodyOrRefusal(() => toAnthropic(canonical, 'golden-upstream'))))
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
