import { afterAll, beforeAll, expect, test } from 'bun:test'
import { chunk, DONE, frame } from '../providers/openai-wire'
import { startServedGateway, type ServedGateway } from '../support/gateway'

// An upstream whose usage does not add up (cached tokens beyond the prompt, reasoning beyond the
// output) is billed with each subset held to its whole; the reply reports the same counts, so a
// client can price its own bill from them (QA: it showed cached 50 of a prompt of 10).

const USAGE = { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30, prompt_tokens_details: { cached_tokens: 50 }, completion_tokens_details: { reasoning_tokens: 500 } }
const HEAD = { id: 'chatcmpl-u', object: 'chat.completion.chunk', created: 1, model: 'up-model' }

let upstream: ReturnType<typeof Bun.serve>
let g: ServedGateway

beforeAll(async () => {
  upstream = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: async request => {
      const body = (await request.json()) as { stream?: boolean }
      if (body.stream === false) {
        return Response.json({ ...HEAD, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: USAGE })
      }
      return new Response(chunk({ role: 'assistant', content: 'ok' }) + chunk({}, 'stop') + frame({ ...HEAD, choices: [], usage: USAGE }) + DONE, { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  g = await startServedGateway(
    `providers:
  - { id: up, type: openai-compatible, base_url: "http://127.0.0.1:${upstream.port}/v1", api_key_env: UP_KEY, retention: none }
models:
  - { id: m, backends: [{ provider: up, model: up-model }], price: { input_per_mtok: "1", output_per_mtok: "2", cached_input_per_mtok: "0.5", reasoning_per_mtok: "4" }, context_length: 100000, max_output_tokens: 1000 }
plans: { payg: { monthly_allowance: "0", fusion: false } }
`,
    { UP_KEY: 'sk-up-0123456789' },
  )
})

afterAll(async () => {
  await g.close()
  upstream.stop(true)
})

const balance = async () => (await g.t.deps.balance(g.orgId)).prepaidNanos
// 10 input tokens all cached at 0.5 USD, 20 output tokens all reasoning at 4 USD, per million.
const CHARGE = 10n * 500n + 20n * 4000n

test('Chat Completions, collected and streamed, and Responses: the subsets reported are those billed', async () => {
  let before = await balance()
  const collected = await g.openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
  expect(collected.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 20, prompt_tokens_details: { cached_tokens: 10 }, completion_tokens_details: { reasoning_tokens: 20 } })
  expect(before - (await balance())).toBe(CHARGE)

  before = await balance()
  let streamed: unknown
  for await (const part of await g.openai.chat.completions.create({ model: 'm', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] })) {
    if (part.usage) streamed = part.usage
  }
  expect(streamed).toMatchObject({ prompt_tokens: 10, completion_tokens: 20, prompt_tokens_details: { cached_tokens: 10 }, completion_tokens_details: { reasoning_tokens: 20 } })
  expect(before - (await balance())).toBe(CHARGE)

  before = await balance()
  const response = await g.openai.responses.create({ model: 'm', input: 'hi' })
  expect(response.usage).toMatchObject({ input_tokens: 10, output_tokens: 20, input_tokens_details: { cached_tokens: 10 }, output_tokens_details: { reasoning_tokens: 20 } })
  expect(before - (await balance())).toBe(CHARGE)
})
