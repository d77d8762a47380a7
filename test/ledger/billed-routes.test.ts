import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { SpendCapPeriod } from '../../src/db/schema'
import { utcDay, utcMonth } from '../../src/lib/clock'
import { chunk, DONE, frame, openAIUsage } from '../providers/openai-wire'
import type { FakeResponse } from '../support/fake-upstream'
import { poll } from '../support/poll'
import {
  capWindow, estimateOf, highInput, MoneyModel, outputFallback, PARSE_PRICE, prng, startGateway, tokenCharge, WEB_FETCH_PRICE,
  type Gateway, type ModelKey, type ModelOrg, type PlanId,
} from './billed-routes-model'
import { burstOp, type Dialect, enrichedOp, fusionOp, requestFor, type Run, WORDS } from './billed-routes-compound'
import { scalar, verifyClean } from './fixtures'

// Money exactness across the billed routes as a seeded model-based test (SECURITY-NOTES.md §3 L1,
// L3, L4, L7, L8): per seed, a few hundred random operations against one app — Chat Completions,
// Responses and Messages (streamed or not) with random upstream behaviours, count_tokens (free),
// standalone web fetch, document parse, top-ups, key revocations and replacements, clock moves
// across UTC day and month boundaries — from capped and uncapped keys of three organizations on
// different plans. An independent model (billed-routes-model.ts) predicts each admission and
// charge; balances, allowances, key spend, key status, idle concurrency slots and `verify` are
// compared at every checkpoint. Requests run one at a time, so the model needs no lease detail.

// FUZZ_SEED=n replays one seed.
const SEEDS = process.env.FUZZ_SEED ? [Number(process.env.FUZZ_SEED)] : [1, 2, 3, 4, 5]
const STEPS = 250

type Behaviour = 'usage' | 'no-usage' | 'fail-before' | 'fail-mid' | 'abort-mid' | 'abort-before'

let gateway: Gateway
beforeAll(async () => {
  gateway = await startGateway()
})
afterAll(() => gateway.close())

function post(path: string, key: string, body: unknown, signal?: AbortSignal, headers: Record<string, string> = {}): Promise<Response> {
  const init: RequestInit = { method: 'POST', headers: { ...headers, authorization: `Bearer ${key}` }, signal }
  if (body instanceof FormData) init.body = body
  else {
    init.body = JSON.stringify(body)
    ;(init.headers as Record<string, string>)['content-type'] = 'application/json'
  }
  return gateway.t.app.handle(new Request(`http://localhost${path}`, init))
}

/** Waits until the org's billed calls have ended (slots free) and the writer committed. */
async function settled(orgId: string): Promise<void> {
  await poll('the call to end', 400, 5, () => (gateway.t.deps.limits.concurrency.inUse(orgId) === 0 ? true : undefined))
  await gateway.t.deps.writer.drain()
}

async function runSeed(seed: number): Promise<string[]> {
  const { t, upstream } = gateway
  const random = prng(seed)
  const log: string[] = []
  t.clock.set(random.pick([Date.UTC(2026, 0, 31, 20, 0, 0), Date.UTC(2026, 1, 27, 23, 0, 0), Date.UTC(2026, 11, 31, 22, 0, 0), Date.UTC(2026, 5, 10, 12, 0, 0)]))
  const plans: Array<[PlanId, bigint]> = [['pro', 1_000_000n], ['payg', 3_000_000n], ['basic', 0n]]
  const orgs: ModelOrg[] = []
  for (const [plan, credit] of plans) {
    const { org, ownerUserId } = await t.deps.orgs.createOrg({ name: `${plan}-${seed}`, planId: plan, ownerEmail: `${plan}-${seed}@fuzz.test` })
    const admin = await t.deps.keys.create({ orgId: org.id, userId: ownerUserId, name: 'admin', admin: true, expiresAtMs: null, spendCap: null })
    if (credit > 0n) await t.deps.ledger.topUp({ orgId: org.id, amount: credit })
    const keys: ModelKey[] = [{ id: admin.key.id, secret: admin.secret, cap: null, status: 'active', spent: new Map() }]
    const caps: Array<[SpendCapPeriod, bigint]> = [['daily', 600_000n], ['monthly', 1_500_000n], ['overall', 1_000_000n]]
    for (const [period, nanos] of caps) {
      const made = await t.deps.keys.create({ orgId: org.id, userId: ownerUserId, name: period, admin: false, expiresAtMs: null, spendCap: { period, nanos } })
      keys.push({ id: made.key.id, secret: made.secret, cap: { period, nanos }, status: 'active', spent: new Map() })
    }
    orgs.push({ id: org.id, plan, adminKey: admin.secret, prepaid: credit, periods: new Map(), keys })
  }
  const model = new MoneyModel(orgs)

  const checkpoint = async (where: string) => {
    for (const org of orgs) {
      const now = t.clock.now()
      const state = { where, org: org.plan }
      expect({ ...state, prepaid: await scalar(t.deps.database.client, 'SELECT prepaid_nanos FROM balances WHERE org_id = ?', [org.id]) }).toEqual({ ...state, prepaid: org.prepaid })
      for (const [start, period] of org.periods) {
        const used = await scalar(t.deps.database.client, 'SELECT used_nanos FROM allowances WHERE org_id = ? AND period_start_ms = ?', [org.id, start])
        expect({ ...state, start, used }).toEqual({ ...state, start, used: period.used })
      }
      for (const key of org.keys) {
        const row = await t.deps.database.client.execute({ sql: 'SELECT status FROM api_keys WHERE id = ?', args: [key.id] })
        expect({ ...state, key: key.cap?.period ?? 'admin', status: row.rows[0]!.status }).toEqual({ ...state, key: key.cap?.period ?? 'admin', status: key.status })
        if (!key.cap) continue
        const window = capWindow(key.cap.period, now)
        const spent = await scalar(t.deps.database.client, 'SELECT spent_nanos FROM key_spend WHERE key_id = ? AND window_start_ms = ?', [key.id, window])
        expect({ ...state, key: key.cap.period, spent }).toEqual({ ...state, key: key.cap.period, spent: key.spent.get(window) ?? 0n })
      }
      const balance = await t.request('GET', '/api/v1/billing/balance', { key: org.adminKey })
      const view: any = await balance.json()
      expect({ ...state, available: view.available_nanos }).toEqual({ ...state, available: String(model.available(org, now)) })
      expect(t.deps.limits.concurrency.inUse(org.id)).toBe(0)
    }
    await verifyClean(t)
  }

  const billed = async (org: ModelOrg, key: ModelKey, estimate: bigint, send: () => Promise<{ status: number; charge: bigint }>, what: string) => {
    const now = t.clock.now()
    const before = upstream.requests.length
    if (key.status !== 'active') {
      const { status } = await send()
      expect({ what, status }).toEqual({ what, status: 401 })
      return
    }
    const admits = model.admits(org, key, estimate, now)
    const { status, charge } = await send()
    await settled(org.id)
    // A refused call leaves its scripted answer unused: drop it so the next call gets its own.
    ;(upstream as unknown as { script: FakeResponse[] }).script.splice(0)
    if (!admits) {
      expect({ what, status, upstream: upstream.requests.length - before }).toEqual({ what, status: 429, upstream: 0 })
      return
    }
    expect({ what, refused: status === 429 }).toEqual({ what, refused: false })
    const prepaidBefore = org.prepaid
    model.charge(org, key, charge, now)
    // §7.3: prepaid goes below zero only by an overshoot (actual above the hold), and by no more.
    const prepaid = await scalar(t.deps.database.client, 'SELECT prepaid_nanos FROM balances WHERE org_id = ?', [org.id])
    const floorBefore = prepaidBefore < 0n ? prepaidBefore : 0n
    if (prepaid < floorBefore) {
      const overshoot = charge - estimate
      expect({ what, overshoot: overshoot > 0n, withinOvershoot: prepaid >= floorBefore - overshoot }).toEqual({ what, overshoot: true, withinOvershoot: true })
    }
    if (what.includes(' chat ') || what.includes(' responses ') || what.includes(' messages ')) expect({ what, upstreamCalls: upstream.requests.length - before }).toEqual({ what, upstreamCalls: 1 })
    // After every billed call: the org's settled total against the model's (names the call that diverged).
    const settledTotal = await scalar(t.deps.database.client, "SELECT COALESCE(SUM(amount_nanos), 0) FROM ledger_entries WHERE org_id = ? AND kind = 'settle'", [org.id])
    expect({ what, status, settled: settledTotal }).toEqual({ what, status, settled: model.charged(org) })
  }

  const run: Run = { t, gateway, model, random, post, settled }
  for (let step = 0; step < STEPS; step++) {
    const org = random.pick(orgs)
    const key = random.pick(org.keys)
    const op = random.weighted<string>([[12, 'chat'], [1, 'count'], [2, 'web'], [1, 'parse'], [2, 'fusion'], [1.5, 'enriched'], [1.5, 'burst'], [1, 'topup'], [0.5, 'revoke'], [1.5, 'clock'], [1, 'check']])
    const where = `seed ${seed} step ${step} ${op}`
    log.push(where)
    if (op === 'chat') {
      const dialect = random.pick<Dialect>(['chat', 'responses', 'messages'])
      const stream = random.next() < 0.5
      const behaviour = random.weighted<Behaviour>([[5, 'usage'], [2, 'no-usage'], [1, 'fail-before'], [1, 'fail-mid'], [stream ? 1 : 0, 'abort-mid'], [1, 'abort-before']])
      const prompt = Array.from({ length: random.int(1, 30) }, () => random.pick(WORDS)).join('') + `step ${step}`
      const maxTokens = random.int(16, 64)
      // The last word is unique, so a reader that saw it saw every delta before it.
      const words = [...Array.from({ length: random.int(0, 7) }, () => random.pick(WORDS)), `omega${step} `]
      const text = words.join('')
      // Sometimes far more input than the estimate's bytes ÷ 3 (an overshoot, README "Money"), within the context.
      const reported = { inputTokens: random.next() < 0.3 ? random.int(highInput(prompt), highInput(prompt) * 8) : random.int(1, highInput(prompt)), outputTokens: random.int(1, maxTokens) }
      let partial = chunk({ role: 'assistant', content: '' })
      for (const word of words) partial += chunk({ content: word })
      // A non-streamed chat asks its upstream for one JSON answer (README "Upstream deadlines").
      const json = { id: 'x', object: 'chat.completion', created: 1, model: 'upstream-m', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }] }
      const scripted: FakeResponse =
        behaviour === 'usage'
          ? stream ? { kind: 'sse', body: partial + chunk({}, 'stop') + frame({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'upstream-m', choices: [], usage: openAIUsage(reported) }) + DONE }
            : { kind: 'json', body: { ...json, usage: openAIUsage(reported) } }
        : behaviour === 'no-usage' ? (stream ? { kind: 'sse', body: partial + chunk({}, 'stop') + DONE } : { kind: 'json', body: json })
        : behaviour === 'fail-before' ? { kind: 'json', status: 500, body: { error: { message: 'boom', type: 'server_error', param: null, code: null } } }
        : behaviour === 'fail-mid'
          // A stream cut mid-way ends without its terminator: a clean close, not a reset, so its
          // content always arrives (a reset under load could drop what the gateway had not read).
          ? stream ? { kind: 'sse', body: partial, then: 'close' } : { kind: 'sse', body: JSON.stringify(json).slice(0, 60), then: 'reset', headers: { 'content-type': 'application/json' } }
        : behaviour === 'abort-mid' ? { kind: 'sse', body: partial, then: 'stall' }
        : { kind: 'stall' }
      // Charged: the reported usage, else the fallback count (SECURITY-NOTES.md §4) for a stream that
      // produced output; nothing for a failed or abandoned non-streamed answer, which the client never
      // received (README, the twelfth session; pipeline.ts collectChat), nor before any output.
      const expected =
        behaviour === 'usage' ? tokenCharge(reported.inputTokens, reported.outputTokens)
        : behaviour === 'no-usage' || (stream && (behaviour === 'fail-mid' || behaviour === 'abort-mid')) ? tokenCharge(highInput(prompt), outputFallback(text))
        : 0n
      const request = requestFor(dialect, prompt, maxTokens, stream)
      await billed(org, key, estimateOf(prompt, maxTokens), async () => {
        ;(upstream as unknown as { script: FakeResponse[] }).script.splice(0)
        upstream.enqueue(scripted)
        const before = upstream.requests.length
        const controller = new AbortController()
        const pending = post(request.path, key.secret, request.body, controller.signal)
        if (behaviour === 'abort-before') {
          // Refused calls answer without reaching the upstream; admitted ones reach it, then the client leaves.
          const early = await Promise.race([pending, upstream.request(before).then(() => undefined)])
          if (early !== undefined && early.status !== 200) return { status: early.status, charge: 0n }
          await upstream.request(before)
          controller.abort()
          const response = await pending.catch(() => undefined)
          await response?.body?.cancel().catch(() => {})
          return { status: response?.status ?? 499, charge: 0n }
        }
        const response = await pending
        if (response.status !== 200 || !stream) {
          await response.text().catch(() => '')
          return { status: response.status, charge: response.status === 429 || response.status === 401 ? 0n : expected }
        }
        if (behaviour === 'abort-mid') {
          const reader = response.body!.getReader()
          let seen = ''
          const last = words[words.length - 1]!.trim()
          const decoder = new TextDecoder()
          while (!seen.includes(last)) {
            const { value, done } = await reader.read()
            if (done) break
            seen += decoder.decode(value, { stream: true })
          }
          // Sometimes the UTC day or month ends while the stream is open: the charge belongs to the
          // period and cap window the call was admitted in (its hold's leases).
          if (random.next() < 0.3) t.clock.set((random.next() < 0.5 ? utcDay(t.clock.now()).endMs : utcMonth(t.clock.now()).endMs) + 1)
          // Sometimes the key is revoked while its stream is open (§7.4: its leases are dropped at
          // once): the output already produced is still charged to it, exactly once.
          if (key.cap && random.next() < 0.3) {
            const revoked = await t.request('DELETE', `/api/v1/api-keys/${key.id}`, { key: org.adminKey })
            expect({ where, revoked: revoked.status }).toEqual({ where, revoked: 204 })
            key.status = 'revoked'
          }
          controller.abort()
          await reader.cancel().catch(() => {})
          return { status: 200, charge: expected }
        }
        await response.text().catch(() => '')
        return { status: 200, charge: expected }
      }, `${where} ${dialect} stream=${stream} ${behaviour} prompt=${Buffer.byteLength(prompt)}B text=${Buffer.byteLength(text)}B reported=${reported.inputTokens}/${reported.outputTokens} max=${maxTokens} expected=${expected}`)
    } else if (op === 'count') {
      const before = await scalar(t.deps.database.client, 'SELECT COUNT(*) FROM ledger_entries')
      const response = await post('/v1/messages/count_tokens', key.secret, { model: 'm', messages: [{ role: 'user', content: 'how many tokens' }] })
      expect({ where, status: response.status }).toEqual({ where, status: key.status === 'active' ? 200 : 401 })
      expect(await scalar(t.deps.database.client, 'SELECT COUNT(*) FROM ledger_entries')).toBe(before)
    } else if (op === 'web') {
      // Pages that load, pages that fail (billed only for what was retrieved) and a page the policy
      // refuses (the whole call is released: "a refusal is never billed"), or a name that does not resolve.
      const kinds = Array.from({ length: random.int(1, 3) }, () => random.weighted<string>([[6, 'ok'], [1, 'broken'], [0.5, 'image'], [0.3, 'nowhere']]))
      const urls = kinds.map((kind, index) => `http://${kind === 'nowhere' ? 'nowhere.example-fuzz.com' : 'pages.example-fuzz.com'}:${gateway.pagesPort}/s${step}/p${index}/${kind}`)
      const send = async () => {
        const response = await post('/api/v1/web/fetch', key.secret, { urls })
        const body: any = await response.json()
        if (response.status === 200) expect(body.results).toHaveLength(kinds.length)
        const charge = kinds.includes('image') ? 0n : BigInt(kinds.filter(kind => kind === 'ok').length) * WEB_FETCH_PRICE
        return { status: response.status, charge }
      }
      if (kinds.includes('nowhere')) {
        // Names are resolved before the call is admitted: refused whatever the funds, nothing held.
        const before = await scalar(t.deps.database.client, 'SELECT COUNT(*) FROM ledger_entries')
        const { status } = await send()
        expect({ where, status: status === 200 || status === 429 }).toEqual({ where, status: false })
        expect(await scalar(t.deps.database.client, 'SELECT COUNT(*) FROM ledger_entries')).toBe(before)
      } else await billed(org, key, BigInt(kinds.length) * WEB_FETCH_PRICE, send, `${where} ${kinds.join(',')}`)
    } else if (op === 'parse') {
      // A text file is one unit; a PNG is refused after admission (400) and charged nothing (L7).
      const valid = random.next() < 0.8
      await billed(org, key, PARSE_PRICE, async () => {
        const form = new FormData()
        const content = valid ? `notes of step ${step}\n` : new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13])
        form.append('file', new Blob([content], { type: 'text/plain' }), 'notes.txt')
        const response = await post('/api/v1/attachments/parse', key.secret, form)
        await response.text()
        if (key.status === 'active' && response.status !== 429) expect({ where, status: response.status }).toEqual({ where, status: valid ? 200 : 400 })
        return { status: response.status, charge: valid ? PARSE_PRICE : 0n }
      }, `${where} valid=${valid}`)
    } else if (op === 'burst') {
      await burstOp(run, org, key, where)
    } else if (op === 'enriched') {
      await enrichedOp(run, org, key, where)
    } else if (op === 'fusion') {
      await fusionOp(run, org, key, where)
    } else if (op === 'topup') {
      const amount = BigInt(random.int(100_000, 2_000_000))
      await t.deps.ledger.topUp({ orgId: org.id, amount })
      org.prepaid += amount
    } else if (op === 'revoke' && key.cap) {
      const response = await t.request('DELETE', `/api/v1/api-keys/${key.id}`, { key: org.adminKey })
      expect({ where, status: response.status }).toEqual({ where, status: key.status === 'revoked' ? 404 : 204 })
      key.status = 'revoked'
      // A replacement with a fresh cap of the same kind, through the key API (spec §4.1: funding needed).
      const funded = model.available(org, t.clock.now()) > 0n
      const made = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: `r${step}`, spend_cap_period: key.cap.period, spend_cap_nanos: String(key.cap.nanos) } })
      expect({ where, status: made.status }).toEqual({ where, status: funded ? 201 : 429 })
      if (made.status === 201) {
        const { key: created }: any = await made.json()
        org.keys.push({ id: created.id, secret: created.token, cap: key.cap, status: 'active', spent: new Map() })
      }
    } else if (op === 'clock') {
      const now = t.clock.now()
      const jump = random.pick(['minutes', 'hours', 'day-edge', 'month-edge'] as const)
      if (jump === 'minutes') t.clock.advance(random.int(1, 30) * 60_000)
      else if (jump === 'hours') t.clock.advance(random.int(1, 10) * 3_600_000)
      else t.clock.set((jump === 'day-edge' ? utcDay(now).endMs : utcMonth(now).endMs) - random.int(0, 1))
    } else {
      await checkpoint(where)
    }
  }
  await checkpoint(`seed ${seed} end`)
  return log
}

for (const seed of SEEDS) {
  test(`billed routes against the money model, seed ${seed}`, async () => {
    await runSeed(seed)
  }, 20_000)
}
