import { afterEach, describe, expect, test } from 'bun:test'
import { ClientExecutor } from '../../src/billing/executor'
import type { AdmitResult, Reservation } from '../../src/billing/ledger'
import type { SpendCapPeriod } from '../../src/db/schema'
import { utcDay, utcMonth } from '../../src/lib/clock'
import type { Principal } from '../../src/keys/principal'
import { buildTestApp, type TestApp } from '../support/harness'
import {
  PAYG_ONLY, USD, adminPrincipal, admit, admitOk, buildPaygApp, configWith, createCappedKey, expectInsufficientQuota, keySpentOf,
  ledgerOver, prepaidOf, scalar, verifyClean,
} from './fixtures'

// L3 (SECURITY-NOTES.md §3): admitted reservations never exceed the remaining balance or cap,
// even when hundreds of admissions race through Promise.all; spend exceeds a cap only by the
// overshoot of calls whose actual cost beat their estimate.

let t: TestApp
afterEach(async () => {
  await t?.close()
})

/** Splits a burst's results into admitted reservations and refusals (asserting every refusal is insufficient_quota). */
function partition(results: AdmitResult[]): { admitted: Reservation[]; refusedCount: number } {
  const admitted: Reservation[] = []
  let refusedCount = 0
  for (const result of results) {
    if (result.ok) admitted.push(result.reservation)
    else {
      expectInsufficientQuota(result)
      refusedCount += 1
    }
  }
  return { admitted, refusedCount }
}

function burst(principal: Principal, estimate: bigint, count: number): Promise<AdmitResult[]> {
  return Promise.all(Array.from({ length: count }, () => admit(t, principal, estimate)))
}

function windowStartOf(period: SpendCapPeriod, nowMs: number): number {
  if (period === 'daily') return utcDay(nowMs).startMs
  if (period === 'monthly') return utcMonth(nowMs).startMs
  return 0
}

describe('org balance under 500 concurrent admissions (no plan allowance)', () => {
  const cases: Array<[string, bigint, bigint]> = [
    ['10 USD at 0.03 USD each', 10n * USD, 30_000_000n],
    ['1 USD at 3_333_333 nanos each', USD, 3_333_333n],
    ['7 USD at 0.02 USD each (exact division)', 7n * USD, 20_000_000n],
    ['0.5 USD at 0.5 USD + 1 nano (nothing fits)', USD / 2n, USD / 2n + 1n],
    ['a balance below the minimum lease: 0.05 USD at 0.001 USD', 50_000_000n, 1_000_000n],
  ]
  for (const [name, balance, estimate] of cases) {
    test(name, async () => {
      t = await buildPaygApp()
      const org = await t.createOrg('acme', balance)
      const principal = await adminPrincipal(t, org)
      const expected = Number(balance / estimate)

      const { admitted, refusedCount } = partition(await burst(principal, estimate, 500))
      expect(admitted.length).toBe(expected)
      expect(refusedCount).toBe(500 - expected)
      // What is held in memory is covered by what is leased, which the database still has.
      const leased = await scalar(t.deps.database.client, 'SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?', [org.orgId])
      expect(BigInt(admitted.length) * estimate).toBeLessThanOrEqual(leased)
      expect(leased).toBeLessThanOrEqual(balance)

      await Promise.all(admitted.map(reservation => t.deps.ledger.settle(reservation, estimate)))
      const left = balance - BigInt(expected) * estimate
      expect(await prepaidOf(t, org.orgId)).toBe(left)
      expect((await t.deps.balance(org.orgId)).availableNanos).toBe(left)
      // The remainder is exactly what is still admissible: nothing was lost to rounding or leases.
      expectInsufficientQuota(await admit(t, principal, left + 1n))
      t.clock.advance(1001) // past the "nothing free" recheck interval
      if (left > 0n) {
        const last = await admitOk(t, principal, left)
        await t.deps.ledger.settle(last, left)
        expect(await prepaidOf(t, org.orgId)).toBe(0n)
      }
      await verifyClean(t)
    })
  }

  test('allowance and prepaid together: 1 USD allowance + 2 USD prepaid at 0.01 USD → exactly 300', async () => {
    t = await buildTestApp({}, configWith({ plans: { basic: { monthly_allowance: '1', fusion: false } } }))
    const org = await t.createOrg('acme', 2n * USD)
    const principal = await adminPrincipal(t, org)
    const { admitted, refusedCount } = partition(await burst(principal, 10_000_000n, 500))
    expect(admitted.length).toBe(300)
    expect(refusedCount).toBe(200)
    await Promise.all(admitted.map(reservation => t.deps.ledger.settle(reservation, 10_000_000n)))
    const view = await t.deps.balance(org.orgId)
    expect(view.availableNanos).toBe(0n)
    expect(view.allowanceLeftNanos).toBe(0n)
    expect(view.topUp).toEqual({ remainingNanos: 0n, spentNanos: 2n * USD })
    await verifyClean(t)
  })

  test('plenty of money: a cold burst of 300 is admitted whole (QA: each growth was sized for one call, so 174 ran out of rounds)', async () => {
    t = await buildTestApp({}, configWith({ plans: { pro: { monthly_allowance: '20', fusion: false } } }))
    const org = await t.createOrg('acme', 100n * USD)
    const principal = await adminPrincipal(t, org)
    const { admitted, refusedCount } = partition(await burst(principal, USD / 10n, 300))
    expect([admitted.length, refusedCount]).toEqual([300, 0])
    for (const reservation of admitted) t.deps.ledger.release(reservation)
    await verifyClean(t)
  })

  test("a burst leases about its own demand: a second instance's burst finds the rest (QA: twice the demand left it 492 of 500 refused)", async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 100n * USD)
    const principal = await adminPrincipal(t, org)
    const b = await ledgerOver(t, new ClientExecutor(t.deps.database.client), 'instance-b')
    try {
      const first = partition(await burst(principal, USD / 10n, 500))
      expect(first.admitted.length).toBe(500)
      const leased = await scalar(t.deps.database.client, 'SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?', [org.orgId])
      expect(leased).toBeLessThanOrEqual(55n * USD)
      const second = partition(await Promise.all(Array.from({ length: 500 }, () => b.ledger.admit({ principal, purpose: 'chat', estimate: USD / 10n }))))
      expect(second.admitted.length).toBe(500)
      for (const reservation of first.admitted) t.deps.ledger.release(reservation)
      for (const reservation of second.admitted) b.ledger.release(reservation)
    } finally {
      await b.sweeper.stop()
    }
    await verifyClean(t)
  })

  test('releases return their holds: after releasing a burst, the same burst fits again', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', USD)
    const principal = await adminPrincipal(t, org)
    const first = partition(await burst(principal, 10_000_000n, 150))
    expect(first.admitted.length).toBe(100)
    for (const reservation of first.admitted) t.deps.ledger.release(reservation)
    t.clock.advance(1001)
    const second = partition(await burst(principal, 10_000_000n, 150))
    expect(second.admitted.length).toBe(100)
    for (const reservation of second.admitted) t.deps.ledger.release(reservation)
    expect(await prepaidOf(t, org.orgId)).toBe(USD)
    await verifyClean(t)
  })
})

describe('key spend caps under 500 concurrent admissions', () => {
  for (const period of ['daily', 'monthly', 'overall'] as const) {
    test(`${period} cap of 1 USD at 0.003 USD each → exactly 333; the org balance is not the limit`, async () => {
      t = await buildPaygApp()
      const org = await t.createOrg('acme', 100n * USD)
      const key = await createCappedKey(t, org, period, USD)
      const estimate = 3_000_000n
      const { admitted, refusedCount } = partition(await burst(key.principal, estimate, 500))
      expect(admitted.length).toBe(333)
      expect(refusedCount).toBe(167)
      const window = windowStartOf(period, t.clock.now())
      const leased = await scalar(t.deps.database.client, 'SELECT leased_nanos FROM key_spend WHERE key_id = ? AND window_start_ms = ?', [key.keyId, window])
      expect(leased).toBeGreaterThanOrEqual(333n * estimate)
      expect(leased).toBeLessThanOrEqual(USD)

      await Promise.all(admitted.map(reservation => t.deps.ledger.settle(reservation, estimate)))
      expect(await keySpentOf(t, key.keyId, window)).toBe(333n * estimate)
      expect(await prepaidOf(t, org.orgId)).toBe(100n * USD - 333n * estimate)
      // The cap's remainder (0.001 USD) is still admissible; one nano more is not.
      expectInsufficientQuota(await admit(t, key.principal, 1_000_001n))
      t.clock.advance(1001)
      await admitOk(t, key.principal, 1_000_000n)
      await verifyClean(t)
    })

    test(`${period} cap: another key of the same org is unaffected`, async () => {
      t = await buildPaygApp()
      const org = await t.createOrg('acme', 10n * USD)
      const capped = await createCappedKey(t, org, period, 100_000_000n)
      const other = await adminPrincipal(t, org)
      const [cappedResults, otherResults] = await Promise.all([burst(capped.principal, 10_000_000n, 100), burst(other, 10_000_000n, 100)])
      expect(partition(cappedResults).admitted.length).toBe(10)
      expect(partition(otherResults).admitted.length).toBe(100)
    })
  }

  test('an overall cap settled exactly to its limit flips the key to expired in the same batch', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'overall', 100n * 1_000_000n)
    const { admitted } = partition(await burst(key.principal, 1_000_000n, 300))
    expect(admitted.length).toBe(100)
    await Promise.all(admitted.map(reservation => t.deps.ledger.settle(reservation, 1_000_000n)))
    const status = await t.deps.database.client.execute({ sql: 'SELECT status FROM api_keys WHERE id = ?', args: [key.keyId] })
    expect(status.rows[0]!.status).toBe('expired')
    expect(await t.deps.keys.verify(key.secret)).toEqual({ ok: false, reason: 'expired' })
    await verifyClean(t)
  })
})

describe('actual cost above the estimate (estimator undershoot)', () => {
  const estimate = 10_000_000n
  const overshoot = 5_000_000n

  test('serial calls against a daily cap: spend ends at most one overshoot above the cap, then admission stops', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'daily', 10n * estimate)
    const window = utcDay(t.clock.now()).startMs
    let calls = 0
    for (;;) {
      const result = await admit(t, key.principal, estimate)
      if (!result.ok) {
        expectInsufficientQuota(result)
        break
      }
      calls += 1
      await t.deps.ledger.settle(result.reservation, estimate + overshoot)
      expect(calls).toBeLessThan(20)
    }
    const spent = await keySpentOf(t, key.keyId, window)
    expect(spent).toBeGreaterThan(10n * estimate) // the overshoot is charged, never dropped
    expect(spent).toBeLessThanOrEqual(10n * estimate + overshoot)
    expect(spent).toBe(BigInt(calls) * (estimate + overshoot))
    // Once over, even a one-nano call is refused for the rest of the window.
    t.clock.advance(1001)
    expectInsufficientQuota(await admit(t, key.principal, 1n))
    await verifyClean(t)
  })

  test('serial calls against the org balance: prepaid dips below zero by at most one overshoot', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * estimate)
    const principal = await adminPrincipal(t, org)
    let calls = 0
    for (;;) {
      const result = await admit(t, principal, estimate)
      if (!result.ok) break
      calls += 1
      await t.deps.ledger.settle(result.reservation, estimate + overshoot)
    }
    const prepaid = await prepaidOf(t, org.orgId)
    expect(prepaid).toBeLessThan(0n)
    expect(prepaid).toBeGreaterThanOrEqual(-overshoot)
    expect(prepaid).toBe(10n * estimate - BigInt(calls) * (estimate + overshoot))
    t.clock.advance(1001)
    expectInsufficientQuota(await admit(t, principal, 1n))
    const view = await t.deps.balance(org.orgId)
    expect(view.availableNanos).toBe(prepaid) // never clamped to look like money is left
    await verifyClean(t)
  })

  test('a concurrent burst admits exactly cap / estimate; settling them above estimate overshoots by their overshoots only', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    const key = await createCappedKey(t, org, 'monthly', 10n * estimate)
    const window = utcMonth(t.clock.now()).startMs
    const { admitted, refusedCount } = partition(await burst(key.principal, estimate, 50))
    expect(admitted.length).toBe(10)
    expect(refusedCount).toBe(40)
    await Promise.all(admitted.map(reservation => t.deps.ledger.settle(reservation, estimate + overshoot)))
    const spent = await keySpentOf(t, key.keyId, window)
    // Holds never exceeded the cap; what lies above it is exactly the in-flight overshoot.
    expect(spent).toBe(10n * (estimate + overshoot))
    t.clock.advance(1001)
    const after = partition(await burst(key.principal, estimate, 20))
    expect(after.admitted.length).toBe(0)
    expect(await keySpentOf(t, key.keyId, window)).toBe(spent)
    await verifyClean(t)
  })

  test('closed loop of 16 workers: spend stays within cap + one overshoot per worker, holds within the cap', async () => {
    t = await buildPaygApp()
    const org = await t.createOrg('acme', 10n * USD)
    const cap = 100n * estimate
    const key = await createCappedKey(t, org, 'overall', cap)
    let held = 0n
    let maxHeld = 0n
    const worker = async (): Promise<number> => {
      let calls = 0
      for (;;) {
        const result = await admit(t, key.principal, estimate)
        if (!result.ok) return calls
        held += estimate
        if (held > maxHeld) maxHeld = held
        calls += 1
        await new Promise(resolve => setImmediate(resolve))
        held -= estimate
        await t.deps.ledger.settle(result.reservation, estimate + overshoot)
      }
    }
    const calls = (await Promise.all(Array.from({ length: 16 }, worker))).reduce((sum, n) => sum + n, 0)
    const spent = await keySpentOf(t, key.keyId, 0)
    expect(spent).toBe(BigInt(calls) * (estimate + overshoot))
    expect(spent).toBeGreaterThanOrEqual(cap)
    expect(spent).toBeLessThanOrEqual(cap + 16n * overshoot)
    expect(maxHeld).toBeLessThanOrEqual(cap)
    // The overall cap is used up: the key is expired and verify agrees.
    expect(await t.deps.keys.verify(key.secret)).toEqual({ ok: false, reason: 'expired' })
    await verifyClean(t)
  })
})

test('payg-only config really has no allowance (guards the other tests)', async () => {
  t = await buildTestApp({}, configWith({ plans: PAYG_ONLY }))
  const org = await t.createOrg('acme', 0n)
  const view = await t.deps.balance(org.orgId)
  expect(view.availableNanos).toBe(0n)
  expectInsufficientQuota(await admit(t, await adminPrincipal(t, org), 1n))
})
