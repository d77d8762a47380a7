import { afterEach, expect, test } from 'bun:test'
import type { Statement, StatementResult } from '../../src/billing/executor'
import { ClientExecutor } from '../../src/billing/executor'
import { ApiError } from '../../src/http/errors'
import { utcMonth } from '../../src/lib/clock'
import { buildTestApp, type TestApp } from '../support/harness'
import { USD, adminPrincipal, admitOk, configWith, ledgerOver, prepaidOf, scalar, verifyClean } from './fixtures'

// A settlement past the heartbeat's trust confirms this boot's leases first (LeaseTrust): a
// process paused past instance_stale_after_s must not settle on a lease another instance has
// returned and spent. QA of the first version found two holes, tested here.

let t: TestApp
afterEach(async () => {
  await t?.close()
})

const BASIC = { basic: { monthly_allowance: '1', fusion: false } }

/** A second instance's executor whose heartbeats (and lease grants, which write its instance row too) can be made to fail, or be held after they ran. */
function controlledExecutor(inner: ClientExecutor) {
  const control = { failBeats: 0, hold: undefined as Promise<void> | undefined }
  const isBeat = (statements: readonly Statement[]) => statements.some(statement => /INTO instances/i.test(statement.sql))
  return {
    control,
    executor: {
      async write(statements: readonly Statement[]): Promise<StatementResult[]> {
        if (control.failBeats > 0 && isBeat(statements)) {
          control.failBeats -= 1
          throw new Error('SQLITE_BUSY: database is locked')
        }
        const results = await inner.write(statements)
        // The beat's statements ran; its reply waits (the process paused before handling it).
        if (control.hold !== undefined && isBeat(statements)) await control.hold
        return results
      },
      close: () => inner.close(),
    },
  }
}

test('a settlement whose confirming heartbeats all fail is released, nothing charged, its holds back (before: stuck settling, the hold kept)', async () => {
  t = await buildTestApp({}, configWith({ plans: { payg: { monthly_allowance: '0', fusion: false } } }))
  const org = await t.createOrg('acme', 10n * USD)
  const principal = await adminPrincipal(t, org)
  const { control, executor } = controlledExecutor(new ClientExecutor(t.deps.database.client))
  const b = await ledgerOver(t, executor, 'instance-b')
  try {
    const admitted = await b.ledger.admit({ principal, purpose: 'chat', estimate: 600_000_000n })
    if (!admitted.ok) throw new Error(admitted.error.message)
    // Past the trust, not yet stale to the others; every beat fails (a busy lock, a server's blip).
    t.clock.advance(t.deps.config.ledger.instanceStaleAfterMs - 4_000)
    control.failBeats = 3
    const refused = await b.ledger.settle(admitted.reservation, 500_000_000n).catch(error => error)
    expect(refused).toBeInstanceOf(ApiError)
    expect((refused as ApiError).code).toBe('unavailable')
    expect(admitted.reservation.state).toBe('released')
    expect(b.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)).toBe(0n)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD)
    // One failed beat is tried again: the next settlement confirms and charges.
    const next = await b.ledger.admit({ principal, purpose: 'chat', estimate: 100_000_000n })
    if (!next.ok) throw new Error(next.error.message)
    t.clock.advance(t.deps.config.ledger.instanceStaleAfterMs - 4_000)
    control.failBeats = 1
    expect(await b.ledger.settle(next.reservation, 100_000_000n)).toBe(100_000_000n)
  } finally {
    await b.sweeper.stop()
  }
  await verifyClean(t)
})

test('a settlement that finds a heartbeat from before the pause in flight beats again (before: it trusted that beat, and used the allowance past its grant)', async () => {
  t = await buildTestApp({}, configWith({ plans: BASIC }))
  const org = await t.createOrg('acme', 10n * USD)
  const principal = await adminPrincipal(t, org)
  const period = utcMonth(t.clock.now()).startMs
  const { control, executor } = controlledExecutor(new ClientExecutor(t.deps.database.client))
  const b = await ledgerOver(t, executor, 'instance-b')
  try {
    const admitted = await b.ledger.admit({ principal, purpose: 'chat', estimate: 600_000_000n })
    if (!admitted.ok) throw new Error(admitted.error.message)
    // B's beat runs, then B pauses before handling its reply.
    let resume!: () => void
    control.hold = new Promise<void>(resolve => (resume = resolve))
    const beat = b.sweeper.heartbeat()
    // Meanwhile A takes B for dead, returns its lease and spends the whole allowance.
    t.clock.advance(t.deps.config.ledger.instanceStaleAfterMs + 1_000)
    await t.deps.sweeper.tick()
    await t.deps.ledger.settle(await admitOk(t, principal, USD), USD)
    // B resumes: its settlement joins the old beat, then beats afresh and finds the lease gone.
    const settling = b.ledger.settle(admitted.reservation, 600_000_000n)
    control.hold = undefined
    resume()
    await beat
    await settling
    expect(await scalar(t.deps.database.client, 'SELECT used_nanos FROM allowances WHERE org_id = ? AND period_start_ms = ?', [org.orgId, period])).toBe(USD)
    expect(await prepaidOf(t, org.orgId)).toBe(10n * USD - 600_000_000n)
  } finally {
    await b.sweeper.stop()
  }
  await verifyClean(t)
})
