import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { SYNTHESIS_INSTRUCTIONS } from '../../src/fusion/synthesis-prompt'
import { openAIWire } from '../providers/openai-wire'
import type { FakeResponse } from '../support/fake-upstream'
import { json } from '../support/harness'
import { answer, buildFusionHarness, chargeOf, fusionEntries, JUDGE_PRICE, PARTICIPANT_PRICE, USER_MESSAGES, type FusionHarness } from './support'

// Every result status of spec §3.2 with fake backends: each participant failing in each way
// (connection refused, 5xx, its deadline, a mid-stream error, a cut stream), the judge failing,
// and what is charged in each case (a failed part never is).

let h: FusionHarness
beforeEach(async () => {
  h = await buildFusionHarness()
})
afterEach(async () => {
  await h.close()
})

const body = (models: string[], extra: Record<string, unknown> = {}) => ({ models, messages: USER_MESSAGES, ...extra })
const spent = async () => 10_000_000_000n - (await h.t.deps.balance(h.org.orgId)).prepaidNanos

describe('complete', () => {
  test('three participants and the synthesis: outputs, usage, finish reasons, the judge saw every answer, four separate charges', async () => {
    h.a.enqueue(answer('9.9 is larger.', { inputTokens: 101, outputTokens: 11 }))
    h.b.enqueue(answer('9.9, because 0.90 > 0.11.', { inputTokens: 102, outputTokens: 12 }, 'length'))
    h.c.enqueue(answer('The larger one is 9.9.', { inputTokens: 103, outputTokens: 13 }))
    h.judge.enqueue(answer('9.9 is larger than 9.11.', { inputTokens: 400, outputTokens: 30 }))
    const response = await h.fusion(body(['a', 'b', 'c'], { temperature: 0.3, top_p: 0.9, max_tokens: 300 }))
    expect(response.status).toBe(200)
    const result = await json(response)
    expect(result).toEqual({
      object: 'fusion.completion',
      created: Math.floor(h.t.clock.now() / 1000),
      status: 'complete',
      judge: 'judge',
      models: [
        { id: 'a', model: 'a', output: '9.9 is larger.', finish_reason: 'stop', latency_ms: 0, prompt_tokens: 101, tokens: 11 },
        { id: 'b', model: 'b', output: '9.9, because 0.90 > 0.11.', finish_reason: 'length', latency_ms: 0, prompt_tokens: 102, tokens: 12 },
        { id: 'c', model: 'c', output: 'The larger one is 9.9.', finish_reason: 'stop', latency_ms: 0, prompt_tokens: 103, tokens: 13 },
      ],
      synthesis: '9.9 is larger than 9.11.',
      synthesis_prompt_tokens: 400,
      synthesis_tokens: 30,
      synthesis_finish_reason: 'stop',
    })
    expect(JSON.stringify(result)).not.toMatch(/cost|nanos|price/)

    // Participants got the caller's sampling; the judge its own defaults and the caller's cap.
    for (const upstream of [h.a, h.b, h.c]) {
      const sent = upstream.onlyRequest().body
      expect(sent).toMatchObject({ temperature: 0.3, top_p: 0.9, messages: [{ role: 'user', content: USER_MESSAGES[0]!.content }] })
      expect(sent.max_tokens ?? sent.max_completion_tokens).toBe(300)
    }
    const judged = h.judge.onlyRequest().body
    expect(judged.temperature).toBeUndefined()
    expect(judged.messages[0]).toEqual({ role: 'system', content: SYNTHESIS_INSTRUCTIONS })
    expect(judged.messages[1]).toEqual({ role: 'user', content: USER_MESSAGES[0]!.content })
    const candidates = judged.messages[2].content as string
    for (const text of ['9.9 is larger.', '9.9, because 0.90 > 0.11.', 'The larger one is 9.9.']) expect(candidates).toContain(text)
    expect(candidates).toMatch(/<candidate_answer_[0-9a-f]{12} id="2" note="cut short at the output limit">/)
    // Model names never reach the judge.
    expect(JSON.stringify(judged.messages)).not.toMatch(/upstream-a|"a"|upstream-b/)

    // One settlement per part, each at its own model's price.
    const entries = await fusionEntries(h.t)
    const expected = [
      chargeOf(PARTICIPANT_PRICE, { inputTokens: 101, outputTokens: 11 }),
      chargeOf(PARTICIPANT_PRICE, { inputTokens: 102, outputTokens: 12 }),
      chargeOf(PARTICIPANT_PRICE, { inputTokens: 103, outputTokens: 13 }),
      chargeOf(JUDGE_PRICE, { inputTokens: 400, outputTokens: 30 }),
    ]
    expect(entries.map(entry => entry.amount).sort()).toEqual([...expected].sort())
    expect(entries.every(entry => entry.key === null)).toBe(true)
    expect(await spent()).toBe(expected.reduce((sum, value) => sum + value, 0n))
    expect(h.t.deps.limits.concurrency.inUse(h.org.orgId)).toBe(0)
  })
})

/** The ways a participant can fail, each scripted on its upstream (or its binding). */
const FAILURES: Array<{ name: string; model: string; script?: FakeResponse; expire?: boolean; message: RegExp }> = [
  { name: 'connection refused', model: 'refused', message: /connection/ },
  { name: '5xx', model: 'b', script: { kind: 'json', status: 503, body: openAIWire.errorBody(503, 'overloaded') }, message: /server|503/ },
  { name: 'its deadline', model: 'b', script: { kind: 'stall' }, expire: true, message: /did not finish within 30000 ms/ },
  { name: 'a mid-stream reset', model: 'b', script: { kind: 'sse', body: openAIWire.partial('half an answer'), then: 'reset' }, message: /provider/ },
  { name: 'a stream cut before it finished', model: 'b', script: { kind: 'sse', body: openAIWire.partial('half an answer'), then: 'close' }, message: /provider/ },
  {
    name: 'an in-band error event',
    model: 'b',
    script: { kind: 'sse', body: openAIWire.partial('half') + `data: ${JSON.stringify({ error: { message: 'boom', type: 'server_error' } })}\n\n` },
    message: /provider/,
  },
]

describe('partial and failed', () => {
  for (const failure of FAILURES) {
    test(`one participant fails by ${failure.name}: complete with its error; it is not charged`, async () => {
      h.a.enqueue(answer('A says 9.9.'))
      h.c.enqueue(answer('C says 9.9.'))
      if (failure.script) h.b.enqueue(failure.script)
      h.judge.enqueue(answer('Synthesis: 9.9.'))
      const pending = h.fusion(body(['a', failure.model, 'c']))
      if (failure.expire) {
        await h.b.request(0)
        h.deadlines.started[1]!.expire()
      }
      const result = await json(await pending)
      expect(result.status).toBe('complete')
      const failed = result.models[1]
      expect(failed).toMatchObject({ id: failure.model, output: '', finish_reason: 'error', prompt_tokens: 0, tokens: 0, error_code: 'provider_error' })
      expect(failed.error).toMatch(failure.message)
      expect(result.models[0].error).toBeUndefined()
      expect(result.synthesis).toBe('Synthesis: 9.9.')
      // The judge saw the two answers only.
      const candidates = h.judge.onlyRequest().body.messages.at(-1).content as string
      expect(candidates).toContain('2 models answered')
      expect(candidates).not.toContain('half')
      expect((await fusionEntries(h.t)).length).toBe(3)
      if (failure.expire) expect(await h.b.requests[0]!.disconnected).toBeUndefined()
    })
  }

  test('two participants fail: partial, and the judge still checks the one answer', async () => {
    h.a.enqueue(answer('Only A answered.'))
    h.b.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
    h.judge.enqueue(answer('Checked: 9.9.'))
    const result = await json(await h.fusion(body(['a', 'b', 'refused'])))
    expect(result.status).toBe('partial')
    expect(result.models.map((entry: any) => entry.error_code ?? 'ok')).toEqual(['ok', 'provider_error', 'provider_error'])
    expect(result.synthesis).toBe('Checked: 9.9.')
    expect(h.judge.onlyRequest().body.messages.at(-1).content).toContain('Only one model answered')
  })

  for (const [name, script] of [
    ['5xx', { kind: 'json', status: 502, body: openAIWire.errorBody(502, 'bad gateway') }],
    ['a mid-stream reset', { kind: 'sse', body: openAIWire.partial('half a synthesis'), then: 'reset' }],
  ] as Array<[string, FakeResponse]>) {
    test(`the judge fails by ${name}: partial, answers kept, synthesis empty with its error, the judge not charged`, async () => {
      h.a.enqueue(answer('A.'))
      h.b.enqueue(answer('B.'))
      h.judge.enqueue(script)
      const result = await json(await h.fusion(body(['a', 'b'])))
      expect(result.status).toBe('partial')
      expect(result.models.map((entry: any) => entry.output)).toEqual(['A.', 'B.'])
      expect(result).toMatchObject({ synthesis: '', synthesis_prompt_tokens: 0, synthesis_tokens: 0, synthesis_error_code: 'provider_error', judge: 'judge' })
      expect(result.synthesis_error).toBeTruthy()
      expect((await fusionEntries(h.t)).length).toBe(2)
    })
  }

  test('the judge misses its deadline: partial', async () => {
    h.a.enqueue(answer('A.'))
    h.b.enqueue(answer('B.'))
    h.judge.enqueue({ kind: 'stall' })
    const pending = h.fusion(body(['a', 'b']))
    await h.judge.request(0)
    const judgeDeadline = h.deadlines.started[2]!
    expect(judgeDeadline.ms).toBe(45_000)
    judgeDeadline.expire()
    const result = await json(await pending)
    expect(result).toMatchObject({ status: 'partial', synthesis: '', synthesis_error_code: 'provider_error' })
    expect(result.synthesis_error).toContain('did not finish within 45000 ms')
  })

  test('every participant fails at the provider: 200 failed, the judge never called, nothing charged', async () => {
    h.a.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
    h.b.enqueue({ kind: 'sse', body: openAIWire.partial('cut'), then: 'reset' })
    const response = await h.fusion(body(['a', 'b', 'refused']))
    expect(response.status).toBe(200)
    const result = await json(response)
    expect(result).toMatchObject({ status: 'failed', synthesis: '', synthesis_prompt_tokens: 0, synthesis_tokens: 0, judge: 'judge' })
    expect(result.models.every((entry: any) => entry.error_code === 'provider_error' && entry.error)).toBe(true)
    expect(result.synthesis_error).toBeUndefined()
    expect(h.judge.requests.length).toBe(0)
    expect(await spent()).toBe(0n)
    expect(h.t.deps.limits.concurrency.inUse(h.org.orgId)).toBe(0)
  })

  test('a participant whose model cannot take the request (an image on a text-only model) fails alone, before any call', async () => {
    const image = { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] }
    h.a.enqueue(answer('A cat.'))
    // A judge level the catalog does not offer is refused before anything runs.
    expect((await h.fusion({ models: ['a', 'b'], messages: [image], judge: 'a:confidential' })).status).toBe(400)
    expect(h.a.requests.length + h.b.requests.length).toBe(0)
    const result = await json(await h.fusion({ models: ['a', 'b'], messages: [image], judge: 'a' }))
    expect(result.status).toBe('partial')
    expect(result.models[1]).toMatchObject({ error_code: 'invalid_request' })
    expect(result.models[1].error).toContain('does not accept images')
    expect(h.b.requests.length).toBe(0)
  })
})

describe('concurrency', () => {
  test('participants run in parallel: each upstream holds its answer until all three requests have arrived', async () => {
    // If the participants ran one after another, the first would wait for the others forever and
    // this test would time out: no wall-clock measurement needed.
    const arrived = Promise.all([h.a.request(0), h.b.request(0), h.c.request(0)])
    const held = (text: string): FakeResponse => ({ kind: 'sse', body: [arrived, openAIWire.stream({ text, finish: 'stop', usage: { inputTokens: 5, outputTokens: 5 } })] })
    h.a.enqueue(held('A.'))
    h.b.enqueue(held('B.'))
    h.c.enqueue(held('C.'))
    h.judge.enqueue(answer('ABC.'))
    const result = await json(await h.fusion(body(['a', 'b', 'c'])))
    expect(result.status).toBe('complete')
    // The judge was called only after every participant had answered.
    expect(h.judge.requests.length).toBe(1)
    expect(h.judge.onlyRequest().body.messages.at(-1).content).toContain('3 models answered')
  }, 10_000)
})
