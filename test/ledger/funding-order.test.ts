import { afterEach, describe, expect, test } from 'bun:test'
import { utcMonth } from '../../src/lib/clock'
import { switchPlan } from '../../src/billing/plan-switch'
import { buildTestApp, type TestApp } from '../support/harness'
import { ClientExecutor } from '../../src/billing/executor'
import { USD, adminPrincipal, admitOk, configWith, countEntries, ledgerOver, prepaidOf, scalar, verifyClean } from './fixtures'

// Funding order (ARCHITECTURE.md §7.3): a call draws on the current period's plan allowance
// first, then on prepaid. Periods are UTC calendar months that roll over lazily.

let t: TestApp
afterEach(async () => {
  await t?.close()
})

const BASIC = { basic: { monthly_allowance: '1', fusion: false } }

function allowanceUsed(periodStartMs: number, orgId: string): Promise<bigint> {
  return scalar(t.deps.database.client, 'SELECT used_nanos FROM allowances WHERE org_id = ? AND period_start_ms = ?', [orgId, periodStartMs])
}

describe('allowance first, then prepaid', () => {
  test('within a period: the allowance pays until it is used up, then prepaid; one entry per source', async () => {
    t = await buildTestApp({}, configWith({ plans: BASIC }))
    const org = await t.createOrg('acme', 10n * USD)
    const principal = await adminPrincipal(t, org)
    const period = utcMonth(t.clock.now()).startMs
    for (let call = 0; call < 9; call += 1) await t.deps.ledger.settle(await admitOk(t, principal, 100_000_000n), 100_000_000n)
    expect(await allowanceUsed(period, org.orgId)).toBe(900_000_000n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD)
    // 0.1 USD of allowance left; a 0.3 USD call takes it and 0.2 USD of prepaid.
    await t.deps.ledger.settle(await admitOk(t, principal, 300_000_000n), 300_000_000n)
    expect(await allowanceUsed(period, org.orgId)).toBe(USD)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 200_000_000n)
    expect(await countEntries(t, "kind = 'settle' AND source = 'allowance'")).toBe(10n)
    expect(await countEntries(t, "kind = 'settle' AND source = 'top_up'")).toBe(1n)
    await verifyClean(t)
  })

  test('a charge above its estimate takes the rest from the allowance while the allowance has room', async () => {
    t = await buildTestApp({}, configWith({ plans: BASIC }))
    // Both kinds of org: with prepaid credit and without (before, the overshoot went to prepaid
    // in both, taking an unfunded org's prepaid below zero with allowance left).
    for (const credit of [10n * USD, 0n]) {
      const org = await t.createOrg(`acme-${credit}`, credit)
      const principal = await adminPrincipal(t, org)
      const period = utcMonth(t.clock.now()).startMs
      // Reserved 1,619 nanos, charged 3,866 (the upstream counted more input than estimated).
      await t.deps.ledger.settle(await admitOk(t, principal, 1_619n), 3_866n)
      expect(await allowanceUsed(period, org.orgId)).toBe(3_866n)
      expect(await prepaidOf(t, org.orgId)).toBe(credit)
      expect((await t.deps.balance(org.orgId)).topUp).toEqual({ remainingNanos: credit, spentNanos: 0n })
    }
    await verifyClean(t)
  })

  test('a charge far above its estimate grows the allowance lease: the allowance left pays before prepaid', async () => {
    // QA: a call reserved ~38M nanos and charged 420M; the lease held 8 calls' worth (304M), and
    // the 116M beyond it went to prepaid (below zero for an org never topped up) with 19.6 USD of
    // allowance unleased in the database.
    t = await buildTestApp({}, configWith({ plans: BASIC }))
    for (const credit of [10n * USD, 0n]) {
      const org = await t.createOrg(`far-${credit}`, credit)
      const principal = await adminPrincipal(t, org)
      const period = utcMonth(t.clock.now()).startMs
      await t.deps.ledger.settle(await admitOk(t, principal, 1_000n), 300_000_000n)
      expect(await allowanceUsed(period, org.orgId)).toBe(300_000_000n)
      expect(await prepaidOf(t, org.orgId)).toBe(credit)
      // What the allowance cannot cover still goes to prepaid: 0.7 USD left, a 0.9 USD charge.
      await t.deps.ledger.settle(await admitOk(t, principal, 1_000n), 900_000_000n)
      expect(await allowanceUsed(period, org.orgId)).toBe(USD)
      expect(await prepaidOf(t, org.orgId)).toBe(credit - 200_000_000n)
    }
    await verifyClean(t)
  })

  test('concurrent overshoots, on one instance and on two, all take the allowance left before prepaid', async () => {
    // Regression QA: 10 settlements of 0.1 USD on 1,000-nano holds at once took 0.2 USD of
    // allowance and 0.8 of prepaid: one growth sized for one excess, and every waiter it woke saw
    // the same free part before any drew on it.
    t = await buildTestApp({}, configWith({ plans: BASIC }))
    for (const credit of [0n, 10n * USD]) {
      const org = await t.createOrg(`burst-${credit}`, credit)
      const principal = await adminPrincipal(t, org)
      const period = utcMonth(t.clock.now()).startMs
      const held = await Promise.all(Array.from({ length: 10 }, () => admitOk(t, principal, 1_000n)))
      await Promise.all(held.map(reservation => t.deps.ledger.settle(reservation, 100_000_000n)))
      expect(await allowanceUsed(period, org.orgId)).toBe(USD)
      expect(await prepaidOf(t, org.orgId)).toBe(credit)
    }
    const org = await t.createOrg('two-instances', 0n)
    const principal = await adminPrincipal(t, org)
    const period = utcMonth(t.clock.now()).startMs
    const b = await ledgerOver(t, new ClientExecutor(t.deps.database.client), 'instance-b')
    try {
      const admitted = await Promise.all(Array.from({ length: 20 }, async (_, index) => {
        const ledger = index % 2 === 0 ? t.deps.ledger : b.ledger
        const result = await ledger.admit({ principal, purpose: 'chat', estimate: 1_000n })
        if (!result.ok) throw new Error(result.error.message)
        return { ledger, reservation: result.reservation }
      }))
      // 20 × 0.06 USD against a 1 USD allowance: 1 USD from it, 0.2 from prepaid.
      await Promise.all(admitted.map(({ ledger, reservation }) => ledger.settle(reservation, 60_000_000n)))
      expect(await allowanceUsed(period, org.orgId)).toBe(USD)
      expect(await prepaidOf(t, org.orgId)).toBe(-200_000_000n)
    } finally {
      await b.sweeper.stop()
    }
    await verifyClean(t)
  })

  test('with the allowance spent, settlements ask for more at most once a recheck interval; allowance come since is drawn on', async () => {
    // Review: with the allowance spent, each settlement more than a second after the last look
    // asked the database again; then (regression QA) asking only for charges above the estimate
    // left a plan upgrade's allowance unspent while calls in flight paid prepaid.
    t = await buildTestApp({}, configWith({ plans: { payg: { monthly_allowance: '0', fusion: false }, pro: { monthly_allowance: '1', fusion: false } } }))
    const org = await t.createOrg('spent', USD)
    const principal = await adminPrincipal(t, org)
    const b = await ledgerOver(t, new ClientExecutor(t.deps.database.client), 'instance-b')
    try {
      const asked: number[] = []
      const submit = b.writer.submit.bind(b.writer)
      b.writer.submit = ((op: Parameters<typeof submit>[0]) => {
        if (op.kind !== 'settle') asked[asked.length - 1]! += 1
        return submit(op)
      }) as typeof b.writer.submit
      const admit = async () => {
        const admitted = await b.ledger.admit({ principal, purpose: 'chat', estimate: 1_000_000n })
        if (!admitted.ok) throw new Error(admitted.error.message)
        return admitted.reservation
      }
      const calls = [await admit(), await admit(), await admit()]
      t.clock.advance(2_000)
      for (const call of calls) {
        asked.push(0)
        await b.ledger.settle(call, 1_000_000n)
      }
      // The first settlement found none (one grant asked, and the room read); the others did not ask.
      expect(asked[0]).toBeGreaterThan(0)
      expect(asked.slice(1)).toEqual([0, 0])
      expect(await prepaidOf(t, org.orgId)).toBe(USD - 3_000_000n)
      // A plan upgrade gives the month 1 USD: a call in flight, charged its estimate, draws on it.
      const inFlight = await admit()
      await switchPlan(t.deps.writer, t.deps.plans, t.clock, org.orgId, 'pro')
      t.clock.advance(2_000)
      await b.ledger.settle(inFlight, 1_000_000n)
      expect(await allowanceUsed(utcMonth(t.clock.now()).startMs, org.orgId)).toBe(1_000_000n)
      expect(await prepaidOf(t, org.orgId)).toBe(USD - 3_000_000n)
    } finally {
      await b.sweeper.stop()
    }
    await verifyClean(t)
  })

  test("an overshoot of a call held wholly on prepaid grows the pool the sweep keeps, never one it dropped", async () => {
    // QA: the call's empty allowance pool was dropped as idle; a plan upgrade made allowance free;
    // the overshoot leased 0.40 USD into the dropped pool, used 0.05, and 0.35 stayed leased where
    // no sweep returns it (calls meanwhile paid prepaid with that allowance unspent).
    t = await buildTestApp({}, configWith({ plans: { payg: { monthly_allowance: '0', fusion: false }, pro: { monthly_allowance: '1', fusion: false } } }))
    const org = await t.createOrg('upgraded', 10n * USD)
    const call = await admitOk(t, await adminPrincipal(t, org), 10_000_000n)
    t.clock.advance(11_000)
    await t.deps.sweeper.tick()
    await switchPlan(t.deps.writer, t.deps.plans, t.clock, org.orgId, 'pro')
    await t.deps.ledger.settle(call, 50_000_000n)
    expect(await allowanceUsed(utcMonth(t.clock.now()).startMs, org.orgId)).toBe(50_000_000n)
    t.clock.advance(11_000)
    await t.deps.sweeper.tick()
    expect(await scalar(t.deps.database.client, 'SELECT COALESCE(SUM(amount_nanos), 0) FROM leases', [])).toBe(0n)
    await verifyClean(t)
  })

  test('allowance a concurrent call gave back pays before prepaid, also for a call held wholly on prepaid', async () => {
    // Found by the billed-routes model (seed 13): three calls in flight; the first held the last of
    // the allowance and settled below its estimate, and the next settlement went wholly to prepaid
    // because its own hold had no allowance part, leaving allowance free in the lease.
    t = await buildTestApp({}, configWith({ plans: { basic: { monthly_allowance: '0.0003', fusion: false } } }))
    const org = await t.createOrg('acme', USD)
    const principal = await adminPrincipal(t, org)
    const period = utcMonth(t.clock.now()).startMs
    const first = await admitOk(t, principal, 300_000n) // the whole allowance
    const second = await admitOk(t, principal, 100_000n) // nothing left of it: held on prepaid
    await t.deps.ledger.settle(first, 200_000n) // 100,000 of allowance free again
    await t.deps.ledger.settle(second, 100_000n)
    expect(await allowanceUsed(period, org.orgId)).toBe(300_000n)
    expect(await prepaidOf(t, org.orgId)).toBe(USD)
    await verifyClean(t)
  })

  /**
   * January 31st, 23:00 UTC on the basic plan with 10 USD prepaid: the allowance runs out, and a
   * call is paid from prepaid (which leases a slice of it).
   */
  async function januaryOnPrepaid() {
    t = await buildTestApp({}, configWith({ plans: BASIC }))
    t.clock.set(Date.UTC(2026, 0, 31, 23, 0, 0))
    const org = await t.createOrg('acme', 10n * USD)
    const principal = await adminPrincipal(t, org)
    await t.deps.ledger.settle(await admitOk(t, principal, USD), USD)
    await t.deps.ledger.settle(await admitOk(t, principal, 10_000_000n), 10_000_000n)
    return { org, principal }
  }

  test('a new month: its allowance pays before prepaid money still leased from the month before', async () => {
    const { org, principal } = await januaryOnPrepaid()
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 10_000_000n)
    const leased = await scalar(t.deps.database.client, 'SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?', [org.orgId])
    expect(leased).toBeGreaterThan(0n) // the in-memory lease outlives the month

    // February 1st, 00:00:30 UTC (traffic kept the lease busy, so nothing went back idle).
    t.clock.set(Date.UTC(2026, 1, 1, 0, 0, 30))
    const february = utcMonth(t.clock.now()).startMs
    await t.deps.ledger.settle(await admitOk(t, principal, 10_000_000n), 10_000_000n)
    expect(await allowanceUsed(february, org.orgId)).toBe(10_000_000n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 10_000_000n)
    const view = await t.deps.balance(org.orgId)
    expect(view.allowanceLeftNanos).toBe(USD - 10_000_000n)
    expect(view.topUp).toEqual({ remainingNanos: 10n * USD - 10_000_000n, spentNanos: 10_000_000n })
    await verifyClean(t)
  })

  test('a new month with a partly used allowance lease: the allowance is topped up before prepaid is touched', async () => {
    const { org, principal } = await januaryOnPrepaid()
    t.clock.set(Date.UTC(2026, 1, 1, 0, 0, 30))
    const february = utcMonth(t.clock.now()).startMs
    // Many small calls: the allowance lease is topped up in slices as it drains.
    for (let call = 0; call < 40; call += 1) await t.deps.ledger.settle(await admitOk(t, principal, 20_000_000n), 20_000_000n)
    expect(await allowanceUsed(february, org.orgId)).toBe(800_000_000n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 10_000_000n)
    await verifyClean(t)
  })
})

describe("an instance's allowance lease returned while it was paused", () => {
  test('its call in flight settles on prepaid (which may dip below zero), never on allowance another instance spent', async () => {
    // QA: instance B leased the month's allowance and paused; A's sweep returned the lease and A
    // spent the allowance; B's call then settled 0.6 USD on the allowance (used 1.6 of 1.0
    // granted), prepaid untouched, and `ledger verify` failed for that month from then on.
    t = await buildTestApp({}, configWith({ plans: BASIC }))
    const org = await t.createOrg('acme', 10n * USD)
    const principal = await adminPrincipal(t, org)
    const period = utcMonth(t.clock.now()).startMs
    const b = await ledgerOver(t, new ClientExecutor(t.deps.database.client), 'instance-b')
    try {
      const admitted = await b.ledger.admit({ principal, purpose: 'chat', estimate: 600_000_000n })
      if (!admitted.ok) throw new Error(admitted.error.message)
      // B is taken for dead: A's sweep returns its lease, and A spends the whole allowance.
      t.clock.advance(t.deps.config.ledger.instanceStaleAfterMs + 1_000)
      await t.deps.sweeper.tick()
      await t.deps.ledger.settle(await admitOk(t, principal, USD), USD)
      expect(await allowanceUsed(period, org.orgId)).toBe(USD)
      // B wakes and its call settles before its timer's heartbeat has run (QA: the first fix
      // held only after a heartbeat had found the lease gone): its last beat is too old to trust,
      // so the settlement beats first.
      await b.ledger.settle(admitted.reservation, 600_000_000n)
      expect(await allowanceUsed(period, org.orgId)).toBe(USD)
      expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 600_000_000n)
      await verifyClean(t)
    } finally {
      await b.sweeper.stop()
    }
  })

  test("a settlement within the heartbeat's trust does not wait for one; one past it confirms first", async () => {
    t = await buildTestApp({}, configWith({ plans: BASIC }))
    const org = await t.createOrg('acme', 10n * USD)
    const principal = await adminPrincipal(t, org)
    const trust = t.deps.ledger.leaseTrust!
    const confirm = trust.confirm.bind(trust)
    let confirmations = 0
    trust.confirm = asOf => ((confirmations += 1), confirm(asOf))
    const [first, second] = [await admitOk(t, principal, 100_000_000n), await admitOk(t, principal, 100_000_000n)]
    await t.deps.ledger.settle(first, 100_000_000n)
    expect(confirmations).toBe(0)
    // A call that ran past the trust (a pause, or a long stream on an instance whose timer stalled).
    t.clock.advance(t.deps.config.ledger.instanceStaleAfterMs)
    await t.deps.ledger.settle(second, 100_000_000n)
    expect(confirmations).toBe(1)
  })
})
