import Anthropic from '@anthropic-ai/sdk'
import { jsonSchemaOutputFormat } from '@anthropic-ai/sdk/helpers/json-schema'
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { zodFunction, zodResponseFormat, zodTextFormat } from 'openai/helpers/zod'
import { z } from 'zod'
import { anthropicClient, openAIClient } from '../support/gateway'
import { buildTestApp, type TestApp } from '../support/harness'

// The offline demo answers a text turn asked for as JSON with JSON: a sample of a json_schema
// format (as its tool arguments are), `{"reply": …}` for json_object. Each SDK's parse helper
// reads it (QA: they all threw on the plain echo). A turn that calls a tool is unchanged.

let t: TestApp
let openai: OpenAI
let anthropic: Anthropic
beforeAll(async () => {
  t = await buildTestApp()
  const org = await t.createOrg()
  const base = t.listen()
  openai = openAIClient(base, org.adminKey)
  anthropic = anthropicClient(base, org.adminKey)
})
afterAll(() => t.close())

const Weather = z.object({ city: z.string(), temp: z.number().min(-50), when: z.iso.datetime(), contact: z.email(), unit: z.enum(['c', 'f']) })
const expected: z.infer<typeof Weather> = { city: 'demo', temp: -50, when: '2026-01-01T00:00:00Z', contact: 'demo@example.com', unit: 'c' }

test('chat.completions.parse and responses.parse read a sample of the schema, streamed or not', async () => {
  const chat = await openai.chat.completions.parse({ model: 'demo-anonymous', messages: [{ role: 'user', content: 'weather' }], response_format: zodResponseFormat(Weather, 'weather') })
  expect(chat.choices[0]!.message.parsed).toEqual(expected)
  const streamed = await openai.chat.completions.stream({ model: 'demo-anonymous', messages: [{ role: 'user', content: 'weather' }], response_format: zodResponseFormat(Weather, 'weather') }).finalChatCompletion()
  expect(streamed.choices[0]!.message.parsed).toEqual(expected)
  const response = await openai.responses.parse({ model: 'demo-anonymous', input: 'weather', text: { format: zodTextFormat(Weather, 'weather') } })
  expect(response.output_parsed).toEqual(expected)
})

test('messages.parse reads it; a shared definition ($ref) is followed', async () => {
  const schema = {
    type: 'object',
    properties: { home: { $ref: '#/$defs/place' }, away: { $ref: '#/$defs/place' } },
    required: ['home', 'away'],
    additionalProperties: false,
    $defs: { place: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false } },
  } as const
  const message = await anthropic.messages.parse({ model: 'demo-anonymous', max_tokens: 200, messages: [{ role: 'user', content: 'trip' }], output_config: { format: jsonSchemaOutputFormat(schema) } })
  expect(message.parsed_output).toEqual({ home: { city: 'demo' }, away: { city: 'demo' } })
})

test('json_object wraps the answer as {"reply": …}; a tool call is still a tool call', async () => {
  const completion = await openai.chat.completions.create({ model: 'demo-anonymous', messages: [{ role: 'user', content: 'give json' }], response_format: { type: 'json_object' } })
  expect(JSON.parse(completion.choices[0]!.message.content!)).toEqual({ reply: 'Hello from the demo model. You said: give json' })
  const called = await openai.chat.completions.create({
    model: 'demo-anonymous',
    messages: [{ role: 'user', content: 'call it' }],
    response_format: { type: 'json_object' },
    tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } } }],
  })
  expect(called.choices[0]!.message.tool_calls?.map(call => call.type === 'function' && [call.function.name, call.function.arguments])).toEqual([['lookup', '{"q":"demo"}']])
})

test("the SDK's own assistant message goes back as is: a strict call's parsed_arguments is accepted and not read", async () => {
  // Before: 400 "messages.1.tool_calls.0.function.parsed_arguments ... unexpected property" on
  // the second turn of every strict-tool loop that appends the helper's message to the history.
  const Lookup = z.object({ q: z.string() })
  const tools = [zodFunction({ name: 'lookup', parameters: Lookup })]
  const question = { role: 'user' as const, content: 'call it' }
  const streamed = await openai.chat.completions.stream({ model: 'demo-anonymous', messages: [question], tools }).finalMessage()
  const parsed = (await openai.chat.completions.parse({ model: 'demo-anonymous', messages: [question], tools })).choices[0]!.message
  for (const message of [streamed, parsed]) {
    const call = message.tool_calls![0] as OpenAI.Chat.ParsedFunctionToolCall
    expect(call.function.parsed_arguments).toEqual({ q: 'demo' })
    const answer = await openai.chat.completions.create({ model: 'demo-anonymous', messages: [question, message, { role: 'tool', tool_call_id: call.id, content: 'found' }], tools })
    expect(answer.choices[0]!.message.content).toBe('The lookup tool returned: found')
  }
})
