import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createLogger } from '../../src/observability/logger'
import { FakeUpstream } from '../support/fake-upstream'
import { buildConfiguredApp, type TestApp, type TestOrg } from '../support/harness'
import { codeFlowTokens } from '../support/oauth'

// A JSON-RPC batch of billed tools/calls is one HTTP request with one log line: its usage and
// charge are the batch's, all of them (before, the last call's alone: summing the log lines
// counted less than the ledger).

let t: TestApp
let upstream: FakeUpstream
let org: TestOrg
let token: string
const lines: string[] = []

beforeAll(async () => {
  upstream = await FakeUpstream.start()
  const yaml = [
    'providers:',
    `  - { id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none }`,
    'models:',
    '  - { id: solo, backends: [{ provider: up, model: model-a }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 16384, max_output_tokens: 2048 }',
    'plans: { payg: { monthly_allowance: "0", fusion: false } }',
  ]
  t = await buildConfiguredApp(yaml, { UP_KEY: 'sk-up' }, { logger: createLogger('info', line => lines.push(line)) })
  org = await t.createOrg('acme', 1_000_000_000n)
  token = (await codeFlowTokens(t, org.adminKey)).access_token
})

afterAll(async () => {
  await upstream.close()
  await t.close()
})

test("a batch's line carries every call's usage and charge, as the ledger booked them", async () => {
  const answer = (input: number, output: number) => ({
    kind: 'json' as const,
    body: { id: 'c1', object: 'chat.completion', created: 1, model: 'up', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output } },
  })
  upstream.enqueue(answer(11, 7), answer(5, 3))
  const call = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'svc.chat', arguments: { model: 'solo', prompt: 'hi' } } })
  const response = await t.app.handle(
    new Request('http://localhost/mcp', {
      method: 'POST',
      body: JSON.stringify([call(1), call(2)]),
      headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-03-26', authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-request-id': 'req-batch' },
    }),
  )
  expect(((await response.json()) as unknown[]).length).toBe(2)
  const settled = await t.deps.database.client.execute("SELECT coalesce(sum(amount_nanos), 0) AS s FROM ledger_entries WHERE kind = 'settle'")
  const line = lines.map(text => JSON.parse(text)).find(entry => entry.msg === 'request' && entry.request_id === 'req-batch')
  expect(line).toMatchObject({ input_tokens: 16, output_tokens: 10, charged_nanos: String(settled.rows[0]!.s) })
  // 16 input tokens at 1 USD and 10 output tokens at 2 USD per million, in nanos.
  expect(line.charged_nanos).toBe(String(16n * 1000n + 10n * 2000n))
})
