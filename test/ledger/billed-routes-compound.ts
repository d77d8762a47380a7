import { expect } from 'bun:test'
import { utcMonth } from '../../src/lib/clock'
import { chunk, DONE, frame, openAIUsage } from '../providers/openai-wire'
import type { FakeResponse } from '../support/fake-upstream'
import {
  estimateOf, highInput, judgeCharge, type MoneyModel, outputFallback, PARSE_PRICE, type prng, tokenCharge, WEB_FETCH_PRICE,
  type Gateway, type ModelKey, type ModelOrg,
} from './billed-routes-model'
import { scalar } from './fixtures'

// The compound operations of billed-routes.test.ts: Fusion, chat with request-local work, and
// bursts of concurrent calls. Each runs against the shared gateway and updates the money model.

export const WORDS = ['alpha ', 'bravo ', 'charlie ', 'delta ', 'echo ', 'foxtrot ', 'golf ', 'hotel ', 'india ', 'juliett ']
export type Dialect = 'chat' | 'responses' | 'messages'

/** What an operation works with: the gateway, the model, the seed's random source and the request helpers. */
export interface Run {
  t: Gateway['t']
  gateway: Gateway
  model: MoneyModel
  random: ReturnType<typeof prng>
  post(path: string, key: string, body: unknown, signal?: AbortSignal, headers?: Record<string, string>): Promise<Response>
  /** Waits until the org's billed calls have ended and the writer committed. */
  settled(orgId: string): Promise<void>
}

export function requestFor(dialect: Dialect, prompt: string, maxTokens: number, stream: boolean): { path: string; body: unknown } {
  if (dialect === 'chat') return { path: '/v1/chat/completions', body: { model: 'm', messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens, stream } }
  if (dialect === 'responses') return { path: '/v1/responses', body: { model: 'm', input: [{ role: 'user', content: prompt }], max_output_tokens: maxTokens, stream } }
  return { path: '/v1/messages', body: { model: 'm', messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens, stream } }
}

// Spec §4.5: each participant and the synthesis billed separately; a failed participant charges
// nothing; no synthesis (and no judge charge) when every participant failed; 403 without Fusion
// access. Participants share one upstream, so they all get the same usage (arrival order is free).
export async function fusionOp(run: Run, org: ModelOrg, key: ModelKey, where: string): Promise<void> {
  const { t, gateway, model, random, post, settled } = run
  const upstream = gateway.upstream
  const n = random.int(2, 3)
  const failed = random.weighted<number>([[6, 0], [2, 1], [1, n]])
  const maxTokens = random.int(16, 32)
  const usage = { inputTokens: random.int(1, 50), outputTokens: random.int(1, maxTokens) }
  const judged = { inputTokens: random.int(100, 600), outputTokens: random.int(1, maxTokens) }
  const answer = { id: 'x', object: 'chat.completion', created: 1, model: 'upstream', choices: [{ index: 0, message: { role: 'assistant', content: `answer of ${where}` }, finish_reason: 'stop' }] }
  const stream = random.next() < 0.4
  const body = { models: ['m', 'm2', 'm3'].slice(0, n), messages: [{ role: 'user', content: `question of ${where}` }], max_tokens: maxTokens, stream }
  const now = t.clock.now()
  const before = upstream.requests.length + gateway.judge.requests.length
  const settledBefore = model.charged(org)
  if (key.status !== 'active' || org.plan !== 'pro') {
    const response = await post('/api/v1/chat/fusion', key.secret, body)
    await response.text()
    expect({ where, status: response.status }).toEqual({ where, status: key.status !== 'active' ? 401 : 403 })
    expect(upstream.requests.length + gateway.judge.requests.length).toBe(before)
    return
  }
  // Only with room for every part (the judge's estimate depends on the answers): partial admission is covered by chat.
  if (!model.admits(org, key, 1_000_000n, now)) return
  // With an Idempotency-Key a repeat of the same request bills no part twice (README "Fusion").
  const headers: Record<string, string> = random.next() < 0.6 ? { 'idempotency-key': crypto.randomUUID() } : {}
  const runOnce = async (failing: number) => {
    ;(upstream as unknown as { script: FakeResponse[] }).script.splice(0)
    for (let index = 0; index < n; index++) {
      upstream.enqueue(index < failing ? { kind: 'json', status: 500, body: { error: { message: 'boom', type: 'server_error', param: null, code: null } } } : { kind: 'json', body: { ...answer, usage: openAIUsage(usage) } })
    }
    ;(gateway.judge as unknown as { script: FakeResponse[] }).script.splice(0)
    gateway.judge.enqueue({ kind: 'json', body: { ...answer, usage: openAIUsage(judged) } })
    const response = await post('/api/v1/chat/fusion', key.secret, body, undefined, headers)
    // Streamed: progress events, then `fusion.completion` with the same result object.
    const text = await response.text()
    const result: any = stream ? JSON.parse(text.split('event: fusion.completion\ndata: ')[1]!.split('\n')[0]!) : JSON.parse(text)
    await settled(org.id)
    const answered = n - failing
    expect({ where, stream, status: response.status, result: result.status }).toEqual({ where, stream, status: 200, result: answered === 0 ? 'failed' : answered >= 2 ? 'complete' : 'partial' })
    return answered
  }
  const answered = await runOnce(failed)
  for (let index = 0; index < answered; index++) model.charge(org, key, tokenCharge(usage.inputTokens, usage.outputTokens), now)
  if (answered > 0) model.charge(org, key, judgeCharge(judged.inputTokens, judged.outputTokens), now)
  const settledNow = () => scalar(t.deps.database.client, "SELECT COALESCE(SUM(amount_nanos), 0) FROM ledger_entries WHERE org_id = ? AND kind = 'settle'", [org.id])
  expect({ where, n, failed, settled: (await settledNow()) - settledBefore }).toEqual({ where, n, failed, settled: model.charged(org) - settledBefore })
  // Every part was billed under its key: the repeat (when it is admitted) charges nothing more.
  if (headers['idempotency-key'] && failed === 0 && model.admits(org, key, 1_000_000n, t.clock.now())) {
    await runOnce(0)
    expect({ where, replay: true, settled: (await settledNow()) - settledBefore }).toEqual({ where, replay: true, settled: model.charged(org) - settledBefore })
  }
}

// A chat with request-local work (README "Documents", spec §4.7): a text file part is one parse
// unit and a fetched page one web_fetch unit, each settled on its own, then the chat's tokens.
// The estimate counts the added text, so this runs only with room for all of it.
export async function enrichedOp(run: Run, org: ModelOrg, key: ModelKey, where: string): Promise<void> {
  const { t, gateway, model, random, post, settled } = run
  const upstream = gateway.upstream
  if (key.status !== 'active' || !model.admits(org, key, 1_000_000n, t.clock.now())) return
  const kind = random.pick(['file', 'page', 'broken-page'] as const)
  const stream = random.next() < 0.5
  const maxTokens = random.int(16, 64)
  const reported = { inputTokens: random.int(20, 400), outputTokens: random.int(1, maxTokens) }
  const url = `http://pages.example-fuzz.com:${gateway.pagesPort}/${where.replaceAll(' ', '-')}/${kind === 'broken-page' ? 'broken' : 'ok'}`
  const content = kind === 'file'
    ? [{ type: 'text', text: 'Summarize the notes.' }, { type: 'file', file: { file_data: `data:text/plain;base64,${Buffer.from(`notes of ${where}\n`).toString('base64')}`, filename: 'notes.txt' } }]
    : `Read ${url} and summarize it.`
  const scripted: FakeResponse = stream
    ? { kind: 'sse', body: chunk({ role: 'assistant', content: '' }) + chunk({ content: 'done ' }) + chunk({}, 'stop') + frame({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'upstream-mw', choices: [], usage: openAIUsage(reported) }) + DONE }
    : { kind: 'json', body: { id: 'x', object: 'chat.completion', created: 1, model: 'upstream-mw', choices: [{ index: 0, message: { role: 'assistant', content: 'done' }, finish_reason: 'stop' }], usage: openAIUsage(reported) } }
  ;(upstream as unknown as { script: FakeResponse[] }).script.splice(0)
  upstream.enqueue(scripted)
  const now = t.clock.now()
  const settledBefore = model.charged(org)
  const response = await post('/v1/chat/completions', key.secret, { model: 'mw', messages: [{ role: 'user', content }], max_tokens: maxTokens, stream, ...(kind === 'file' ? {} : { web_fetch: true }) })
  await response.text()
  await settled(org.id)
  expect({ where, kind, status: response.status }).toEqual({ where, kind, status: 200 })
  if (kind === 'file') model.charge(org, key, PARSE_PRICE, now)
  if (kind === 'page') model.charge(org, key, WEB_FETCH_PRICE, now)
  model.charge(org, key, tokenCharge(reported.inputTokens, reported.outputTokens), now)
  const settledTotal = await scalar(t.deps.database.client, "SELECT COALESCE(SUM(amount_nanos), 0) FROM ledger_entries WHERE org_id = ? AND kind = 'settle'", [org.id])
  expect({ where, kind, stream, settled: settledTotal - settledBefore }).toEqual({ where, kind, stream, settled: model.charged(org) - settledBefore })
}

// Several identical calls in flight at once on one key (L3/L4): with room for all their holds
// every one is admitted and charged exactly once, and the slots all come back.
export async function burstOp(run: Run, org: ModelOrg, key: ModelKey, where: string): Promise<void> {
  const { t, model, random, post, settled } = run
  const upstream = run.gateway.upstream
  const count = random.int(2, 4)
  const dialect = random.pick<Dialect>(['chat', 'responses', 'messages'])
  const stream = random.next() < 0.5
  const prompt = `burst ${where} ` + random.pick(WORDS).repeat(random.int(1, 20))
  const maxTokens = random.int(16, 64)
  const estimate = estimateOf(prompt, maxTokens)
  if (key.status !== 'active' || !model.admits(org, key, BigInt(count) * estimate, t.clock.now())) return
  const text = 'one two three '
  const reported = { inputTokens: random.int(1, highInput(prompt) * 2), outputTokens: random.int(1, maxTokens) }
  const partial = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'one ' }) + chunk({ content: 'two ' }) + chunk({ content: 'three ' })
  const json = { id: 'x', object: 'chat.completion', created: 1, model: 'upstream-m', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }] }
  // Each call of the burst meets its own upstream behaviour; the calls are identical, so which
  // call met which does not change the total.
  const behaviours = Array.from({ length: count }, () => random.pick(['usage', 'no-usage', 'fail-before', 'fail-mid'] as const))
  const behaviour = behaviours.join(',')
  const scriptOf = (kind: (typeof behaviours)[number]): FakeResponse =>
    kind === 'usage' ? (stream ? { kind: 'sse', body: partial + chunk({}, 'stop') + frame({ ...json, object: 'chat.completion.chunk', choices: [], usage: openAIUsage(reported) }) + DONE } : { kind: 'json', body: { ...json, usage: openAIUsage(reported) } })
    : kind === 'no-usage' ? (stream ? { kind: 'sse', body: partial + chunk({}, 'stop') + DONE } : { kind: 'json', body: json })
    : kind === 'fail-before' ? { kind: 'json', status: 500, body: { error: { message: 'boom', type: 'server_error', param: null, code: null } } }
    : stream ? { kind: 'sse', body: partial, then: 'close' } : { kind: 'sse', body: JSON.stringify(json).slice(0, 60), then: 'reset', headers: { 'content-type': 'application/json' } }
  const chargeOf = (kind: (typeof behaviours)[number]): bigint =>
    kind === 'usage' ? tokenCharge(reported.inputTokens, reported.outputTokens)
    : kind === 'no-usage' || (stream && kind === 'fail-mid') ? tokenCharge(highInput(prompt), outputFallback(text))
    : 0n
  ;(upstream as unknown as { script: FakeResponse[] }).script.splice(0)
  for (const kind of behaviours) upstream.enqueue(scriptOf(kind))
  const now = t.clock.now()
  const settledBefore = model.charged(org)
  const request = requestFor(dialect, prompt, maxTokens, stream)
  const statuses = await Promise.all(Array.from({ length: count }, async () => {
    const response = await post(request.path, key.secret, request.body)
    await response.text().catch(() => '')
    return response.status
  }))
  await settled(org.id)
  expect({ where, refused: statuses.filter(status => status === 429).length }).toEqual({ where, refused: 0 })
  const month = utcMonth(now).startMs
  const modelAllowanceBefore = org.periods.get(month)?.used ?? 0n
  const modelPrepaidBefore = org.prepaid
  for (const kind of behaviours) model.charge(org, key, chargeOf(kind), now)
  // The split between allowance and prepaid depends on the order the calls settle in: each
  // settlement takes allowance that no call still in flight holds (§7.2), so a call settled
  // while another still held the last of the allowance pays the rest from prepaid, even if
  // that other call then gives part of its hold back. The total is exact; allowance is never
  // used beyond what settling one at a time would use; the model then takes the ledger's split.
  const used = await scalar(t.deps.database.client, 'SELECT used_nanos FROM allowances WHERE org_id = ? AND period_start_ms = ?', [org.id, month])
  const prepaid = await scalar(t.deps.database.client, 'SELECT prepaid_nanos FROM balances WHERE org_id = ?', [org.id])
  const period = org.periods.get(month)
  if (period) {
    expect({ where, total: used - modelAllowanceBefore + (modelPrepaidBefore - prepaid), withinAllowance: used <= period.used })
      .toEqual({ where, total: period.used - modelAllowanceBefore + (modelPrepaidBefore - org.prepaid), withinAllowance: true })
    period.used = used
    org.prepaid = prepaid
  }
  const settledTotal = await scalar(t.deps.database.client, "SELECT COALESCE(SUM(amount_nanos), 0) FROM ledger_entries WHERE org_id = ? AND kind = 'settle'", [org.id])
  expect({ where, dialect, stream, behaviour, count, settled: settledTotal - settledBefore }).toEqual({ where, dialect, stream, behaviour, count, settled: model.charged(org) - settledBefore })
}
