import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { renderError } from '../../src/http/errors'
import type { ChatEvent, ChatRequest } from '../../src/inference/canonical'
import { collect } from '../../src/inference/collect'
import { decodeChatCompletions } from '../../src/inference/dialects/chat-completions/decode'
import { encodeChatCompletion } from '../../src/inference/dialects/chat-completions/encode'
import { ChatCompletionsStreamEncoder } from '../../src/inference/dialects/chat-completions/encode-stream'
import type { ChatCompletionsRequest } from '../../src/inference/dialects/chat-completions/schema'
import type { ResponseMeta } from '../../src/inference/dialects/types'
import { toApiError } from '../../src/inference/upstream-errors'
import { toUpstream as toAnthropic } from '../../src/providers/anthropic/to-upstream'
import { toUpstream as toOpenAI } from '../../src/providers/openai-compatible/to-upstream'
import { assertEventGrammar } from '../providers/events'
import { encodeEvents } from '../support/pass-through'
import { type Backend, fixture, golden, goldenJson as json, replay, upstreamEvents, anthropicBodyOrRefusal, GOLDEN_NOW as NOW, GOLDEN_ROUTE as ROUTE, type GoldenCase } from '../support/golden'

// Golden translations for the Chat Completions client format × each HTTP backend, stored as
// fixtures under test/fixtures/chat-completions/<case>/ (the same layout as responses/):
//   request.json → canonical.json → upstream.<backend>.json           (the request direction)
//   test/fixtures/upstream/<backend>/<stream>.sse → <backend>.events.json → <backend>.client.sse
//                                                                     and <backend>.completion.json
// (the non-streamed chat.completion, or the error envelope the client gets when the upstream
// failed). The upstream streams are recorded wire text; everything else is what the code
// produces, reviewed when written. Rewrite after a deliberate change with UPDATE_GOLDEN=1.



const CASES: GoldenCase[] = [
  { name: 'text', streams: { 'openai-compatible': 'text', anthropic: 'text' } },
  { name: 'reasoning-tools', streams: { 'openai-compatible': 'reasoning-tool', anthropic: 'thinking-tool' } },
  // No stream_options: the client stream must end without a usage chunk.
  { name: 'image', streams: { 'openai-compatible': 'text', anthropic: 'text' } },
  // To Anthropic the format is its structured output, output_config.format.
  { name: 'json-schema', streams: { 'openai-compatible': 'json', anthropic: 'json' } },
  { name: 'error-mid-stream', streams: { 'openai-compatible': 'error-mid-stream', anthropic: 'error-mid-stream' } },
  // Anthropic's in-band rate_limit_error: the frame carries the 429 envelope's type, as the HTTP error would.
  { name: 'rate-limited-mid-stream', streams: { anthropic: 'rate-limited-mid-stream' } },
  { name: 'usage-cached-reasoning', streams: { 'openai-compatible': 'reasoning-cached', anthropic: 'cached-thinking' } },
]

const translate = (backend: Backend, sse: string) => upstreamEvents(backend, sse, { name: 'golden', model: 'golden-upstream', now: NOW })

/** What the route hands the encoders for this request (pipeline.ts runChat), with a fixed id and time. */
const metaOf = (body: ChatCompletionsRequest): ResponseMeta => ({
  id: 'chatcmpl-golden',
  model: body.model,
  createdAt: NOW / 1000,
  includeUsage: body.stream_options?.include_usage === true,
  estimatedInputTokens: 0,
})

/** Canonical events → the client's Chat Completions stream, as stream-response.ts drives the encoder. */
function encode(body: ChatCompletionsRequest, events: ChatEvent[]): string {
  return encodeEvents(new ChatCompletionsStreamEncoder(metaOf(body)), events)
}

/** The non-streamed answer: the chat.completion object, or the error body when the upstream failed (collectChat throws it). */
async function complete(body: ChatCompletionsRequest, events: ChatEvent[]): Promise<unknown> {
  const result = await collect(replay(events), () => {})
  if (result.error !== undefined) return renderError(toApiError(result.error), 'openai', 'req_golden').json()
  return encodeChatCompletion(result, result.usage!, metaOf(body))
}

/** A client of the official SDK whose every request is answered with `body`. */
const sdkAnswering = (body: string, contentType: string) =>
  new OpenAI({ apiKey: 'k', baseURL: 'http://golden.invalid/v1', maxRetries: 0, fetch: async () => new Response(body, { headers: { 'content-type': contentType } }) })

for (const { name, streams } of CASES) {
  describe(`Chat Completions golden: ${name}`, () => {
    let body: ChatCompletionsRequest
    let canonical: ChatRequest

    test('wire request → canonical → each upstream request', async () => {
      body = JSON.parse(await fixture(`chat-completions/${name}/request.json`))
      canonical = decodeChatCompletions(structuredClone(body), ROUTE)
      await golden(`chat-completions/${name}/canonical.json`, json(canonical))
      await golden(`chat-completions/${name}/upstream.openai-compatible.json`, json(toOpenAI(canonical, 'golden-upstream', { reasoningHistory: 'reasoning_content' })))
      await golden(`chat-completions/${name}/upstream.anthropic.json`, json(anthropicBodyOrRefusal(() => toAnthropic(canonical, 'golden-upstream'))))
    })

    for (const [backend, stream] of Object.entries(streams) as Array<[Backend, string]>) {
      test(`${backend} upstream stream → canonical events → client stream and completion`, async () => {
        body ??= JSON.parse(await fixture(`chat-completions/${name}/request.json`))
        const events = await translate(backend, await fixture(`upstream/${backend}/${stream}.sse`))
        assertEventGrammar(events)
        await golden(`chat-completions/${name}/${backend}.events.json`, json(events))
        const sse = encode(body, events)
        await golden(`chat-completions/${name}/${backend}.client.sse`, sse)
        const completion = await complete(body, events)
        await golden(`chat-completions/${name}/${backend}.completion.json`, json(completion))

        // Wire rules the SDK does not check: one id for every chunk, one finish_reason, a
        // usage chunk (choices empty) only when stream_options.include_usage (and then
        // `"usage":null` on every other chunk, no usage key at all otherwise), [DONE] last.
        const frames = sse.split('\n\n').filter(frame => frame !== '').map(frame => frame.slice('data: '.length))
        expect(frames.at(-1)).toBe('[DONE]')
        const chunks = frames.slice(0, -1).map(frame => JSON.parse(frame) as Record<string, any>)
        const terminal = events[events.length - 1]!
        if (terminal.type === 'error') {
          expect(chunks.at(-1)).toEqual(completion as Record<string, any>)
          chunks.pop()
        }
        expect(new Set(chunks.map(chunk => chunk.id))).toEqual(new Set(['chatcmpl-golden']))
        expect(chunks.filter(chunk => chunk.choices[0]?.finish_reason != null)).toHaveLength(terminal.type === 'finish' ? 1 : 0)
        const includeUsage = body.stream_options?.include_usage === true
        expect(chunks.filter(chunk => chunk.usage !== undefined && chunk.usage !== null)).toHaveLength(terminal.type === 'finish' && includeUsage ? 1 : 0)
        expect(chunks.filter(chunk => chunk.choices.length > 0).map(chunk => chunk.usage)).toEqual(chunks.filter(chunk => chunk.choices.length > 0).map(() => (includeUsage ? null : undefined)))

        // The official SDK's stream helper accumulates the stream into the same completion.
        const runner = sdkAnswering(sse, 'text/event-stream').chat.completions.stream(body as never)
        let reasoning = ''
        const final = (async () => {
          for await (const chunk of runner) reasoning += (chunk.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? ''
          return runner.finalChatCompletion()
        })()
        if (terminal.type === 'error') {
          await expect(final).rejects.toThrow((completion as { error: { message: string } }).error.message)
          return
        }
        const streamed = await final
        const expected = completion as ReturnType<typeof encodeChatCompletion>
        const message = expected.choices[0]!.message as { content: string | null; reasoning_content?: string; tool_calls?: unknown[] }
        expect(streamed.id).toBe(expected.id)
        expect(streamed.choices[0]!.finish_reason).toBe(expected.choices[0]!.finish_reason as never)
        expect(streamed.choices[0]!.message.content ?? '').toBe(message.content ?? '')
        expect(streamed.choices[0]!.message.tool_calls ?? []).toEqual((message.tool_calls ?? []) as never)
        expect(reasoning).toBe(message.reasoning_content ?? '')
        expect(streamed.usage).toEqual(body.stream_options?.include_usage ? expected.usage : (undefined as never))
        if (body.response_format?.type === 'json_schema') expect(streamed.choices[0]!.message.parsed).toEqual(JSON.parse(message.content!))

        // And the SDK reads the non-streamed object as it was written.
        const parsed = await sdkAnswering(JSON.stringify(completion), 'application/json').chat.completions.create({ ...body, stream: false } as never)
        expect(JSON.parse(JSON.stringify(parsed))).toEqual(JSON.parse(JSON.stringify(completion)))
      })
    }
  })
}
