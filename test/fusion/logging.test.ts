import { afterEach, expect, test } from 'bun:test'
import { createLogger } from '../../src/observability/logger'
import { openAIWire } from '../providers/openai-wire'
import { json } from '../support/harness'
import { answer, buildFusionHarness, chargeOf, fusionEntries, JUDGE_PRICE, PARTICIPANT_PRICE, USER_MESSAGES, type FusionHarness } from './support'

// Every billed call logs one structured line with its usage and charge (ARCHITECTURE.md §8 step
// 9). A Fusion part has no HTTP request of its own, so Fusion writes it: one `chat` line per part
// (purpose fusion), beside the run's `fusion` summary. Before: the parts logged nothing, so no
// log line said what a Fusion run had charged.

let h: FusionHarness
afterEach(async () => {
  await h.close()
})

test('one chat line per part with its usage and exact charge; a failed part logs its error and no charge', async () => {
  const lines: Array<Record<string, unknown>> = []
  h = await buildFusionHarness({ logger: createLogger('info', line => lines.push(JSON.parse(line))) })
  h.a.enqueue(answer('A.', { inputTokens: 101, outputTokens: 11 }))
  h.b.enqueue({ kind: 'json', status: 503, body: openAIWire.errorBody(503, 'overloaded') })
  h.c.enqueue(answer('C.', { inputTokens: 103, outputTokens: 13 }))
  h.judge.enqueue(answer('AC.', { inputTokens: 400, outputTokens: 30 }))
  const result = await json(await h.fusion({ models: ['a', 'b', 'c'], messages: USER_MESSAGES }))
  expect(result.status).toBe('complete')
  const requestId = lines.find(line => line.msg === 'fusion')!.request_id
  const parts = lines.filter(line => line.msg === 'chat' && line.purpose === 'fusion')
  const common = { request_id: requestId, org_id: h.org.orgId, key_id: h.org.adminKeyId, purpose: 'fusion', latency_ms: 0 }
  const byModel = Object.fromEntries(parts.map(line => [line.model, line]))
  expect(parts.length).toBe(4)
  expect(byModel.a).toEqual(expect.objectContaining({ ...common, role: 'participant', outcome: 'ok', input_tokens: 101, output_tokens: 11, charged_nanos: String(chargeOf(PARTICIPANT_PRICE, { inputTokens: 101, outputTokens: 11 })) }))
  expect(byModel.b).toEqual(expect.objectContaining({ ...common, role: 'participant', outcome: 'failed', error_code: 'provider_error', charged_nanos: '0' }))
  expect(byModel.c).toEqual(expect.objectContaining({ ...common, role: 'participant', outcome: 'ok', input_tokens: 103, output_tokens: 13 }))
  expect(byModel.judge).toEqual(expect.objectContaining({ ...common, role: 'judge', outcome: 'ok', input_tokens: 400, output_tokens: 30, charged_nanos: String(chargeOf(JUDGE_PRICE, { inputTokens: 400, outputTokens: 30 })) }))
  // The lines add up to what the ledger holds.
  const logged = parts.reduce((sum, line) => sum + BigInt(line.charged_nanos as string), 0n)
  expect(logged).toBe((await fusionEntries(h.t)).reduce((sum, entry) => sum + entry.amount, 0n))
  // Content never reaches a log line.
  expect(JSON.stringify(lines)).not.toContain('9.11')
})
