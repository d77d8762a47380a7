import { afterEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { ClientExecutor } from '../../src/billing/executor'
import type { Sweeper } from '../../src/billing/sweeper'
import { buildTestApp, json, type TestApp } from '../support/harness'
import { USD, adminPrincipal, admit, admitOk, billedApp, buildPaygApp, createCappedKey, expectInsufficientQuota, ledgerOver, verifyClean } from './fixtures'

// Spec §3.1: a daily or monthly cap stops its key until the reset only once it is reached, and an
// organization is out of funds only once they are spent. A refusal that money merely *held* causes
// (this instance's calls in flight, another instance's lease) is retried shortly: a short
// Retry-After and x-should-retry: true. QA: with four slow streams holding the rest of a monthly
// cap, a fifth call was told Retry-After 243932 (the month's end) and x-should-retry: false, which
// stops an SDK for days (the official ones for good) though the same call succeeded a second later.

let t: TestApp
let other: Sweeper | undefined
afterEach(async () => {
  await other?.stop()
  other = undefined
  await t?.close()
})

const E = 10_500_000n

describe('a key cap', () => {
  test('held by calls in flight: retry in 2 s; spent: until the reset, x-should-retry false (in process and over HTTP)', async () => {
    t = await buildPaygApp()
    t.clock.set(Date.UTC(2026, 10, 20, 12, 0, 0))
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'monthly', 120_000_000n)
    await t.deps.ledger.settle(await admitOk(t, key.principal, 86_500_000n), 86_500_000n)
    // 33.5 M left of the cap: three calls in flight hold 31.5 M of it.
    const flying = [await admitOk(t, key.principal, E), await admitOk(t, key.principal, E), await admitOk(t, key.principal, E)]

    const held = expectInsufficientQuota(await admit(t, key.principal, E))
    expect(held.headers).toEqual({ 'retry-after': '2', 'x-should-retry': 'true' })
    expect(held.message).toContain("this key's monthly spend cap of 0.120000000 USD (120000000 nanos) has less left than this request's worst-case cost")
    expect(held.message).toContain('calls in flight hold the rest')
    expect(held.message).not.toContain('resets at')
    const billed = billedApp(t)
    const overHttp = await billed.call(key.secret, { estimate: String(E) })
    expect(overHttp.status).toBe(429)
    expect([overHttp.headers.get('retry-after'), overHttp.headers.get('x-should-retry')]).toEqual(['2', 'true'])
    expect((await json(overHttp)).error.code).toBe('insufficient_quota')

    // The calls end spending little: the same call fits (the QA's "one second later: 200").
    for (const reservation of flying) await t.deps.ledger.settle(reservation, 1_000_000n)
    await t.deps.ledger.settle(await admitOk(t, key.principal, E), E) // spent 100 M now
    await t.deps.ledger.settle(await admitOk(t, key.principal, E), E) // 110.5 M

    // Now the spending alone leaves 9.5 M: the key waits for the reset, 10 days and 12 hours away.
    const spent = expectInsufficientQuota(await admit(t, key.principal, E))
    expect(spent.headers).toEqual({ 'retry-after': String(10 * 86_400 + 12 * 3600) })
    expect(spent.message).toContain('(after what it spent); the cap resets at 2026-12-01T00:00:00.000Z')
    const reached = await billed.call(key.secret, { estimate: String(E) })
    expect([reached.status, reached.headers.get('retry-after'), reached.headers.get('x-should-retry')]).toEqual([429, String(10 * 86_400 + 12 * 3600), 'false'])
    await verifyClean(t)
  })

  test('an overall cap held by a call in flight is retried shortly too; reached, it has no Retry-After', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'overall', 2n * E)
    const flying = await admitOk(t, key.principal, 2n * E)
    expect(expectInsufficientQuota(await admit(t, key.principal, E)).headers).toEqual({ 'retry-after': '2', 'x-should-retry': 'true' })
    await t.deps.ledger.settle(flying, E + 1n)
    t.clock.advance(1001)
    expect(expectInsufficientQuota(await admit(t, key.principal, E)).headers).toBeUndefined()
  })

  test("another instance's lease holds the rest: retry in 10 s, after which its idle lease is back", async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'daily', 50_000_000n)
    // A second instance on the same database leases the whole cap (a lease is at least 0.10 USD)
    // for one call, and keeps it until it has been idle 10 s.
    const second = await ledgerOver(t, new ClientExecutor(t.deps.database.client), 'second-instance')
    other = second.sweeper
    const elsewhere = await second.ledger.admit({ principal: key.principal, purpose: 'chat', estimate: E })
    if (!elsewhere.ok) throw new Error(elsewhere.error.message)
    await second.ledger.settle(elsewhere.reservation, E)

    const leased = expectInsufficientQuota(await admit(t, key.principal, E))
    expect(leased.headers).toEqual({ 'retry-after': '10', 'x-should-retry': 'true' })
    expect(leased.message).toContain('another gateway instance holds the rest leased')
    const overHttp = await billedApp(t).call(key.secret, { estimate: String(E) })
    expect([overHttp.status, overHttp.headers.get('retry-after'), overHttp.headers.get('x-should-retry')]).toEqual([429, '10', 'true'])

    t.clock.advance(10_001)
    await second.sweeper.tick()
    await t.deps.ledger.settle(await admitOk(t, key.principal, E), E)
    await verifyClean(t)
  })
})

describe("an organization's funds", () => {
  test('held by calls in flight: retry in 2 s; spent: x-should-retry false and no Retry-After', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 360_000_000n)
    const principal = await adminPrincipal(t, org)
    // QA: 0.36 USD available, 80 concurrent calls of 0.005 USD: 72 fit, the rest are held out.
    const results = await Promise.all(Array.from({ length: 80 }, () => admit(t, principal, 5_000_000n)))
    const admitted = results.flatMap(result => (result.ok ? [result.reservation] : []))
    expect(admitted.length).toBe(72)
    for (const result of results.filter(result => !result.ok)) {
      const error = expectInsufficientQuota(result)
      expect(error.headers).toEqual({ 'retry-after': '2', 'x-should-retry': 'true' })
      expect(error.message).toContain('calls in flight hold the rest')
    }
    const billed = billedApp(t)
    const overHttp = await billed.call(org.adminKey, { estimate: '5000000' })
    expect([overHttp.status, overHttp.headers.get('retry-after'), overHttp.headers.get('x-should-retry')]).toEqual([429, '2', 'true'])

    for (const reservation of admitted) await t.deps.ledger.settle(reservation, 5_000_000n)
    t.clock.advance(1001)
    const spent = expectInsufficientQuota(await admit(t, principal, 5_000_000n))
    expect(spent.headers).toBeUndefined()
    expect(spent.message).toContain("insufficient funds: the organization's plan allowance and prepaid balance cannot cover this call")
    const refused = await billed.call(org.adminKey, { estimate: '5000000' })
    expect([refused.status, refused.headers.get('retry-after'), refused.headers.get('x-should-retry')]).toEqual([429, null, 'false'])
    await verifyClean(t)
  })

  test("another instance's lease holds the balance: retry in 10 s", async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 50_000_000n)
    const principal = await adminPrincipal(t, org)
    const second = await ledgerOver(t, new ClientExecutor(t.deps.database.client), 'second-instance')
    other = second.sweeper
    const elsewhere = await second.ledger.admit({ principal, purpose: 'chat', estimate: E })
    if (!elsewhere.ok) throw new Error(elsewhere.error.message)
    second.ledger.release(elsewhere.reservation)
    expect(expectInsufficientQuota(await admit(t, principal, E)).headers).toEqual({ 'retry-after': '10', 'x-should-retry': 'true' })
    t.clock.advance(10_001)
    await second.sweeper.tick()
    await t.deps.ledger.settle(await admitOk(t, principal, E), E)
    await verifyClean(t)
  })
})

test('the official OpenAI SDK retries a refusal by held money after its Retry-After, and not one by a reached cap', async () => {
  t = await buildTestApp()
  const org = await t.createOrg('acme', 10n * USD)
  const key = await createCappedKey(t, org, 'monthly', 10_000_000n)
  let attempts = 0
  const counted: typeof fetch = Object.assign((...args: Parameters<typeof fetch>) => ((attempts += 1), fetch(...args)), { preconnect: fetch.preconnect })
  const client = new OpenAI({ apiKey: key.secret, baseURL: `${t.listen()}/v1`, fetch: counted }) // default retries (2)
  const chat = () => client.chat.completions.create({ model: 'demo-anonymous', messages: [{ role: 'user', content: 'hello' }] })

  // A call in flight holds the whole cap and ends half a second after the SDK's first try.
  const flying = await admitOk(t, key.principal, 10_000_000n)
  setTimeout(() => t.deps.ledger.release(flying), 500)
  const completion = await chat()
  expect(completion.choices[0]!.message.content).toContain('hello')
  expect(attempts).toBe(2)

  // Spent to the cap: one try, no retry. (Past the ledger's 1 s recheck of a refusal, which this
  // fake clock would otherwise keep: the refusal above read the cap as held.)
  await t.deps.ledger.settle(await admitOk(t, key.principal, 9_000_000n), 10_000_000n)
  t.clock.advance(1001)
  attempts = 0
  const error = await chat().then(() => undefined, caught => caught)
  expect(error).toBeInstanceOf(OpenAI.RateLimitError)
  expect((error as { code?: string }).code).toBe('insufficient_quota')
  expect(attempts).toBe(1)
}, 10_000)
