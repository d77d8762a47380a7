import { afterEach, beforeEach, expect, test } from 'bun:test'
import { keepAlive, STALL_TICKS } from '../../src/http/keep-alive'
import { verifyClean } from '../ledger/fixtures'
import { anthropicWire } from '../providers/anthropic-wire'
import { poll } from '../support/poll'
import { answer, buildFusionHarness, chargeOf, fusionEntries, JUDGE_PRICE, PARTICIPANT_PRICE, USER_MESSAGES, type FusionHarness } from './support'

// With `stream: true` the judge's synthesis goes to the client delta by delta, as a streamed
// chat's answer does, so it is billed as one: once a delta went out, a judge that fails or whose
// client leaves is charged the input plus the output sent (never zero), and the result reports
// that usage. Before: the judge was released, so the synthesis the client had read was free.

let h: FusionHarness
beforeEach(async () => {
  h = await buildFusionHarness()
})
afterEach(async () => {
  await h.close()
})

const PART = chargeOf(PARTICIPANT_PRICE, { inputTokens: 100, outputTokens: 20 })
const SENT = 'The synthesis so far.'
// Anthropic announces the prompt size in message_start; the output sent is counted (4 bytes a token).
const SENT_USAGE = { inputTokens: 400, outputTokens: Math.ceil(Buffer.byteLength(SENT) / 4) }
/** The claude judge's stream up to (not including) its end: message_start, then the text deltas. */
const CUT = (() => {
  const whole = anthropicWire.stream({ text: SENT, finish: 'stop', usage: { inputTokens: 400, outputTokens: 50 } })
  return whole.slice(0, whole.indexOf('event: ping'))
})()

function request(): Request {
  return new Request('http://localhost/api/v1/chat/fusion', {
    method: 'POST',
    headers: { authorization: `Bearer ${h.org.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ models: ['a', 'b'], judge: 'claude', messages: USER_MESSAGES, stream: true }),
  })
}

/** Both participants answer; the judge streams its deltas, then resets or stalls. The run's response. */
function runUntilJudge(then: 'reset' | 'stall'): Promise<Response> {
  h.a.enqueue(answer('A.'))
  h.b.enqueue(answer('B.'))
  h.claude.enqueue({ kind: 'sse', body: CUT, then })
  return h.t.app.handle(request())
}

/** The participants charged their answers and the judge its input plus the output sent. */
const expectJudgeChargedForSent = (entries: Array<{ amount: bigint }>) =>
  expect(entries.map(entry => entry.amount).sort()).toEqual([PART, PART, chargeOf(JUDGE_PRICE, SENT_USAGE)].sort())

type Event = { event: string; data: any }
const parse = (text: string): Event[] =>
  text.split('\n\n').filter(block => block.startsWith('event: ')).map(block => {
    const [name, data] = block.split('\n')
    return { event: name!.slice('event: '.length), data: JSON.parse(data!.slice('data: '.length)) }
  })

test('the judge fails after its deltas were streamed: charged for the input and the output sent, and the result says so', async () => {
  const response = await runUntilJudge('reset')
  const events = parse(await response.text())
  expect(events.filter(event => event.event === 'synthesis.delta').map(event => event.data.delta).join('')).toBe(SENT)
  const result = events.at(-1)!
  expect(result.event).toBe('fusion.completion')
  expect(result.data).toMatchObject({
    status: 'partial', synthesis: '', synthesis_error_code: 'provider_error',
    synthesis_prompt_tokens: SENT_USAGE.inputTokens, synthesis_tokens: SENT_USAGE.outputTokens,
  })
  expectJudgeChargedForSent(await fusionEntries(h.t))
  expect(h.t.deps.limits.concurrency.inUse(h.org.orgId)).toBe(0)
  await verifyClean(h.t)
})

test('the client leaves in the middle of the synthesis: the judge is cut and charged for what was sent', async () => {
  const response = await runUntilJudge('stall')
  const reader = response.body!.getReader()
  let seen = ''
  const decoder = new TextDecoder()
  while (parse(seen).filter(event => event.event === 'synthesis.delta').map(event => event.data.delta).join('') !== SENT) {
    seen += decoder.decode((await reader.read()).value, { stream: true })
  }
  await reader.cancel()
  await h.claude.requests[0]!.disconnected
  const entries = await poll('the judge to settle', 200, 10, async () => {
    const found = await fusionEntries(h.t)
    return found.length === 3 && h.t.deps.limits.concurrency.inUse(h.org.orgId) === 0 ? found : undefined
  })
  expectJudgeChargedForSent(entries)
  expect(h.deadlines.started.every(deadline => deadline.cleared)).toBe(true)
  await verifyClean(h.t)
})

test('a client that stops reading the stream is cut after the stall ticks: the run aborted, the judge charged for the output sent', async () => {
  // The judge streams its deltas, then stays silent: only the stall cut can end this run.
  const response = await runUntilJudge('stall')
  const reader = response.body!.getReader()
  // The client reads up to the first synthesis delta, then nothing more.
  let read = ''
  while (!read.includes('event: synthesis.delta')) read += new TextDecoder().decode((await reader.read()).value)
  const judge = await h.claude.request(0)
  // Unread events (or, once the judge is silent, pings) wait in the stream's queue: the
  // ticker counts the stall and cuts it.
  await poll('the stalled stream to be cut', 200, 10, () => {
    keepAlive.tick()
    return judge.isDisconnected() ? true : undefined
  })
  await expect(reader.read()).rejects.toBeUndefined()
  await poll('the judge to settle', 200, 10, async () => ((await fusionEntries(h.t)).length === 3 ? true : undefined))
  expectJudgeChargedForSent(await fusionEntries(h.t))
  expect(h.t.deps.limits.concurrency.inUse(h.org.orgId)).toBe(0)
  await verifyClean(h.t)
})
