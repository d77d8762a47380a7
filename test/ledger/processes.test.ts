import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { verifyLedger } from '../../src/billing/verify'
import { loadConfig } from '../../src/config/load'
import { migrateDatabase } from '../../src/db/client'
import { createDeps, type Deps } from '../../src/deps'
import { silentLogger } from '../../src/observability/logger'
import { FakeClock } from '../support/fake-clock'
import { PAYG_ONLY, USD } from './fixtures'

// L12 and L6-lite (SECURITY-NOTES.md §3, ARCHITECTURE.md §7.5, §11): separate processes share
// one local `file:` database, each with its own SVC_INSTANCE_ID, NativeExecutor writer and
// leases. Together they never admit beyond the org balance or a key cap; a process killed with
// a lease has it returned, at its own restart or by another instance's sweep once its
// heartbeat is stale, and the ledger then verifies clean with the balance whole.

const CHILD = join(import.meta.dir, '..', 'support', 'ledger-child.ts')
const STALE_AFTER_S = 15

let directory: string
let env: Record<string, string>
const opened: Deps[] = []

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), 'svc-ledger-processes-'))
  const configPath = join(directory, 'config.json')
  writeFileSync(configPath, JSON.stringify({ plans: PAYG_ONLY, ledger: { instance_stale_after_s: STALE_AFTER_S } }))
  env = { DATABASE_URL: `file:${join(directory, 'svc.db')}`, SVC_CONFIG: configPath }
})
afterEach(async () => {
  for (const deps of opened.splice(0)) await deps.close().catch(() => {})
  rmSync(directory, { recursive: true, force: true })
})

/** Deps of this (test) process on the shared file, as one more instance. */
async function openInstance(instanceId: string, clock?: FakeClock): Promise<Deps> {
  const deps = await createDeps(loadConfig({ ...env, SVC_INSTANCE_ID: instanceId }), { logger: silentLogger, clock })
  opened.push(deps)
  return deps
}

async function closeInstance(deps: Deps): Promise<void> {
  opened.splice(opened.indexOf(deps), 1)
  await deps.close()
}

/** Creates the org, its admin key and a capped key, funded with `credit`; the setup instance then closes. */
async function seed(credit: bigint, cap: { period: 'daily' | 'monthly' | 'overall'; nanos: bigint }) {
  const deps = await openInstance('seed')
  await migrateDatabase(deps.database)
  const { org, ownerUserId } = await deps.orgs.createOrg({ name: 'shared', planId: deps.config.defaultPlanId })
  const admin = await deps.keys.create({ orgId: org.id, userId: ownerUserId, name: 'admin', admin: true, expiresAtMs: null, spendCap: null })
  const capped = await deps.keys.create({ orgId: org.id, userId: ownerUserId, name: 'capped', admin: false, expiresAtMs: null, spendCap: cap })
  await deps.ledger.topUp({ orgId: org.id, amount: credit })
  await closeInstance(deps)
  return { orgId: org.id, admin: { secret: admin.secret, id: admin.key.id }, capped: { secret: capped.secret, id: capped.key.id } }
}

function spawnChild(mode: 'hammer' | 'hang', instanceId: string, extra: Record<string, string>) {
  return Bun.spawn([process.execPath, CHILD, mode], {
    cwd: join(import.meta.dir, '..', '..'),
    env: { ...process.env, ...env, SVC_INSTANCE_ID: instanceId, ...extra },
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'pipe',
  })
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader()
  const decoder = new TextDecoder()
  let text = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return text + decoder.decode()
    text += decoder.decode(value, { stream: true })
  }
}

async function finished(child: ReturnType<typeof spawnChild>, before = ''): Promise<{ code: number; stdout: string; stderr: string }> {
  const [stdout, stderr, code] = await Promise.all([readAll(child.stdout), readAll(child.stderr), child.exited])
  return { code, stdout: before + stdout, stderr }
}

/** The child's first stdout line, and whatever followed it in the same read. */
async function firstLine(child: ReturnType<typeof spawnChild>): Promise<{ line: string; rest: string }> {
  const reader = child.stdout.getReader()
  const decoder = new TextDecoder()
  let text = ''
  try {
    while (!text.includes('\n')) {
      const { value, done } = await reader.read()
      if (done) throw new Error(`child exited early: ${text} ${await readAll(child.stderr)}`)
      text += decoder.decode(value, { stream: true })
    }
  } finally {
    reader.releaseLock()
  }
  const newline = text.indexOf('\n')
  return { line: text.slice(0, newline), rest: text.slice(newline + 1) }
}

/** Reads the child's stdout until a line starting with `prefix` appears (the child is then left running). */
async function lineStartingWith(child: ReturnType<typeof spawnChild>, prefix: string): Promise<string> {
  const reader = child.stdout.getReader()
  const decoder = new TextDecoder()
  let text = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) throw new Error(`child exited before printing ${prefix}: ${text} ${await readAll(child.stderr)}`)
    text += decoder.decode(value, { stream: true })
    const line = text.split('\n').find(candidate => candidate.startsWith(prefix))
    if (line !== undefined && text.includes('\n')) {
      reader.releaseLock()
      return line
    }
  }
}

async function scalar(deps: Deps, sql: string, args: Array<string | number> = []): Promise<bigint> {
  const result = await deps.database.client.execute({ sql, args })
  const value = result.rows[0]?.[result.columns[0]!]
  return value === undefined || value === null ? 0n : BigInt(value as bigint)
}

describe('two processes on one database file (L12)', () => {
  const WORKERS = 6
  const scenarios = [
    { name: 'daily cap, actual = estimate', credit: USD, cap: { period: 'daily' as const, nanos: 400_000_000n }, estimate: 2_000_000n, actual: 2_000_000n },
    // Credit for ~480 calls: with 160 the first process to start could spend it all (~30 ms)
    // before the second began, under a loaded suite, and the run tested no competition.
    { name: 'overall cap, actual 25% above the estimate', credit: 1_200_000_000n, cap: { period: 'overall' as const, nanos: 100_000_000n }, estimate: 2_000_000n, actual: 2_500_000n },
  ]
  for (const scenario of scenarios) {
    test(`hammering one org balance and one key cap together (${scenario.name}): never beyond either; verify is clean after both close`, async () => {
      const { credit, cap, estimate, actual } = scenario
      const overshoot = actual - estimate
      // Each call in flight when a scope ran out may overshoot once: two processes × two keys × workers.
      const inFlight = 2n * 2n * BigInt(WORKERS)
      const seeded = await seed(credit, cap)
      const extra = { LEDGER_KEYS: `${seeded.capped.secret},${seeded.admin.secret}`, LEDGER_WORKERS: String(WORKERS), LEDGER_ESTIMATE: String(estimate), LEDGER_ACTUAL: String(actual) }
      const children = [spawnChild('hammer', 'proc-a', { ...extra, LEDGER_WAIT_FOR_GO: '1' }), spawnChild('hammer', 'proc-b', { ...extra, LEDGER_WAIT_FOR_GO: '1' })]
      // Both are migrated, swept and verified before either spends: then they start together.
      const readers = await Promise.all(children.map(child => firstLine(child)))
      expect(readers.map(reader => reader.line)).toEqual(['READY', 'READY'])
      for (const child of children) {
        child.stdin.write('go\n')
        child.stdin.end()
      }
      const results = await Promise.all(children.map((child, index) => finished(child, readers[index]!.rest)))

      const reports = results.map(result => {
        if (result.code !== 0) throw new Error(`a ledger child exited with ${result.code}: ${result.stderr}`)
        return JSON.parse(result.stdout.trim().split('\n').pop()!) as { instance: string; calls: number; refusals: Record<string, number>; charged: Record<string, string> }
      })
    for (const report of reports) {
        expect(report.calls).toBeGreaterThan(0) // both processes really competed
        // Refused for money or cap only (401 once the overall cap expired the key): never a 503 from lock contention.
        for (const code of Object.keys(report.refusals)) expect(['insufficient_quota', 'unauthorized']).toContain(code)
      }
      const chargedTo = (keyId: string) => reports.reduce((sum, report) => sum + BigInt(report.charged[keyId] ?? '0'), 0n)

      const deps = await openInstance('auditor')
      await deps.sweeper.start()
      const prepaid = await scalar(deps, 'SELECT prepaid_nanos FROM balances WHERE org_id = ?', [seeded.orgId])
      const settled = await scalar(deps, "SELECT COALESCE(SUM(amount_nanos), 0) FROM ledger_entries WHERE kind = 'settle' AND org_id = ?", [seeded.orgId])
      const cappedSpent = await scalar(deps, 'SELECT COALESCE(SUM(spent_nanos), 0) FROM key_spend WHERE key_id = ?', [seeded.capped.id])
      // What the processes say they charged is exactly what the ledger holds: nothing lost, nothing twice.
      expect(settled).toBe(chargedTo(seeded.capped.id) + chargedTo(seeded.admin.id))
      expect(cappedSpent).toBe(chargedTo(seeded.capped.id))
      expect(prepaid).toBe(credit - settled)
      // Holds never exceeded what was there: beyond it lies only the overshoot of calls in flight.
      expect(settled).toBeLessThanOrEqual(credit + inFlight * overshoot)
      expect(cappedSpent).toBeLessThanOrEqual(cap.nanos + inFlight * overshoot)
      expect(prepaid).toBeGreaterThanOrEqual(-inFlight * overshoot)
      if (overshoot === 0n) {
        expect(settled).toBeLessThanOrEqual(credit)
        expect(cappedSpent).toBeLessThanOrEqual(cap.nanos)
      }
      if (cap.period === 'overall') {
        // Expired exactly when the cap is used up (verify's check 4 says the same).
        const verified = await deps.keys.verify(seeded.capped.secret)
        expect(verified.ok).toBe(cappedSpent < cap.nanos)
      }
      // Both closed cleanly: every lease went back.
      expect(await scalar(deps, 'SELECT COUNT(*) FROM leases')).toBe(0n)
      expect(await verifyLedger(deps.database.client, { nowMs: Date.now(), staleAfterMs: STALE_AFTER_S * 1000 })).toEqual([])

      // Nothing is stranded: what the balance shows as available is admissible, exactly.
      const available = (await deps.balance(seeded.orgId)).availableNanos
      expect(available).toBe(prepaid)
      if (available > 0n) {
        const verified = await deps.keys.verify(seeded.admin.secret)
        if (!verified.ok) throw new Error('admin key does not verify')
        const last = await deps.ledger.admit({ principal: verified.principal, purpose: 'chat', estimate: available })
        if (!last.ok) throw new Error(`the remaining ${available} nanos are not admissible: ${last.error.message}`)
        await deps.ledger.settle(last.reservation, available)
        expect(await scalar(deps, 'SELECT prepaid_nanos FROM balances WHERE org_id = ?', [seeded.orgId])).toBe(0n)
      }
      await closeInstance(deps)
      const check = await openInstance('auditor-2')
      expect(await verifyLedger(check.database.client, { nowMs: Date.now(), staleAfterMs: STALE_AFTER_S * 1000 })).toEqual([])
    }, 30_000)
  }
})

describe('two apps on one database file without SVC_INSTANCE_ID', () => {
  test("the second one's boot leaves the first one's live leases alone", async () => {
    // Both would take the id kept beside the file; a boot returns every lease of its instance's
    // earlier boots, so the second took the first's live lease and the organization could spend
    // it twice (QA: 18 calls admitted against funds for 9). The second now runs under a fresh id.
    const seeded = await seed(USD, { period: 'overall', nanos: USD })
    const first = await createDeps(loadConfig(env), { logger: silentLogger })
    opened.push(first)
    await first.sweeper.start()
    const verified = await first.keys.verify(seeded.admin.secret)
    if (!verified.ok) throw new Error('the admin key should verify')
    const admitted = await first.ledger.admit({ principal: verified.principal, purpose: 'chat', estimate: 30_000_000n })
    if (!admitted.ok) throw new Error('the first app should admit')
    const leased = await scalar(first, 'SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE boot_id = ?', [first.identity.bootId])
    expect(leased).toBeGreaterThanOrEqual(30_000_000n)

    const second = await createDeps(loadConfig(env), { logger: silentLogger })
    opened.push(second)
    expect(second.identity.instanceId).not.toBe(first.identity.instanceId)
    await second.sweeper.start()
    expect(second.sweeper.returned).toBe(0)
    expect(await scalar(second, 'SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE boot_id = ?', [first.identity.bootId])).toBe(leased)

    await first.ledger.settle(admitted.reservation, 30_000_000n)
    await closeInstance(second)
    await closeInstance(first)
  }, 30_000)
})

describe('a process killed while holding a lease (L6-lite)', () => {
  async function crashWithLease(instanceId: string, seeded: Awaited<ReturnType<typeof seed>>) {
    const child = spawnChild('hang', instanceId, { LEDGER_KEYS: seeded.admin.secret, LEDGER_ESTIMATE: '30000000' })
    const line = await lineStartingWith(child, 'ADMITTED ')
    const { boot } = JSON.parse(line.slice('ADMITTED '.length)) as { boot: string }
    child.kill('SIGKILL')
    expect(await child.exited).not.toBe(0)
    expect(child.signalCode).toBe('SIGKILL')
    return boot
  }

  test('a restart with the same SVC_INSTANCE_ID returns the dead boot’s lease at boot', async () => {
    const seeded = await seed(USD, { period: 'overall', nanos: USD })
    const boot = await crashWithLease('crashy', seeded)

    const observer = await openInstance('observer')
    const stuck = await scalar(observer, 'SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE instance_id = ? AND boot_id = ?', ['crashy', boot])
    expect(stuck).toBeGreaterThanOrEqual(30_000_000n)
    // Leased money is still the organization's; the hold died with the process, unbilled.
    expect((await observer.balance(seeded.orgId)).availableNanos).toBe(USD)
    await closeInstance(observer)

    const restarted = await openInstance('crashy')
    await restarted.sweeper.start()
    expect(restarted.sweeper.returned).toBeGreaterThanOrEqual(1)
    expect(await scalar(restarted, 'SELECT COUNT(*) FROM leases')).toBe(0n)
    expect(await scalar(restarted, 'SELECT prepaid_leased_nanos FROM balances WHERE org_id = ?', [seeded.orgId])).toBe(0n)
    expect(await verifyLedger(restarted.database.client, { nowMs: Date.now(), staleAfterMs: STALE_AFTER_S * 1000 })).toEqual([])
    expect(await scalar(restarted, 'SELECT prepaid_nanos FROM balances WHERE org_id = ?', [seeded.orgId])).toBe(USD)
    expect(await scalar(restarted, "SELECT COUNT(*) FROM ledger_entries WHERE kind = 'settle'")).toBe(0n)
    await closeInstance(restarted)
  }, 30_000)

  test('another instance returns it once the dead instance’s heartbeat is older than instance_stale_after_s', async () => {
    const seeded = await seed(USD, { period: 'overall', nanos: USD })
    await crashWithLease('crashy-2', seeded)

    const clock = new FakeClock(Date.now())
    const sweeperDeps = await openInstance('sweeper-b', clock)
    await sweeperDeps.sweeper.start()
    // Fresh heartbeat: the other instance may be alive, so its lease stays.
    await sweeperDeps.sweeper.tick()
    expect(await scalar(sweeperDeps, "SELECT COUNT(*) FROM leases WHERE instance_id = 'crashy-2'")).toBeGreaterThan(0n)

    clock.advance((STALE_AFTER_S + 1) * 1000)
    // verify, run at this instant, flags the lease the sweeper is about to return.
    const flagged = await verifyLedger(sweeperDeps.database.client, { nowMs: clock.now(), staleAfterMs: STALE_AFTER_S * 1000 })
    expect(flagged.some(line => line.includes('dead boot or a stale instance'))).toBe(true)
    await sweeperDeps.sweeper.tick()
    expect(await scalar(sweeperDeps, 'SELECT COUNT(*) FROM leases')).toBe(0n)
    expect(await verifyLedger(sweeperDeps.database.client, { nowMs: clock.now(), staleAfterMs: STALE_AFTER_S * 1000 })).toEqual([])
    const view = await sweeperDeps.balance(seeded.orgId)
    expect(view.availableNanos).toBe(USD)
    expect(view.topUp).toEqual({ remainingNanos: USD, spentNanos: 0n })
    // And all of it can be leased again by a live instance.
    const verified = await sweeperDeps.keys.verify(seeded.admin.secret)
    if (!verified.ok) throw new Error('admin key does not verify')
    const whole = await sweeperDeps.ledger.admit({ principal: verified.principal, purpose: 'chat', estimate: USD })
    expect(whole.ok).toBe(true)
    if (whole.ok) sweeperDeps.ledger.release(whole.reservation)
  }, 30_000)
})
