import { afterAll, beforeAll, expect, test } from 'bun:test'
import { anthropicWire } from '../providers/anthropic-wire'
import { openAIWire } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { paygConfig, startServedGateway, upstreamProvider, type ServedGateway } from '../support/gateway'

// A model served by an Anthropic backend and an OpenAI-compatible one: a request the Anthropic
// adapter refuses before any call (a whitespace-only stop sequence) is the next backend's to
// serve, not a 400 that depends on the rotation or on the other backend's cool-down (QA). The
// refusing backend is not at fault: no cool-down, the next request goes to it first again.

let claude: FakeUpstream
let openai: FakeUpstream
let g: ServedGateway

beforeAll(async () => {
  claude = await FakeUpstream.start()
  openai = await FakeUpstream.start()
  const yaml = paygConfig(
    [upstreamProvider('cl', 'anthropic', `${claude.url}/v1`, 'UP_KEY'), upstreamProvider('oa', 'openai-compatible', `${openai.url}/v1`, 'UP_KEY')],
    [
      '  - { id: mixed, backends: [{ provider: cl, model: claude-x }, { provider: oa, model: gpt-x }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 16384, max_output_tokens: 1024 }',
      '  - { id: oa-first, backends: [{ provider: oa, model: gpt-x }, { provider: cl, model: claude-x }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 16384, max_output_tokens: 1024 }',
      '  - { id: claude-pair, backends: [{ provider: cl, model: claude-x }, { provider: cl, model: claude-y }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 16384, max_output_tokens: 1024 }',
    ],
  )
  g = await startServedGateway(yaml, { UP_KEY: 'sk-up-0123456789' })
})

afterAll(async () => {
  await g.close()
  await claude.close()
  await openai.close()
})

test('a request the first backend cannot carry is served by the next; the first is not cooled down for it', async () => {
  openai.enqueue({ kind: 'sse', body: openAIWire.stream({ text: 'from openai', finish: 'stop', usage: { inputTokens: 3, outputTokens: 2 } }) })
  const served = await g.openai.chat.completions.create({ model: 'mixed', messages: [{ role: 'user', content: 'hi' }], stop: [' \t'] })
  expect(served.choices[0]!.message.content).toBe('from openai')
  expect(claude.requests).toHaveLength(0)
  // No upstream call was refused: nothing is counted for the Anthropic backend.
  expect(g.t.deps.metrics.registry.render().split('\n').filter(line => line.startsWith('svc_upstream_') && line.includes('anthropic:'))).toEqual([])
  claude.enqueue({ kind: 'sse', body: anthropicWire.stream({ text: 'from claude', finish: 'stop', usage: { inputTokens: 3, outputTokens: 2 } }) })
  const next = await g.openai.chat.completions.create({ model: 'mixed', messages: [{ role: 'user', content: 'hi' }] })
  expect(next.choices[0]!.message.content).toBe('from claude')
})

test('a backend that could carry the request failed first: its failure is the answer (502 to retry), not the refusal of the next', async () => {
  // The OpenAI-compatible backend, first, fails (503); the Anthropic one after it cannot carry a
  // whitespace stop. Before: a 400 for the client's request, which an SDK does not retry (QA).
  openai.enqueue({ kind: 'json', status: 503, body: { error: { message: 'overloaded' } } })
  const failed = await g.openai.chat.completions.create({ model: 'oa-first', messages: [{ role: 'user', content: 'hi' }], stop: [' \t'] }).catch(error => error)
  expect(failed.status).toBe(502)
  expect(claude.requests).toHaveLength(1) // the earlier test's call only
})

test("count_tokens estimates when the first backend's adapter cannot carry the request another backend serves", async () => {
  // An empty final assistant message (a prefill, which Messages allows) leaves the Anthropic adapter no turn to send.
  const counted = await g.anthropic.messages.countTokens({ model: 'mixed', messages: [{ role: 'assistant', content: [] }] })
  expect(counted.input_tokens).toBeGreaterThan(0)
})

test('count_tokens falls back as a call would: the next backend counts after an overload, or the estimate stands in for one that cannot', async () => {
  // QA: a model whose chats succeeded by fallback answered count_tokens with the first backend's 529 as a 502.
  const overloaded = { kind: 'json' as const, status: 529, body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } }
  const before = claude.requests.length
  claude.enqueue(overloaded)
  claude.enqueue({ kind: 'json', status: 200, body: { input_tokens: 42 } })
  const counted = await g.anthropic.messages.countTokens({ model: 'claude-pair', messages: [{ role: 'user', content: 'hi' }] })
  expect(counted.input_tokens).toBe(42)
  expect(claude.requests.slice(before).map(request => request.body.model)).toEqual(['claude-x', 'claude-y'])
  // The next backend is OpenAI-compatible, which cannot count: the estimate, and no call to it.
  claude.enqueue(overloaded)
  const estimated = await g.anthropic.messages.countTokens({ model: 'mixed', messages: [{ role: 'user', content: 'hi' }] })
  expect(estimated.input_tokens).toBe(Math.ceil(2 / 4) + 4)
  expect(openai.requests.filter(request => request.path.includes('count'))).toEqual([])
})
