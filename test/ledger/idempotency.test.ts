import { describe, expect, test } from 'bun:test'
import { addPrepaid } from '../../src/billing/ledger-ops'
import type { Principal } from '../../src/keys/principal'
import { buildTestApp, type TestApp, type TestOrg } from '../support/harness'
import { USD, admitOk, configWith, countEntries, createCappedKey, keySettledOf, moneyState, prepaidOf, scalar, verifyClean, eachTestPaygOrg } from './fixtures'

// Every reservation ends exactly once (L4) and replays charge once (L5): settle and release are
// idempotent per reservation; a billing key charges once across reservations; a top-up with a
// reference is booked once.

let t: TestApp
let org: TestOrg
let principal: Principal

eachTestPaygOrg(setup => void ({ t, org, principal } = setup))

const settleEntries = () => countEntries(t, "kind = 'settle'")

describe('one reservation ends once', () => {
  test('settle twice (sequentially) charges once', async () => {
    const reservation = await admitOk(t, principal, 50_000_000n)
    await t.deps.ledger.settle(reservation, 30_000_000n)
    await t.deps.ledger.settle(reservation, 30_000_000n)
    await t.deps.ledger.settle(reservation, 45_000_000n) // a different amount changes nothing either
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 30_000_000n)
    expect(await settleEntries()).toBe(1n)
    expect(reservation.state).toBe('settled')
    await verifyClean(t)
  })

  test('settle twice concurrently: the second call waits for the first and charges nothing', async () => {
    const reservation = await admitOk(t, principal, 50_000_000n)
    const calls = Array.from({ length: 10 }, () => t.deps.ledger.settle(reservation, 30_000_000n))
    await Promise.all(calls)
    expect(await settleEntries()).toBe(1n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 30_000_000n)
    await verifyClean(t)
  })

  test('release twice frees the hold once', async () => {
    const before = await moneyState(t.deps.database.client, org.orgId)
    const reservation = await admitOk(t, principal, 50_000_000n)
    const pool = t.deps.ledger.pools.get('prepaid', org.orgId, null, 0, t.clock.now())
    expect(pool.held).toBe(50_000_000n)
    t.deps.ledger.release(reservation)
    t.deps.ledger.release(reservation)
    expect(pool.held).toBe(0n)
    expect(reservation.state).toBe('released')
    expect(await moneyState(t.deps.database.client, org.orgId)).toEqual(before)
    await verifyClean(t)
  })

  test('settle after release charges nothing', async () => {
    const reservation = await admitOk(t, principal, 50_000_000n)
    t.deps.ledger.release(reservation)
    await t.deps.ledger.settle(reservation, 50_000_000n)
    expect(reservation.state).toBe('released')
    expect(await settleEntries()).toBe(0n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD)
    await verifyClean(t)
  })

  test('release after settle (and during settle) changes nothing', async () => {
    const pool = t.deps.ledger.pools.get('prepaid', org.orgId, null, 0, t.clock.now())
    const first = await admitOk(t, principal, 50_000_000n)
    await t.deps.ledger.settle(first, 20_000_000n)
    t.deps.ledger.release(first)
    const second = await admitOk(t, principal, 50_000_000n)
    const settling = t.deps.ledger.settle(second, 20_000_000n)
    t.deps.ledger.release(second) // while its settlement is in flight
    await settling
    expect(second.state).toBe('settled')
    expect(pool.held).toBe(0n)
    expect(await settleEntries()).toBe(2n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 40_000_000n)
    await verifyClean(t)
  })

  test('a settled or released reservation leaves no hold behind (the freed money is admissible again)', async () => {
    const small = await createCappedKey(t, org, 'daily', 100_000_000n)
    const a = await admitOk(t, small.principal, 100_000_000n)
    await t.deps.ledger.settle(a, 40_000_000n)
    await t.deps.ledger.settle(a, 40_000_000n)
    t.deps.ledger.release(a)
    // 60_000_000 of the cap is left, exactly.
    const b = await admitOk(t, small.principal, 60_000_000n)
    t.deps.ledger.release(b)
    t.deps.ledger.release(b)
    const c = await admitOk(t, small.principal, 60_000_000n)
    await t.deps.ledger.settle(c, 60_000_000n)
    expect(await keySettledOf(t, small.keyId)).toBe(100_000_000n)
    await verifyClean(t)
  })
})

describe('billing keys', () => {
  test('one billing key replayed 20× concurrently across 20 reservations charges once', async () => {
    const reservations = await Promise.all(Array.from({ length: 20 }, () => admitOk(t, principal, 40_000_000n, { billingKey: 'fusion-req-1:judge' })))
    await Promise.all(reservations.map(reservation => t.deps.ledger.settle(reservation, 25_000_000n)))
    expect(await countEntries(t, "idempotency_key = 'bill:fusion-req-1:judge'")).toBe(1n)
    expect(await settleEntries()).toBe(1n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 25_000_000n)
    for (const reservation of reservations) expect(reservation.state).toBe('settled')
    // The 19 duplicates gave their holds and lease draws back: the whole rest is admissible.
    const pool = t.deps.ledger.pools.get('prepaid', org.orgId, null, 0, t.clock.now())
    expect(pool.held).toBe(0n)
    const leased = await scalar(t.deps.database.client, 'SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?', [org.orgId])
    expect(pool.leased).toBe(leased)
    await verifyClean(t)
  })

  test('a billing key replayed later (after the first settled) charges nothing, with a key cap and an allowance split', async () => {
    await t.close()
    t = await buildTestApp({}, configWith({ plans: { basic: { monthly_allowance: '0.03', fusion: true } } }))
    org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'monthly', USD)
    const first = await admitOk(t, key.principal, 50_000_000n, { billingKey: 'idem-7:participant-0' })
    await t.deps.ledger.settle(first, 50_000_000n) // 0.03 from the allowance, 0.02 from prepaid
    const before = await moneyState(t.deps.database.client, org.orgId)
    for (let replay = 0; replay < 5; replay += 1) {
      const again = await admitOk(t, key.principal, 50_000_000n, { billingKey: 'idem-7:participant-0' })
      await t.deps.ledger.settle(again, 50_000_000n)
    }
    expect(await moneyState(t.deps.database.client, org.orgId)).toEqual(before)
    expect(await countEntries(t, "kind = 'settle'")).toBe(2n) // one per funding source of the one charge
    expect(await keySettledOf(t, key.keyId)).toBe(50_000_000n)
    await verifyClean(t)
  })

  test('distinct billing keys each charge once; a zero-cost settle still claims its key', async () => {
    const a = await admitOk(t, principal, 10_000_000n, { billingKey: 'k-a' })
    const b = await admitOk(t, principal, 10_000_000n, { billingKey: 'k-b' })
    const zero = await admitOk(t, principal, 10_000_000n, { billingKey: 'k-zero' })
    await Promise.all([t.deps.ledger.settle(a, 1n), t.deps.ledger.settle(b, 2n), t.deps.ledger.settle(zero, 0n)])
    const replay = await admitOk(t, principal, 10_000_000n, { billingKey: 'k-zero' })
    await t.deps.ledger.settle(replay, 9_000_000n)
    expect(await countEntries(t, "idempotency_key LIKE 'bill:%'")).toBe(3n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 3n)
    await verifyClean(t)
  })
})

describe('top-ups', () => {
  test('a top-up with a reference is applied once, sequentially and concurrently', async () => {
    expect(await t.deps.ledger.topUp({ orgId: org.orgId, amount: USD, reference: 'stripe:pi_1' })).toEqual({ applied: true })
    expect(await t.deps.ledger.topUp({ orgId: org.orgId, amount: USD, reference: 'stripe:pi_1' })).toEqual({ applied: false })
    const results = await Promise.all(
      Array.from({ length: 20 }, () => t.deps.ledger.topUp({ orgId: org.orgId, amount: 3n * USD, reference: 'stripe:pi_2' })),
    )
    expect(results.filter(result => result.applied).length).toBe(1)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD + USD + 3n * USD)
    expect(await countEntries(t, "kind = 'top_up'")).toBe(3n) // createOrg's credit, pi_1, pi_2
    const view = await t.deps.balance(org.orgId)
    expect(view.topUp).toEqual({ remainingNanos: 14n * USD, spentNanos: 0n })
    await verifyClean(t)
  })

  test('top-ups without a reference are each applied', async () => {
    await Promise.all(Array.from({ length: 5 }, () => t.deps.ledger.topUp({ orgId: org.orgId, amount: 7n })))
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD + 35n)
  })

  test('a top-up that would take the balance past a 64-bit integer is refused and books nothing', async () => {
    // SQLite would store the sum as a float: the money would stop being exact (QA: two top-ups
    // of 2^63 - 1 nanos, then `svc ledger verify` failing on an integer overflow).
    const most = (1n << 63n) - 1n
    const room = most - 10n * USD
    expect(await t.deps.ledger.topUp({ orgId: org.orgId, amount: room })).toEqual({ applied: true })
    await expect(t.deps.ledger.topUp({ orgId: org.orgId, amount: 1n })).rejects.toMatchObject({ code: 'invalid_request', message: expect.stringContaining('the most the ledger can hold') })
    expect(await prepaidOf(t, org.orgId)).toBe(most)
    const types = await t.deps.database.client.execute({ sql: 'SELECT typeof(prepaid_nanos) AS p, typeof(top_up_credited_nanos) AS c FROM balances WHERE org_id = ?', args: [org.orgId] })
    expect(types.rows[0]).toMatchObject({ p: 'integer', c: 'integer' })
    expect(await countEntries(t, "kind = 'top_up'")).toBe(2n)
    await verifyClean(t)
  })

  test('the guard is the balance update itself: a credit past a 64-bit integer fails the statement', async () => {
    const most = (1n << 63n) - 1n
    await t.deps.ledger.topUp({ orgId: org.orgId, amount: most - 10n * USD })
    const credit = addPrepaid(org.orgId, { credited: 1n })
    await expect(t.deps.database.client.execute({ sql: credit.sql, args: [...credit.args] })).rejects.toThrow(/NOT NULL/)
    expect(await prepaidOf(t, org.orgId)).toBe(most)
  })

  test('a non-positive top-up is refused with invalid_request and books nothing', async () => {
    await expect(t.deps.ledger.topUp({ orgId: org.orgId, amount: 0n })).rejects.toMatchObject({ code: 'invalid_request' })
    await expect(t.deps.ledger.topUp({ orgId: org.orgId, amount: -5n })).rejects.toMatchObject({ code: 'invalid_request' })
    expect(await countEntries(t, "kind = 'top_up'")).toBe(1n)
  })
})
