import { expect, test } from 'bun:test'
import type OpenAI from 'openai'
import { ApiError } from '../../src/http/errors'
import type { Usage } from '../../src/inference/canonical'
import type { ChatResult } from '../../src/inference/collect'
import { echoOf, encodeResponse } from '../../src/inference/dialects/responses/encode'
import { ResponsesStreamEncoder } from '../../src/inference/dialects/responses/encode-stream'

// Every field the openai SDK's `Response` type requires is in every response object the gateway
// writes: the JSON reply and each lifecycle event's (created, in_progress, completed, failed).
// QA: access_programs (`AccessPrograms | null`, required) was missing, so a typed client read
// undefined where its type promises an object or null.

type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T]
// output_text is not on the wire: the SDK computes it from `output` (its addOutputText).
type WireRequired = Exclude<RequiredKeys<OpenAI.Responses.Response>, 'output_text'>
// A Record over exactly those keys: tsc fails here when the SDK's required set changes.
const REQUIRED: Record<WireRequired, true> = {
  id: true, access_programs: true, created_at: true, error: true, incomplete_details: true, instructions: true, metadata: true, model: true,
  object: true, output: true, parallel_tool_calls: true, temperature: true, tool_choice: true, tools: true, top_p: true,
}

const META = { id: 'resp_unit', model: 'unit', createdAt: 1_768_478_400, includeUsage: true, estimatedInputTokens: 0 }
const USAGE: Usage = { inputTokens: 10, outputTokens: 20, webSearchRequests: 0, webFetchRequests: 0 }
const echo = () => echoOf({ model: 'unit', input: 'x' })
const missing = (response: Record<string, unknown>) => Object.keys(REQUIRED).filter(key => !(key in response))
const responses = (frames: string[]) => frames.map(frame => JSON.parse(frame.slice(frame.indexOf('data: ') + 6))).flatMap(data => (data.response ? [data.response] : []))

test('the non-streamed response object has every field the SDK requires; access_programs is null (no access program)', () => {
  const result = { blocks: [{ type: 'text', text: 'Hi' }], text: 'Hi', reasoning: '', toolCalls: [], finishReason: 'stop', usage: USAGE, error: undefined } as unknown as ChatResult
  const response = encodeResponse(result, USAGE, META, echo())
  expect(missing(response)).toEqual([])
  expect(response.access_programs).toBeNull()
})

test('every streamed response object has them too, a failed one included', () => {
  const done = new ResponsesStreamEncoder(META, echo())
  const completed = responses([...done.start(), ...done.push({ type: 'text-start', block: 0 }), ...done.push({ type: 'text-delta', block: 0, delta: 'Hi' }), ...done.finish('stop', USAGE)])
  const failing = new ResponsesStreamEncoder(META, echo())
  const failed = responses([...failing.start(), ...failing.fail(new ApiError('provider_error', 'boom'))])
  expect([...completed, ...failed].map(response => response.status)).toEqual(['in_progress', 'in_progress', 'completed', 'in_progress', 'in_progress', 'failed'])
  for (const response of [...completed, ...failed]) {
    expect(missing(response)).toEqual([])
    expect(response.access_programs).toBeNull()
  }
})
