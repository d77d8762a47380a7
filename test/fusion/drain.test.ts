import { afterEach, beforeEach, expect, test } from 'bun:test'
import { openAIWire } from '../providers/openai-wire'
import { json } from '../support/harness'
import { answer, buildFusionHarness, chargeOf, fusionEntries, JUDGE_PRICE, PARTICIPANT_PRICE, USER_MESSAGES, type FusionHarness } from './support'

// A graceful shutdown (SIGTERM: the lifecycle drains) lets requests in flight finish; only new
// billed calls are refused. A Fusion run in flight is one request: its judge, which starts after
// the drain began, belongs to it. Before: the judge was refused as a new call, so a run caught by
// a deploy paid for its participants and got no synthesis.

let h: FusionHarness
beforeEach(async () => {
  h = await buildFusionHarness()
})
afterEach(async () => {
  await h.close()
})

const USAGE = { inputTokens: 100, outputTokens: 20 }

test('a run in flight when the drain starts still gets its synthesis; a run that arrives after it is refused, unbilled', async () => {
  let release!: () => void
  const gate = new Promise<void>(resolve => (release = resolve))
  const held = (text: string) => ({ kind: 'sse' as const, body: [gate, openAIWire.stream({ text, finish: 'stop', usage: USAGE })] })
  h.a.enqueue(held('A.'))
  h.b.enqueue(held('B.'))
  h.judge.enqueue(answer('AB.', USAGE))
  const pending = h.fusion({ models: ['a', 'b'], messages: USER_MESSAGES })
  await Promise.all([h.a.request(0), h.b.request(0)])
  h.t.deps.lifecycle.drain()
  release()
  const result = await json(await pending)
  expect(result).toMatchObject({ status: 'complete', synthesis: 'AB.' })
  expect((await fusionEntries(h.t)).map(entry => entry.amount).sort()).toEqual([chargeOf(PARTICIPANT_PRICE, USAGE), chargeOf(PARTICIPANT_PRICE, USAGE), chargeOf(JUDGE_PRICE, USAGE)].sort())

  const late = await h.fusion({ models: ['a', 'b'], messages: USER_MESSAGES })
  expect(late.status).toBe(503)
  expect((await json(late)).error.code).toBe('unavailable')
  expect(h.a.requests.length + h.b.requests.length).toBe(2)
  expect((await fusionEntries(h.t)).length).toBe(3)
})
