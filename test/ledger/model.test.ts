import { expect, test } from 'bun:test'
import fc from 'fast-check'
import type { Reservation } from '../../src/billing/ledger'
import type { SpendCapPeriod } from '../../src/db/schema'
import { utcDay, utcMonth } from '../../src/lib/clock'
import { buildTestApp, type TestApp } from '../support/harness'
import { configWith, scalar, verifyClean } from './fixtures'

// L1 conservation (SECURITY-NOTES.md §3) as a property: random sequences of top-ups, admissions,
// settlements below / at / above the estimate, releases, clock moves across UTC day and month
// boundaries (cap windows, allowance periods), plan switches and sweeps run against the real
// ledger and against a small in-memory model of ARCHITECTURE.md §7.3–7.4. After every step the
// balance view, running totals and key state must match the model; at the end (and at random
// points) `svc ledger verify`'s checks must find nothing.
//
// The model knows nothing about leases except one observable: how much the database has leased
// to this boot. An overshoot (actual > estimate) may take a scope's free part below zero while
// this boot still holds leased money, which it may spend; the model reads that amount back.

const PLANS = {
  pro: { monthly_allowance: '0.2', fusion: true },
  basic: { monthly_allowance: '0.05', fusion: false },
  free: { monthly_allowance: '0', fusion: false },
} as const
type PlanId = keyof typeof PLANS
const PLAN_ALLOWANCE: Record<PlanId, bigint> = { pro: 200_000_000n, basic: 50_000_000n, free: 0n }
const PLAN_IDS = Object.keys(PLANS) as PlanId[]

/** Keys of the org: index 0 is the uncapped admin key. */
const KEY_CAPS: Array<{ period: SpendCapPeriod; nanos: bigint } | null> = [
  null,
  { period: 'daily', nanos: 100_000_000n },
  { period: 'monthly', nanos: 150_000_000n },
  { period: 'overall', nanos: 250_000_000n },
]

type Command =
  | { kind: 'admit'; key: number; estimate: bigint }
  | { kind: 'settle'; pick: number; mode: 'below' | 'exact' | 'above'; delta: bigint }
  | { kind: 'release'; pick: number }
  | { kind: 'topUp'; amount: bigint }
  | { kind: 'advance'; ms: number }
  | { kind: 'boundary'; unit: 'day' | 'month'; edge: 'before' | 'at' }
  | { kind: 'plan'; plan: PlanId }
  | { kind: 'sweep' }
  | { kind: 'verify' }

const nanos = (min: bigint, max: bigint) => fc.bigInt({ min, max })
const commandArbitrary: fc.Arbitrary<Command> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('admit' as const), key: fc.integer({ min: 0, max: 3 }), estimate: nanos(1n, 60_000_000n) }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('settle' as const), pick: fc.nat(), mode: fc.constantFrom('below' as const, 'exact' as const, 'above' as const),
      delta: fc.oneof(nanos(1n, 10n), nanos(1n, 40_000_000n)),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('topUp' as const), amount: nanos(1n, 200_000_000n) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 1, max: 20_000 }), fc.integer({ min: 1, max: 12 * 3_600_000 })) }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('boundary' as const), unit: fc.constantFrom('day' as const, 'month' as const), edge: fc.constantFrom('before' as const, 'at' as const) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('plan' as const), plan: fc.constantFrom(...PLAN_IDS) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'sweep' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'verify' as const }) },
)

// Start instants near the interesting boundaries: a month end, leap day 2028, a year end.
const START_INSTANTS = [Date.UTC(2026, 0, 31, 23, 0, 0), Date.UTC(2028, 1, 28, 22, 0, 0), Date.UTC(2026, 11, 31, 23, 59, 0), Date.UTC(2026, 5, 15, 12, 0, 0)]

interface OpenCall {
  reservation: Reservation
  key: number
  estimate: bigint
  fromAllowance: bigint
  fromPrepaid: bigint
  periodStartMs: number
  windowStartMs: number | null
}

/** The in-memory model of the org's money. */
class Model {
  plan: PlanId = 'pro'
  prepaid = 0n
  credited = 0n
  topUpSpent = 0n
  readonly periods = new Map<number, { granted: bigint; used: bigint }>()
  readonly keySpent = new Map<string, bigint>()
  readonly keyExpired = KEY_CAPS.map(() => false)
  open: OpenCall[] = []
  /** Until when the ledger remembers the allowance as empty (a settlement's growth found less than it needed). */
  allowanceEmptyUntilMs = 0

  heldAllowance(periodStartMs: number): bigint {
    return this.open.filter(call => call.periodStartMs === periodStartMs).reduce((sum, call) => sum + call.fromAllowance, 0n)
  }
  heldPrepaid(): bigint {
    return this.open.reduce((sum, call) => sum + call.fromPrepaid, 0n)
  }
  heldKey(key: number, windowStartMs: number): bigint {
    return this.open.filter(call => call.key === key && call.windowStartMs === windowStartMs).reduce((sum, call) => sum + call.estimate, 0n)
  }
  spent(key: number, windowStartMs: number): bigint {
    return this.keySpent.get(`${key}|${windowStartMs}`) ?? 0n
  }
  /** Allowance left in a period: its row if it exists, else the current plan's (the row appears on first use). */
  allowanceLeft(periodStartMs: number): bigint {
    const period = this.periods.get(periodStartMs)
    return period ? period.granted - period.used : PLAN_ALLOWANCE[this.plan]
  }
}

function capWindowStart(period: SpendCapPeriod, nowMs: number): number {
  if (period === 'daily') return utcDay(nowMs).startMs
  if (period === 'monthly') return utcMonth(nowMs).startMs
  return 0
}

const max0 = (value: bigint) => (value > 0n ? value : 0n)
const min = (a: bigint, b: bigint) => (a < b ? a : b)

async function runScenario(startMs: number, initialCredit: bigint, commands: Command[]): Promise<void> {
  const t: TestApp = await buildTestApp({}, configWith({ plans: PLANS }))
  try {
    t.clock.set(startMs)
    const client = t.deps.database.client
    const org = await t.createOrg('model', initialCredit)
    const model = new Model()
    model.prepaid = initialCredit
    model.credited = initialCredit
    const keys: Array<{ secret: string; id: string }> = [{ secret: org.adminKey, id: org.adminKeyId }]
    for (const cap of KEY_CAPS.slice(1)) {
      const { key, secret } = await t.deps.keys.create({ orgId: org.orgId, userId: org.ownerUserId, name: 'capped', admin: false, expiresAtMs: null, spendCap: cap })
      keys.push({ secret, id: key.id })
    }
    const leasedFor = (sql: string, args: Array<string | number>) => scalar(client, sql, args)

    const check = async (step: number, command: Command | { kind: 'final' }) => {
      const where = `step ${step} (${JSON.stringify(command, (_, v) => (typeof v === 'bigint' ? `${v}n` : v))})`
      const now = t.clock.now()
      const month = utcMonth(now).startMs
      const view = await t.deps.balance(org.orgId)
      const expected = {
        available: max0(model.allowanceLeft(month)) + model.prepaid,
        prepaid: model.prepaid,
        topUp: { remainingNanos: model.credited - model.topUpSpent, spentNanos: model.topUpSpent },
      }
      expect({ where, available: view.availableNanos, prepaid: view.prepaidNanos, topUp: view.topUp }).toEqual({ where, ...expected })
      const periods = await client.execute({ sql: 'SELECT period_start_ms, granted_nanos, used_nanos FROM allowances WHERE org_id = ?', args: [org.orgId] })
      const actualPeriods = Object.fromEntries(periods.rows.map(row => [String(row.period_start_ms), `${row.granted_nanos}/${row.used_nanos}`]))
      const modelPeriods = Object.fromEntries([...model.periods].map(([start, period]) => [String(start), `${period.granted}/${period.used}`]))
      expect({ where, periods: actualPeriods }).toEqual({ where, periods: modelPeriods })
      const spend = await client.execute('SELECT key_id, window_start_ms, spent_nanos FROM key_spend WHERE spent_nanos <> 0')
      const actualSpend = Object.fromEntries(spend.rows.map(row => [`${keys.findIndex(key => key.id === row.key_id)}|${row.window_start_ms}`, String(row.spent_nanos)]))
      const modelSpend = Object.fromEntries([...model.keySpent].filter(([, value]) => value !== 0n).map(([id, value]) => [id, String(value)]))
      expect({ where, spend: actualSpend }).toEqual({ where, spend: modelSpend })
      const statuses = await client.execute({ sql: 'SELECT id, status FROM api_keys WHERE org_id = ?', args: [org.orgId] })
      for (const [index, key] of keys.entries()) {
        const status = statuses.rows.find(row => row.id === key.id)!.status
        expect({ where, key: index, status }).toEqual({ where, key: index, status: model.keyExpired[index] ? 'expired' : 'active' })
      }
    }

    /** Settles a call (already out of model.open) in the ledger and in the model. */
    const settle = async (call: OpenCall, actual: bigint) => {
      // Allowance first, overshoot included: a charge above the call's allowance hold takes the
      // free part of this boot's allowance lease (leased, less the other calls' holds) before any
      // prepaid. A call held on prepaid alone draws it too (allowance a concurrent call gave back).
      // Beyond that free part, the lease grows by what the period has left unleased (all of it, if
      // less than the excess: then the scope is remembered as empty for the recheck interval).
      const allowanceLeased = await leasedFor('SELECT leased_nanos FROM allowances WHERE org_id = ? AND period_start_ms = ?', [org.orgId, call.periodStartMs])
      const allowanceFree = max0(allowanceLeased - model.heldAllowance(call.periodStartMs) - call.fromAllowance)
      const now = t.clock.now()
      const grows = actual > call.fromAllowance + allowanceFree && now >= model.allowanceEmptyUntilMs
      const unleased = grows ? max0(model.allowanceLeft(call.periodStartMs) - allowanceLeased) : 0n
      if (grows && actual > call.fromAllowance + allowanceFree + unleased) model.allowanceEmptyUntilMs = now + 1000
      await t.deps.ledger.settle(call.reservation, actual)
      const fromAllowance = min(actual, call.fromAllowance + allowanceFree + unleased)
      model.periods.get(call.periodStartMs)!.used += fromAllowance
      model.prepaid -= actual - fromAllowance
      model.topUpSpent += actual - fromAllowance
      const cap = KEY_CAPS[call.key]
      if (cap) {
        const id = `${call.key}|${call.windowStartMs}`
        model.keySpent.set(id, (model.keySpent.get(id) ?? 0n) + actual)
        if (cap.period === 'overall' && model.keySpent.get(id)! >= cap.nanos) model.keyExpired[call.key] = true
      }
    }

    for (const [step, command] of commands.entries()) {
      const now = t.clock.now()
      switch (command.kind) {
        case 'admit': {
          const verified = await t.deps.keys.verify(keys[command.key]!.secret)
          if (model.keyExpired[command.key]) {
            expect(verified).toEqual({ ok: false, reason: 'expired' })
            break
          }
          if (!verified.ok) throw new Error(`step ${step}: key ${command.key} should verify, got ${verified.reason}`)
          const estimate = command.estimate
          const cap = KEY_CAPS[command.key]!
          const windowStartMs = cap ? capWindowStart(cap.period, now) : null
          // The key's cap window first: a refused cap touches nothing else.
          let keyRoom = 0n
          if (cap) {
            const leased = await leasedFor('SELECT leased_nanos FROM key_spend WHERE key_id = ? AND window_start_ms = ?', [keys[command.key]!.id, windowStartMs!])
            const held = model.heldKey(command.key, windowStartMs!)
            keyRoom = leased - held + max0(cap.nanos - model.spent(command.key, windowStartMs!) - leased)
          }
          const result = await t.deps.ledger.admit({ principal: verified.principal, purpose: 'chat', estimate })
          if (cap && keyRoom < estimate) {
            if (result.ok) throw new Error(`step ${step}: admitted past the ${cap.period} cap (room ${keyRoom}, estimate ${estimate})`)
            expect(result.error.code).toBe('insufficient_quota')
            expect(result.error.message).toContain(`${cap.period} spend cap`)
            // Only a cap its spending left short stops the key until the reset; one that calls in
            // flight hold is retried shortly (this boot holds every lease: 2 s, not another
            // instance's 10). Every admission here asks the database afresh (see below).
            const spent = cap.nanos - model.spent(command.key, windowStartMs!) < estimate
            expect(result.error.headers?.['x-should-retry']).toBe(spent ? undefined : 'true')
            if (!spent) expect(result.error.headers?.['retry-after']).toBe('2')
            else if (cap.period !== 'overall') {
              const endMs = cap.period === 'daily' ? utcDay(now).endMs : utcMonth(now).endMs
              expect(result.error.headers?.['retry-after']).toBe(String(Math.max(1, Math.ceil((endMs - now) / 1000))))
            }
            break
          }
          // Funding: the month's allowance first (its row appears with the current plan), then prepaid.
          const month = utcMonth(now).startMs
          if (!model.periods.has(month)) model.periods.set(month, { granted: PLAN_ALLOWANCE[model.plan], used: 0n })
          const allowanceRoom = max0(model.allowanceLeft(month) - model.heldAllowance(month))
          const prepaidLeased = await leasedFor('SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?', [org.orgId])
          const prepaidRoom = prepaidLeased - model.heldPrepaid() + max0(model.prepaid - prepaidLeased)
          if (allowanceRoom + prepaidRoom < estimate) {
            if (result.ok) throw new Error(`step ${step}: admitted beyond funds (allowance ${allowanceRoom}, prepaid ${prepaidRoom}, estimate ${estimate})`)
            expect(result.error.code).toBe('insufficient_quota')
            expect(result.error.message).toContain('insufficient funds')
            const spent = max0(model.allowanceLeft(month)) + model.prepaid < estimate
            expect(result.error.headers?.['x-should-retry']).toBe(spent ? undefined : 'true')
            expect(result.error.headers?.['retry-after']).toBe(spent ? undefined : '2')
            break
          }
          if (!result.ok) throw new Error(`step ${step}: refused (${result.error.message}) with allowance ${allowanceRoom}, prepaid ${prepaidRoom}, key room ${keyRoom}`)
          const fromAllowance = min(estimate, allowanceRoom)
          model.open.push({ reservation: result.reservation, key: command.key, estimate, fromAllowance, fromPrepaid: estimate - fromAllowance, periodStartMs: month, windowStartMs })
          break
        }
        case 'settle': {
          if (model.open.length === 0) break
          const call = model.open.splice(command.pick % model.open.length, 1)[0]!
          const actual = command.mode === 'exact' ? call.estimate : command.mode === 'above' ? call.estimate + command.delta : max0(call.estimate - command.delta)
          await settle(call, actual)
          break
        }
        case 'release': {
          if (model.open.length === 0) break
          const call = model.open.splice(command.pick % model.open.length, 1)[0]!
          t.deps.ledger.release(call.reservation)
          break
        }
        case 'topUp':
          await t.deps.ledger.topUp({ orgId: org.orgId, amount: command.amount })
          model.prepaid += command.amount
          model.credited += command.amount
          break
        case 'advance':
          t.clock.advance(command.ms)
          break
        case 'boundary': {
          // The next UTC midnight (or first of the month) strictly ahead, or the millisecond before it.
          const next = command.unit === 'day' ? utcDay(now + 2).endMs : utcMonth(now + 2).endMs
          t.clock.set(command.edge === 'at' ? next : next - 1)
          break
        }
        case 'plan':
          await client.execute({ sql: 'UPDATE orgs SET plan_id = ? WHERE id = ?', args: [command.plan, org.orgId] })
          model.plan = command.plan
          break
        case 'sweep':
          await t.deps.sweeper.tick()
          break
        case 'verify':
          await verifyClean(t)
          break
      }
      // Past the ledger's "nothing free" recheck interval (1 s), so the next admission asks the
      // database afresh (a refusal is otherwise remembered that long, even across a top-up).
      if (command.kind === 'admit') t.clock.advance(1001)
      await check(step, command)
    }

    // Quiescence: every open call ends (alternately settled and released), then verify.
    for (let index = 0; model.open.length > 0; index += 1) {
      const call = model.open.shift()!
      if (index % 2 === 0) t.deps.ledger.release(call.reservation)
      else await settle(call, call.estimate)
    }
    model.open = []
    await check(commands.length, { kind: 'final' })
    await verifyClean(t)
    // Nothing is held any more: a sweep long after returns every lease.
    t.clock.advance(60_000)
    await t.deps.sweeper.tick()
    expect(await scalar(client, 'SELECT COALESCE(SUM(amount_nanos), 0) FROM leases')).toBe(0n)
    await verifyClean(t)
  } finally {
    await t.close()
  }
}

test('ledger vs model: random top-ups, admissions, settlements, releases, boundaries and plan switches', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...START_INSTANTS),
      fc.constantFrom(0n, 30_000_000n, 100_000_000n, 1_000_000_000n),
      fc.array(commandArbitrary, { minLength: 5, maxLength: 45 }),
      runScenario,
    ),
    { numRuns: 120 },
  )
}, 60_000)
