import { afterEach, describe, expect, test } from 'bun:test'
import { switchPlan } from '../../src/billing/plan-switch'
import { createLogger } from '../../src/observability/logger'
import { openAIWire } from '../providers/openai-wire'
import { createCappedKey, verifyClean } from '../ledger/fixtures'
import { parseCharges } from '../support/documents'
import { json } from '../support/harness'
import { answer, buildFusionHarness, chargeOf, fusionEntries, JUDGE_PRICE, PARTICIPANT_PRICE, USER_MESSAGES, type FusionHarness } from './support'

// Access and billing (issue 9 point 3): Fusion needs a plan with Fusion access; each participant
// and the synthesis are reserved, settled and capped on their own; an Idempotency-Key makes each
// part's billing key stable, so a repeated request never bills a part twice.

let h: FusionHarness
afterEach(async () => {
  await h.close()
})

const body = (models: string[], extra: Record<string, unknown> = {}) => ({ models, messages: USER_MESSAGES, ...extra })
const USAGE = { inputTokens: 100, outputTokens: 20 }
const JUDGE_USAGE = { inputTokens: 500, outputTokens: 40 }
const PART = chargeOf(PARTICIPANT_PRICE, USAGE)
const textFile = (text: string) => `data:text/plain;base64,${Buffer.from(text).toString('base64')}`
const judgeModel = (id: string, contextLength: number, maxOutput: number) =>
  `  - { id: ${id}, backends: [{ provider: pj, model: upstream-${id} }], price: { input_per_mtok: "3", output_per_mtok: "4" }, context_length: ${contextLength}, max_output_tokens: ${maxOutput}, level: private }`
const BIG_JUDGE = judgeModel('big', 200_000, 2048)
const SMALL_JUDGE = judgeModel('small', 16384, 100)
const JUDGED = chargeOf(JUDGE_PRICE, JUDGE_USAGE)
const KEY = '0f8fad5b-d9cb-469f-a165-70867728950e'

describe('access', () => {
  test('a plan without Fusion access is 403 naming the plan requirement, even with a prepaid balance; a plan switch applies at once', async () => {
    h = await buildFusionHarness({ plans: 'plans: { basic: { monthly_allowance: "0", fusion: false }, pro: { monthly_allowance: "0", fusion: true } }' })
    expect(h.t.deps.config.defaultPlanId).toBe('pro')
    await switchPlan(h.t.deps.writer, h.t.deps.plans, h.t.clock, h.org.orgId, 'basic')
    const refused = await h.fusion(body(['a', 'b']))
    expect(refused.status).toBe(403)
    const error = (await json(refused)).error
    expect(error.code).toBe('forbidden')
    expect(error.message).toContain('plan with Fusion access')
    expect(error.message).toContain('"basic"')
    expect(error.message).toContain('prepaid balance alone')
    expect(h.a.requests.length).toBe(0)

    await switchPlan(h.t.deps.writer, h.t.deps.plans, h.t.clock, h.org.orgId, 'pro')
    h.a.enqueue(answer('A.', USAGE))
    h.b.enqueue(answer('B.', USAGE))
    h.judge.enqueue(answer('AB.', JUDGE_USAGE))
    expect((await json(await h.fusion(body(['a', 'b'])))).status).toBe('complete')
  })

  test('no funds at all: every participant is refused before any provider call, so the answer is the 429 itself', async () => {
    h = await buildFusionHarness({ credit: 0n })
    const response = await h.fusion(body(['a', 'b', 'c']))
    expect(response.status).toBe(429)
    expect((await json(response)).error.code).toBe('insufficient_quota')
    expect(h.a.requests.length + h.b.requests.length + h.c.requests.length + h.judge.requests.length).toBe(0)
    expect(h.t.deps.limits.concurrency.inUse(h.org.orgId)).toBe(0)

    // Streamed, the same: the reply starts only once a participant is admitted, so a run refused
    // as a whole keeps its status (QA: it was a 200 stream ending in an `error` event, neither
    // logged nor counted as the refusal it was).
    const streamed = await h.fusion(body(['a', 'b'], { stream: true }))
    expect(streamed.status).toBe(429)
    expect((await json(streamed)).error).toMatchObject({ code: 'insufficient_quota', request_id: streamed.headers.get('x-request-id') })
    expect(h.a.requests.length + h.b.requests.length + h.judge.requests.length).toBe(0)
    expect(h.t.deps.metrics.registry.render()).toContain('svc_refusals_total{code="insufficient_quota"} 2')
    expect(h.t.deps.limits.concurrency.inUse(h.org.orgId)).toBe(0)
  })
})

describe('per-part reservations and caps', () => {
  test("the key's spend cap is reached half way: two participants run, the third and the judge are refused, the key spends exactly the two", async () => {
    h = await buildFusionHarness()
    // Each participant reserves ~2.01 mUSD (1000 output tokens at 2 USD/Mtok plus input) and the
    // judge ~5 mUSD: a 5 mUSD cap holds two participants, not three, and not the judge after them.
    const capped = await createCappedKey(h.t, h.org, 'overall', 5_000_000n)
    for (const upstream of [h.a, h.b, h.c]) upstream.enqueue(answer('9.9.', USAGE))
    h.judge.enqueue(answer('never', JUDGE_USAGE))
    const response = await h.fusion(body(['a', 'b', 'c'], { max_tokens: 1000 }), { key: capped.secret })
    expect(response.status).toBe(200)
    const result = await json(response)
    expect(result.status).toBe('partial')
    const codes = result.models.map((entry: any) => entry.error_code ?? 'ok')
    expect(codes.filter((code: string) => code === 'ok').length).toBe(2)
    expect(codes.filter((code: string) => code === 'insufficient_quota').length).toBe(1)
    const refusedIndex = codes.indexOf('insufficient_quota')
    expect(result.models[refusedIndex].error).toContain('spend cap')
    // Its siblings hold the rest of the cap: a retry of the same run would be refused again, so
    // the error says what would fit instead of the ledger's "retry shortly".
    expect(result.models[refusedIndex].error).toContain('while the other participants of this run hold theirs')
    expect(result.models[refusedIndex].error).toContain('fewer output tokens (max_tokens) or fewer models')
    expect(result.models[refusedIndex].error).not.toContain('retry')
    expect([h.a, h.b, h.c][refusedIndex]!.requests.length).toBe(0)
    expect(result).toMatchObject({ synthesis: '', synthesis_error_code: 'insufficient_quota', synthesis_tokens: 0 })
    expect(h.judge.requests.length).toBe(0)

    const spend = await h.t.deps.database.client.execute({ sql: 'SELECT spent_nanos FROM key_spend WHERE key_id = ?', args: [capped.keyId] })
    expect(BigInt(spend.rows[0]!.spent_nanos as bigint)).toBe(2n * PART)
    expect((await fusionEntries(h.t)).map(entry => entry.amount)).toEqual([PART, PART])
    expect(h.t.deps.limits.concurrency.inUse(h.org.orgId)).toBe(0)
    await verifyClean(h.t)
  })
})

describe('Idempotency-Key', () => {
  const OTHER_KEY = '7c9e6679-7425-40de-944b-e07fc1f90ae7'
  const script = () => {
    for (const upstream of [h.a, h.b]) upstream.enqueue(answer('9.9.', USAGE))
    h.judge.enqueue(answer('9.9 it is.', JUDGE_USAGE))
  }
  const charged = async () => 10_000_000_000n - (await h.t.deps.balance(h.org.orgId)).prepaidNanos

  test('a repeated request runs inference again but bills no part twice; a new key bills anew', async () => {
    const lines: Array<Record<string, unknown>> = []
    h = await buildFusionHarness({ logger: createLogger('info', line => lines.push(JSON.parse(line))) })
    const partCharges = () => lines.filter(line => line.msg === 'chat' && line.purpose === 'fusion').map(line => line.charged_nanos)
    const send = (extra: Record<string, unknown> = {}, key = KEY) => h.fusion(body(['a', 'b'], extra), { headers: { 'idempotency-key': key } })
    script()
    expect((await json(await send())).status).toBe('complete')
    const once = 2n * PART + JUDGED
    expect(await charged()).toBe(once)
    const entries = await fusionEntries(h.t)
    expect(entries.length).toBe(3)
    // Each part has its own billing key derived from the Idempotency-Key.
    expect(new Set(entries.map(entry => entry.key)).size).toBe(3)
    for (const entry of entries) expect(entry.key).toStartWith(`bill:fusion:${KEY}:`)
    expect(entries.map(entry => entry.key!.split(':').slice(-2).join(':')).sort()).toEqual(['judge:judge', 'participant:a', 'participant:b'])

    // The same request again, streamed this time (stream is not part of the request's identity).
    script()
    const repeat = await send({ stream: true })
    expect(await repeat.text()).toContain('event: fusion.completion')
    expect(h.a.requests.length).toBe(2)
    expect(h.judge.requests.length).toBe(2)
    expect(await charged()).toBe(once)
    expect((await fusionEntries(h.t)).length).toBe(3)
    // The repeat's lines say what it booked: nothing (the sum of the lines is the ledger's).
    expect(partCharges().slice(3)).toEqual(['0', '0', '0'])
    expect(partCharges().slice(0, 3).map(nanos => BigInt(nanos as string)).reduce((sum, nanos) => sum + nanos, 0n)).toBe(once)

    // Another Idempotency-Key is new work (another request under the same key is a 400: idempotency-reuse.test.ts).
    script()
    await send({}, OTHER_KEY)
    expect(await charged()).toBe(2n * once)
    await verifyClean(h.t)
  })

  test('a part that failed the first time is billed when a repeat succeeds; the parts that were billed are not', async () => {
    h = await buildFusionHarness()
    const send = () => h.fusion(body(['a', 'b']), { headers: { 'Idempotency-Key': KEY.toUpperCase() } })
    for (const upstream of [h.a, h.b]) upstream.enqueue(answer('9.9.', USAGE))
    h.judge.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
    expect((await json(await send())).status).toBe('partial')
    expect(await charged()).toBe(2n * PART)
    script()
    expect((await json(await send())).status).toBe('complete')
    expect(await charged()).toBe(2n * PART + JUDGED)
  })

  test.each(['abc', '0f8fad5b-d9cb-469f-a165-70867728950', '0f8fad5bd9cb469fa16570867728950e', '{0f8fad5b-d9cb-469f-a165-70867728950e}', ''])(
    'Idempotency-Key %p is 400 naming the header, before anything runs',
    async value => {
      h = await buildFusionHarness()
      const response = await h.fusion(body(['a', 'b']), { headers: { 'idempotency-key': value } })
      expect(response.status).toBe(400)
      const error = (await json(response)).error
      expect(error).toMatchObject({ code: 'invalid_request', param: 'Idempotency-Key' })
      expect(error.message).toContain('UUID')
      expect(h.a.requests.length).toBe(0)
    },
  )
})

describe('attached documents', () => {
  test('one attached file is extracted and billed once for the whole run, and every part reads its text', async () => {
    // Before: every participant extracted and billed it, and the judge again (4 units for one file).
    h = await buildFusionHarness()
    for (const upstream of [h.a, h.b, h.c]) upstream.enqueue(answer('Noted.', USAGE))
    h.judge.enqueue(answer('All noted.', JUDGE_USAGE))
    const file = `data:text/plain;base64,${Buffer.from('Quarterly notes: Zürich office opens in May.').toString('base64')}`
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'file', file: { file_data: file, filename: 'notes.txt' } }] }]
    const response = await h.fusion({ models: ['a', 'b', 'c'], messages })
    expect(response.status).toBe(200)
    expect((await json(response)).status).toBe('complete')
    const parses = await parseCharges(h.t, h.org.orgId)
    expect(parses).toEqual([h.t.deps.config.documents.pricePerParseNanos])
    for (const upstream of [h.a, h.b, h.c, h.judge]) {
      const seen = JSON.stringify(upstream.onlyRequest().body.messages)
      expect(seen).toContain('Zürich office opens in May')
      expect(seen).toContain('[Document \\"notes.txt\\"')
    }
    await verifyClean(h.t)
  })

  test('a document whose text no participant can hold is a 400 naming the context, and its parse unit is released', async () => {
    // Before: the file was extracted and billed against the judge's (larger) context, then every
    // participant refused the enriched request: a 400 that still charged the parse unit.
    h = await buildFusionHarness({ extraModels: [BIG_JUDGE] })
    const text = 'Lorem ipsum dolor sit amet. '.repeat(3000) // ~21,000 tokens: more than a, b (16,384)
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'file', file: { file_data: textFile(text), filename: 'long.txt' } }] }]
    const response = await h.fusion({ models: ['a', 'b'], messages, judge: 'big' })
    expect(response.status).toBe(400)
    const error = (await json(response)).error
    expect(error).toMatchObject({ code: 'invalid_request', param: 'models' })
    expect(error.message).toContain("does not fit model a's context of 16384 tokens")
    expect(error.message).toContain("does not fit model b's context of 16384 tokens")
    expect(await parseCharges(h.t, h.org.orgId)).toEqual([])
    expect(await fusionEntries(h.t)).toEqual([])
    expect(h.a.requests.length + h.b.requests.length + h.judge.requests.length).toBe(0)
    await verifyClean(h.t)
  })

  test('a run refused as a whole after its document was read pays nothing for the document', async () => {
    // Before: the parse unit was settled before the participants were admitted, so a run every
    // participant was refused for funds answered 429 and still charged the document.
    const parsePrice = 1_000_000n // the default documents.price_per_parse, 0.001 USD
    h = await buildFusionHarness({ credit: parsePrice + 1n })
    expect(h.t.deps.config.documents.pricePerParseNanos).toBe(parsePrice)
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'file', file: { file_data: textFile('Quarterly notes.'), filename: 'notes.txt' } }] }]
    const response = await h.fusion({ models: ['a', 'b'], messages })
    expect(response.status).toBe(429)
    expect((await json(response)).error.code).toBe('insufficient_quota')
    expect(h.a.requests.length + h.b.requests.length + h.judge.requests.length).toBe(0)
    expect(await parseCharges(h.t, h.org.orgId)).toEqual([])
    await verifyClean(h.t)
  })

  test('every participant fails at the provider: the run is failed and pays nothing for its document; a repeat that answers pays once', async () => {
    // Before: a participant that reached its provider settled the parse unit, so a `failed` run
    // (no answer, no judge) charged its file, where a chat failing before any output charges nothing.
    h = await buildFusionHarness()
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'file', file: { file_data: textFile('Quarterly notes.'), filename: 'notes.txt' } }] }]
    const send = () => h.fusion({ models: ['a', 'b', 'c'], messages }, { headers: { 'idempotency-key': KEY } })
    h.a.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
    h.b.enqueue({ kind: 'text', status: 200, body: '{"id": "cut', headers: { 'content-type': 'application/json' } })
    // Output that reached the gateway but not the caller: the part is not charged, nor its document.
    h.c.enqueue({ kind: 'sse', body: openAIWire.partial('half an answer'), then: 'reset' })
    const response = await send()
    expect(response.status).toBe(200)
    const result = await json(response)
    expect(result.status).toBe('failed')
    expect(result.models.map((entry: any) => entry.error_code)).toEqual(['provider_error', 'provider_error', 'provider_error'])
    expect(h.judge.requests.length).toBe(0)
    expect(await parseCharges(h.t, h.org.orgId)).toEqual([])
    expect(await fusionEntries(h.t)).toEqual([])
    await verifyClean(h.t)

    // The same request under the same Idempotency-Key answers now: its document is billed, once.
    for (let run = 0; run < 2; run++) {
      for (const upstream of [h.a, h.b, h.c]) upstream.enqueue(answer('Noted.', USAGE))
      h.judge.enqueue(answer('All noted.', JUDGE_USAGE))
      expect((await json(await send())).status).toBe('complete')
    }
    expect(await parseCharges(h.t, h.org.orgId)).toEqual([h.t.deps.config.documents.pricePerParseNanos])
    await verifyClean(h.t)
  })

  test.each(['stop', 'length'] as const)('one participant is charged for its answer (finish %p), the other fails: the document is charged once', async finish => {
    // `length`: an answer cut at max_tokens is charged for its output, and so is the document it read.
    h = await buildFusionHarness()
    h.a.enqueue(answer('Noted.', USAGE, finish))
    h.b.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
    h.judge.enqueue(answer('Only A.', JUDGE_USAGE))
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'file', file: { file_data: textFile('Quarterly notes.'), filename: 'notes.txt' } }] }]
    const result = await json(await h.fusion({ models: ['a', 'b'], messages }))
    expect(result.status).toBe('partial')
    expect(result.models[0]).toMatchObject({ output: 'Noted.', finish_reason: finish, tokens: USAGE.outputTokens })
    expect(result.models[0].error).toBeUndefined()
    expect(result.models[1].error_code).toBe('provider_error')
    expect(await parseCharges(h.t, h.org.orgId)).toEqual([h.t.deps.config.documents.pricePerParseNanos])
    expect((await fusionEntries(h.t)).map(entry => entry.amount)).toEqual([PART, JUDGED])
    await verifyClean(h.t)
  })

  test('with a file attached, max_tokens above the judge\'s own maximum is bounded for the judge, as without one', async () => {
    // Before: the file's check ran the judge at the caller's max_tokens, so the run was a 400.
    h = await buildFusionHarness({ extraModels: [SMALL_JUDGE] })
    h.a.enqueue(answer('Noted.', USAGE))
    h.b.enqueue(answer('Noted.', USAGE))
    h.judge.enqueue(answer('All noted.', JUDGE_USAGE))
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'file', file: { file_data: textFile('Quarterly notes.'), filename: 'notes.txt' } }] }]
    const response = await h.fusion({ models: ['a', 'b'], messages, judge: 'small', max_tokens: 500 })
    expect(response.status).toBe(200)
    expect((await json(response)).status).toBe('complete')
    expect(h.judge.onlyRequest().body.max_tokens).toBe(100)
    expect(await parseCharges(h.t, h.org.orgId)).toEqual([h.t.deps.config.documents.pricePerParseNanos])
  })

  test('under an Idempotency-Key a repeated request extracts again but pays for its document once', async () => {
    // Before: the parts were billed once, the attached file again on every repeat.
    h = await buildFusionHarness()
    const file = `data:text/plain;base64,${Buffer.from('Quarterly notes: Zürich office opens in May.').toString('base64')}`
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'file', file: { file_data: file, filename: 'notes.txt' } }] }]
    const send = (key: string) => h.fusion({ models: ['a', 'b'], messages }, { headers: { 'idempotency-key': key } })
    for (let run = 0; run < 3; run++) {
      for (const upstream of [h.a, h.b]) upstream.enqueue(answer('Noted.', USAGE))
      h.judge.enqueue(answer('All noted.', JUDGE_USAGE))
    }
    expect((await json(await send('0f8fad5b-d9cb-469f-a165-70867728950e'))).status).toBe('complete')
    expect((await json(await send('0f8fad5b-d9cb-469f-a165-70867728950e'))).status).toBe('complete')
    const price = h.t.deps.config.documents.pricePerParseNanos
    expect(await parseCharges(h.t, h.org.orgId)).toEqual([price])
    // Another key is another request: its document is billed.
    expect((await json(await send('7c9e6679-7425-40de-944b-e07fc1f90ae7'))).status).toBe('complete')
    expect(await parseCharges(h.t, h.org.orgId)).toEqual([price, price])
    await verifyClean(h.t)
  })
})
