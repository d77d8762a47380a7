import { afterEach, describe, expect, test } from 'bun:test'
import { claimInFamilyOutside } from '../../src/billing/ledger-ops'
import { openAIWire } from '../providers/openai-wire'
import { verifyClean } from '../ledger/fixtures'
import { json } from '../support/harness'
import { answer, buildFusionHarness, fusionEntries, USER_MESSAGES, type FusionHarness } from './support'

// SECURITY-NOTES L5: same billing key and same body, one charge; same key and a different body,
// a 4xx. An Idempotency-Key the organization was already charged under for a different request
// is a 400 naming the header, before anything is reserved, extracted or called; another
// organization's use of the same UUID is its own.

let h: FusionHarness
afterEach(async () => {
  await h.close()
})

const KEY = '0f8fad5b-d9cb-469f-a165-70867728950e'
const body = (models: string[], extra: Record<string, unknown> = {}) => ({ models, messages: USER_MESSAGES, ...extra })
const script = () => {
  for (const upstream of [h.a, h.b]) upstream.enqueue(answer('9.9.'))
  h.judge.enqueue(answer('9.9 it is.'))
}
const charged = async (orgId = h.org.orgId) => 10_000_000_000n - (await h.t.deps.balance(orgId)).prepaidNanos
const called = () => h.a.requests.length + h.b.requests.length + h.c.requests.length + h.judge.requests.length
const held = () => h.t.deps.ledger.pools.get('prepaid', h.org.orgId, null, 0, h.t.clock.now()).held

describe('an Idempotency-Key reused for a different request', () => {
  test('is 400 invalid_request naming the header, before anything is reserved or called (streamed too); the same request still repeats', async () => {
    h = await buildFusionHarness()
    const send = (extra: Record<string, unknown> = {}, models = ['a', 'b']) => h.fusion(body(models, extra), { headers: { 'idempotency-key': KEY } })
    script()
    expect((await json(await send())).status).toBe('complete')
    const once = await charged()
    expect(called()).toBe(3)

    for (const different of [{ temperature: 0.5 }, { stream: true, max_tokens: 50 }, { messages: [{ role: 'user', content: 'Something else?' }] }]) {
      const refused = await send(different)
      expect(refused.status).toBe(400)
      expect((await json(refused)).error).toMatchObject({
        code: 'invalid_request', param: 'Idempotency-Key', message: 'this Idempotency-Key was used for a different request; send a new key',
      })
    }
    // Other models under the key, spelled in upper case: the same refusal.
    const otherModels = await h.fusion(body(['a', 'c']), { headers: { 'Idempotency-Key': KEY.toUpperCase() } })
    expect(otherModels.status).toBe(400)
    expect(called()).toBe(3)
    expect(held()).toBe(0n)
    expect(await charged()).toBe(once)

    // The same request (stream and user are not part of its identity) repeats as before, billed nothing more.
    script()
    expect((await json(await send({ user: 'someone' }))).status).toBe('complete')
    expect(called()).toBe(6)
    expect(await charged()).toBe(once)
    expect((await fusionEntries(h.t)).length).toBe(3)
    await verifyClean(h.t)
  })

  test('the same request spelled otherwise is the same request: members in another order, `tools: []` (QA: refused as a different one)', async () => {
    h = await buildFusionHarness()
    const send = (payload: Record<string, unknown>) => h.fusion(payload, { headers: { 'idempotency-key': KEY } })
    script()
    expect((await json(await send(body(['a', 'b'], { temperature: 0.5 })))).status).toBe('complete')
    const once = await charged()
    const reordered = USER_MESSAGES.map(message => Object.fromEntries(Object.entries(message).reverse()))
    for (const same of [{ temperature: 0.5, messages: reordered, models: ['a', 'b'] }, { ...body(['a', 'b'], { temperature: 0.5 }), tools: [] }]) {
      script()
      const response = await send(same)
      expect(response.status).toBe(200)
      expect((await json(response)).status).toBe('complete')
    }
    expect(await charged()).toBe(once)
    expect((await fusionEntries(h.t)).length).toBe(3)
  })

  test("another organization's use of the same UUID is its own: billed, not refused", async () => {
    h = await buildFusionHarness()
    script()
    expect((await json(await h.fusion(body(['a', 'b']), { headers: { 'idempotency-key': KEY } }))).status).toBe('complete')
    const other = await h.t.createOrg('other')
    script()
    const response = await h.fusion(body(['a', 'b'], { temperature: 0.5 }), { key: other.adminKey, headers: { 'idempotency-key': KEY } })
    expect((await json(response)).status).toBe('complete')
    expect(await charged(other.orgId)).toBe(await charged())
  })

  test('a key none of whose request was charged (every participant failed) can still be used for another request', async () => {
    h = await buildFusionHarness()
    for (const upstream of [h.a, h.b]) upstream.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
    expect((await json(await h.fusion(body(['a', 'b']), { headers: { 'idempotency-key': KEY } }))).status).toBe('failed')
    script()
    expect((await json(await h.fusion(body(['a', 'b'], { temperature: 0.5 }), { headers: { 'idempotency-key': KEY } }))).status).toBe('complete')
  })

  test("the look-up is a range scan of the claims' partial unique index", async () => {
    h = await buildFusionHarness()
    const { sql, args } = claimInFamilyOutside(h.org.orgId, `bill:fusion:${KEY}:`, `bill:fusion:${KEY}:0123:`)
    const plan = await h.t.deps.database.client.execute({ sql: `EXPLAIN QUERY PLAN ${sql}`, args: [...args] })
    const steps = plan.rows.map(row => String(row.detail))
    expect(steps).toEqual([expect.stringContaining('USING INDEX ledger_entries_idempotency_key_unique (idempotency_key>? AND idempotency_key<?)')])
  })
})

describe('the same request repeated under its Idempotency-Key', () => {
  test('a repeat reports the usage of its own run and is charged nothing; the OpenAPI descriptions say usage is not the charge', async () => {
    // QA: a client reconciling usage × price against the ledger double-counted repeats, as the
    // descriptions read "as charged" and "0 when … not billed".
    h = await buildFusionHarness()
    const send = () => h.fusion(body(['a', 'b']), { headers: { 'idempotency-key': KEY } })
    script()
    expect((await json(await send())).status).toBe('complete')
    const once = await charged()
    for (const upstream of [h.a, h.b]) upstream.enqueue(answer('9.9.', { inputTokens: 111, outputTokens: 7 }))
    h.judge.enqueue(answer('9.9 it is.', { inputTokens: 1000, outputTokens: 9 }))
    const repeat = await json(await send())
    expect(repeat.models.map((entry: any) => [entry.prompt_tokens, entry.tokens])).toEqual([[111, 7], [111, 7]])
    expect(repeat).toMatchObject({ synthesis_prompt_tokens: 1000, synthesis_tokens: 9 })
    expect(await charged()).toBe(once)
    expect((await fusionEntries(h.t)).length).toBe(3)

    const spec = await json(await h.t.request('GET', '/openapi.json'))
    const result = spec.paths['/api/v1/chat/fusion'].post.responses['200'].content['application/json'].schema
    for (const description of [result.properties.synthesis_prompt_tokens.description, result.properties.models.items.properties.prompt_tokens.description]) {
      expect(description).not.toContain('as charged')
      expect(description).toContain('Usage, not the charge: a request repeated under the same Idempotency-Key runs again and reports its own usage')
    }
  })
})
