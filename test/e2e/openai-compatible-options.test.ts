import { afterEach, expect, test } from 'bun:test'
import type OpenAI from 'openai'
import { chunk, DONE, frame, openAIUsage } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { paygConfig, startServedGateway, type ServedGateway } from '../support/gateway'

// A Chat Completions backend's wire choices, set per provider in config, reach the upstream body:
// the output cap's field (OpenAI's reasoning models refuse max_tokens) and the reasoning of a
// tool loop's earlier turn sent back as reasoning_content (DeepSeek's thinking mode needs it).

let upstream: FakeUpstream
let gateway: ServedGateway
afterEach(async () => {
  await gateway?.close()
  await upstream?.close()
})

async function start(options: string) {
  upstream = await FakeUpstream.start()
  const yaml = paygConfig(
    [`  - { id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none${options} }`],
    ['  - { id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 4096, max_output_tokens: 256, capabilities: { tools: true, reasoning: true } }'],
  )
  gateway = await startServedGateway(yaml, { UP_KEY: 'sk-up-0123456789' })
  upstream.enqueue({
    kind: 'sse',
    body: chunk({ role: 'assistant', content: 'Sunny.' }) + chunk({}, 'stop') + frame({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm1', choices: [], usage: openAIUsage({ inputTokens: 9, outputTokens: 2 }) }) + DONE,
  })
}

/** A tool loop's second turn whose assistant message carries the reasoning of its first. */
const secondTurn = {
  model: 'm',
  stream: true as const,
  max_completion_tokens: 100,
  tools: [{ type: 'function' as const, function: { name: 'weather', parameters: { type: 'object' } } }],
  messages: [
    { role: 'user' as const, content: 'Weather in Oslo?' },
    // reasoning_content: not in the SDK's types, but what DeepSeek's and the SDK's own messages carry.
    { role: 'assistant' as const, content: null, reasoning_content: 'I should look it up.', tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] },
    { role: 'tool' as const, tool_call_id: 'call_1', content: 'sunny' },
  ],
}

/** The body the upstream got for the second turn, with `options` added to the provider's entry. */
async function upstreamBodyWith(options: string) {
  await start(options)
  for await (const _ of await gateway.openai.chat.completions.create(secondTurn as OpenAI.ChatCompletionCreateParamsStreaming)) void _
  return upstream.onlyRequest().body
}

test('by default: max_tokens, and the reasoning of earlier turns is not sent', async () => {
  const body = await upstreamBodyWith('')
  expect(body.max_tokens).toBe(100)
  expect(body.max_completion_tokens).toBeUndefined()
  expect(body.messages[1]).toEqual({ role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] })
})

test('max_tokens_field: max_completion_tokens and reasoning_history: reasoning_content', async () => {
  const body = await upstreamBodyWith(', max_tokens_field: max_completion_tokens, reasoning_history: reasoning_content')
  expect(body.max_completion_tokens).toBe(100)
  expect(body.max_tokens).toBeUndefined()
  expect(body.messages[1].reasoning_content).toBe('I should look it up.')
})
