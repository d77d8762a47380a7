import { afterEach, beforeEach, expect, test } from 'bun:test'
import type { ExtractorPool } from '../../src/documents/types'
import { createLogger } from '../../src/observability/logger'
import { openAIWire } from '../providers/openai-wire'
import { parseCharges } from '../support/documents'
import { json } from '../support/harness'
import { poll } from '../support/poll'
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

test('a run whose attached file was being read when the drain began still runs, its file charged once', async () => {
  // Before: the file's unit was charged, then every participant was refused as a new request and
  // the run answered 503.
  await h.close()
  let release!: () => void
  const held = new Promise<void>(resolve => (release = resolve))
  let jobs = 0
  const extractor: ExtractorPool = {
    async extract() {
      jobs += 1
      await held
      return { text: 'Quarterly notes.', documentType: 'text' }
    },
    stats: () => ({ workers: 1, busy: jobs, queued: 0 }),
    close: async () => {},
  }
  h = await buildFusionHarness({ extractor })
  h.a.enqueue(answer('A.', USAGE))
  h.b.enqueue(answer('B.', USAGE))
  h.judge.enqueue(answer('AB.', USAGE))
  const file = `data:text/plain;base64,${Buffer.from('Quarterly notes.').toString('base64')}`
  const pending = h.fusion({ models: ['a', 'b'], messages: [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'file', file: { file_data: file, filename: 'notes.txt' } }] }] })
  await poll('the file to reach the extractor', 200, 10, () => (jobs === 1 ? true : undefined))
  h.t.deps.lifecycle.drain()
  release()
  const response = await pending
  expect(response.status).toBe(200)
  expect(await json(response)).toMatchObject({ status: 'complete', synthesis: 'AB.' })
  expect(await parseCharges(h.t, h.org.orgId)).toEqual([h.t.deps.config.documents.pricePerParseNanos])
  expect((await fusionEntries(h.t)).length).toBe(3)
})

test('once the drain deadline has cut the run, its judge is not started: the answer is partial, the judge never called', async () => {
  // Before: the judge of a run whose participant had answered was admitted after the cut (it
  // continues a request in flight), ran uncut past the deadline, and was dropped with the process.
  let release!: () => void
  const gate = new Promise<void>(resolve => (release = resolve))
  h.a.enqueue(answer('A.', USAGE))
  h.b.enqueue({ kind: 'sse' as const, body: [gate, openAIWire.stream({ text: 'B.', finish: 'stop', usage: USAGE })] })
  h.judge.enqueue(answer('AB.', USAGE))
  const pending = h.fusion({ models: ['a', 'b'], messages: USER_MESSAGES })
  await poll('participant a to be charged', 200, 10, async () => ((await fusionEntries(h.t)).length === 1 ? true : undefined))
  await h.b.request(0)
  h.t.deps.lifecycle.drain()
  h.t.deps.lifecycle.abortAll()
  const result = await json(await pending)
  release()
  expect(result).toMatchObject({ status: 'partial', synthesis: '', synthesis_error_code: 'unavailable' })
  expect(h.judge.requests).toHaveLength(0)
  expect((await fusionEntries(h.t)).map(entry => entry.amount)).toEqual([chargeOf(PARTICIPANT_PRICE, USAGE)])
  expect(h.t.deps.lifecycle.inFlight).toBe(0)
})

test('streamed, a run cut by the drain deadline announces no synthesis, and no judge line is logged', async () => {
  // Before: `synthesis.started` went out and the judge was logged `failed` (unavailable) though it was never called.
  await h.close()
  const lines: Array<Record<string, unknown>> = []
  h = await buildFusionHarness({ logger: createLogger('info', line => lines.push(JSON.parse(line))) })
  let release!: () => void
  const gate = new Promise<void>(resolve => (release = resolve))
  h.a.enqueue(answer('A.', USAGE))
  h.b.enqueue({ kind: 'sse' as const, body: [gate, openAIWire.stream({ text: 'B.', finish: 'stop', usage: USAGE })] })
  const response = await h.fusion({ models: ['a', 'b'], messages: USER_MESSAGES, stream: true })
  await poll('participant a to be charged', 200, 10, async () => ((await fusionEntries(h.t)).length === 1 ? true : undefined))
  await h.b.request(0)
  h.t.deps.lifecycle.drain()
  h.t.deps.lifecycle.abortAll()
  const text = await response.text()
  release()
  const events = [...text.matchAll(/^event: (\S+)$/gm)].map(match => match[1])
  expect(events).not.toContain('synthesis.started')
  expect(events.at(-1)).toBe('fusion.completion')
  expect(text).toContain('"synthesis_error_code":"unavailable"')
  expect(h.judge.requests).toHaveLength(0)
  expect(lines.filter(line => line.msg === 'chat' && line.role === 'judge')).toEqual([])
  expect(lines.find(line => line.msg === 'fusion')).toMatchObject({ status: 'partial', synthesized: false })
})
