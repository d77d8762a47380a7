import { afterEach, beforeEach, expect } from 'bun:test'
import type { Client } from '@libsql/client'
import { Elysia, t as ElysiaT } from 'elysia'
import type { BatchExecutor, Statement, StatementResult } from '../../src/billing/executor'
import { Ledger, type Reservation, type AdmitResult, type Purpose } from '../../src/billing/ledger'
import { LedgerWriter } from '../../src/billing/ledger-writer'
import { Sweeper } from '../../src/billing/sweeper'
import { newId } from '../../src/lib/ids'
import { verifyLedger } from '../../src/billing/verify'
import type { Config } from '../../src/config/config'
import { loadConfig } from '../../src/config/load'
import type { SpendCapPeriod } from '../../src/db/schema'
import { authMacro } from '../../src/http/auth'
import type { ApiError } from '../../src/http/errors'
import { requestContext } from '../../src/http/request-context'
import { silentLogger, type Logger } from '../../src/observability/logger'
import type { Principal } from '../../src/keys/principal'
import { buildTestApp, type TestApp, type TestOrg } from '../support/harness'

// Shared helpers of the ledger suites (ARCHITECTURE.md §7, SECURITY-NOTES.md §3). The ledger is
// always exercised for real: in-memory libSQL with the real migrations, a fake clock.

export const USD = 1_000_000_000n

/** Plans with no allowance: every nano admitted comes from prepaid top-ups. */
export const PAYG_ONLY = { payg: { monthly_allowance: '0', fusion: false } }

/**
 * A Config read from an inline YAML document through loadConfig's `readText` seam, so tests
 * get exactly the plans and ledger settings they name and nothing from the embedded default.
 */
export function configWith(
  file: { plans: Record<string, { monthly_allowance: string; fusion: boolean }>; ledger?: Record<string, unknown> },
  env: Record<string, string | undefined> = {},
): Config {
  const text = JSON.stringify(file) // JSON is valid YAML
  return loadConfig({ ...env, SVC_CONFIG: 'inline-test-config.yaml' }, () => text)
}

/**
 * An executor standing for a libSQL server over another (`inner`): the next write `lose` picks
 * commits and its reply is lost (it fails); `downFor` writes after it fail without committing (the
 * server still down), and so does every write `refuse` picks; `after` sees each write that
 * committed, before its caller does.
 */
export class LostReplyExecutor implements BatchExecutor {
  /** Writes whose reply is lost after they committed. */
  lost = 0
  lose: ((statements: readonly Statement[]) => boolean) | undefined
  /** Writes refused after the lost one, without committing (the server still down). */
  downFor = 0
  refuse: ((statements: readonly Statement[]) => boolean) | undefined
  after: ((statements: readonly Statement[]) => void) | undefined
  constructor(
    private readonly inner: BatchExecutor,
    /** What it stands for: a libSQL server, whose failed writes may have committed (false: a local file, where `refuse` alone is of use). */
    readonly ambiguousCommits = true,
  ) {}
  async write(statements: readonly Statement[]): Promise<StatementResult[]> {
    if (this.downFor > 0 && this.lost > 0) {
      this.downFor -= 1
      throw new Error('injected: the server does not answer')
    }
    if (this.refuse?.(statements)) throw new Error('injected: the write was refused; nothing committed')
    const results = await this.inner.write(statements)
    this.after?.(statements)
    if (this.lose?.(statements)) {
      this.lose = undefined // once
      this.lost += 1
      throw new Error('injected: the connection was reset after COMMIT; the reply is lost')
    }
    return results
  }
  close(): void {}
}

/**
 * A ledger on its own writer over `executor` (which usually wraps the app's database to watch or
 * break writes), with its sweeper started; stop the sweeper before closing the app.
 */
export async function ledgerOver(t: TestApp, executor: BatchExecutor, instanceId: string, logger: Logger = silentLogger): Promise<{ writer: LedgerWriter; ledger: Ledger; sweeper: Sweeper }> {
  const writer = new LedgerWriter(executor)
  const identity = { instanceId, bootId: newId() }
  const ledger = new Ledger(writer, t.deps.plans, t.clock, identity, logger, keyId => t.deps.keys.evictKey(keyId))
  const sweeper = new Sweeper(writer, ledger, identity, t.clock, logger, t.deps.config.ledger.instanceStaleAfterMs)
  await sweeper.start()
  return { writer, ledger, sweeper }
}

/**
 * Before each test of the calling file: a pay-as-you-go app, an organization with 10 USD and its
 * admin principal, handed to `ready` (which stores what the tests read and may build more on
 * them); after it, `after` (if any), then the app closed.
 */
export function eachTestPaygOrg(ready: (setup: { t: TestApp; org: TestOrg; principal: Principal }) => void | Promise<void>, after?: () => Promise<void>): void {
  let current: TestApp | undefined
  beforeEach(async () => {
    current = await buildPaygApp()
    const org = await current.createOrg('acme', 10n * USD)
    await ready({ t: current, org, principal: await adminPrincipal(current, org) })
  })
  afterEach(async () => {
    await after?.()
    await current?.close()
  })
}

/** A test app whose only plan has no monthly allowance. */
export function buildPaygApp(): Promise<TestApp> {
  return buildTestApp({}, configWith({ plans: PAYG_ONLY }))
}

/** The principal a key secret resolves to, as the auth step would produce it. */
export async function principalOf(t: TestApp, secret: string): Promise<Principal> {
  const result = await t.deps.keys.verify(secret)
  if (!result.ok) throw new Error(`key does not verify: ${result.reason}`)
  return result.principal
}

/** A key of the org's owner with a spend cap; returns its secret, id and principal. */
export async function createCappedKey(
  t: TestApp,
  org: TestOrg,
  period: SpendCapPeriod,
  nanos: bigint,
  options: { admin?: boolean } = {},
): Promise<{ secret: string; keyId: string; principal: Principal }> {
  const { key, secret } = await t.deps.keys.create({
    orgId: org.orgId, userId: org.ownerUserId, name: `${period} cap`, admin: options.admin ?? false, expiresAtMs: null,
    spendCap: { period, nanos },
  })
  return { secret, keyId: key.id, principal: await principalOf(t, secret) }
}

export async function adminPrincipal(t: TestApp, org: TestOrg): Promise<Principal> {
  return principalOf(t, org.adminKey)
}

export function admit(t: TestApp, principal: Principal, estimate: bigint, extra: { billingKey?: string; purpose?: Purpose } = {}): Promise<AdmitResult> {
  return t.deps.ledger.admit({ principal, purpose: extra.purpose ?? 'chat', estimate, billingKey: extra.billingKey })
}

/** Admits or fails the test. */
export async function admitOk(t: TestApp, principal: Principal, estimate: bigint, extra: { billingKey?: string } = {}): Promise<Reservation> {
  const result = await admit(t, principal, estimate, extra)
  if (!result.ok) throw new Error(`expected admission, got ${result.error.status} ${result.error.code}: ${result.error.message}`)
  return result.reservation
}

/** Asserts a refusal and returns its error. */
export function refused(result: AdmitResult): ApiError {
  if (result.ok) throw new Error('expected a refusal, the call was admitted')
  return result.error
}

export function expectInsufficientQuota(result: AdmitResult): ApiError {
  const error = refused(result)
  expect(error.status).toBe(429)
  expect(error.code).toBe('insufficient_quota')
  return error
}

/** Runs `svc ledger verify`'s checks after a heartbeat, so this boot's own leases count as live. */
export async function verifyClean(t: TestApp): Promise<void> {
  await t.deps.sweeper.tick()
  await t.deps.writer.drain()
  const problems = await verifyLedger(t.deps.database.client, { nowMs: t.clock.now(), staleAfterMs: t.deps.config.ledger.instanceStaleAfterMs })
  expect(problems).toEqual([])
}

export const LEDGER_TABLES = ['ledger_entries', 'balances', 'allowances', 'key_spend', 'leases'] as const

/** Every row of every ledger table, in a stable order, as JSON-safe strings. */
export async function snapshotLedger(client: Client, tables: readonly string[] = LEDGER_TABLES): Promise<Record<string, string[]>> {
  const snapshot: Record<string, string[]> = {}
  for (const table of tables) {
    const result = await client.execute(`SELECT * FROM ${table}`)
    snapshot[table] = result.rows
      .map(row => JSON.stringify(Object.fromEntries(result.columns.map(column => [column, String(row[column])]))))
      .sort()
  }
  return snapshot
}

/** The money-bearing state: entries and running totals, without lease bookkeeping. */
export async function moneyState(client: Client, orgId: string): Promise<Record<string, string>> {
  const [entries, balance, allowances, spend] = await client.batch(
    [
      { sql: 'SELECT COUNT(*) AS n, COALESCE(SUM(amount_nanos), 0) AS total FROM ledger_entries WHERE org_id = ?', args: [orgId] },
      { sql: 'SELECT prepaid_nanos, top_up_credited_nanos, top_up_spent_nanos FROM balances WHERE org_id = ?', args: [orgId] },
      // Period and cap-window rows appear lazily on first use; only what was used of them is money moved.
      { sql: 'SELECT period_start_ms, granted_nanos, used_nanos FROM allowances WHERE org_id = ? AND used_nanos <> 0 ORDER BY 1', args: [orgId] },
      { sql: 'SELECT s.key_id, s.window_start_ms, s.spent_nanos FROM key_spend s JOIN api_keys k ON k.id = s.key_id WHERE k.org_id = ? AND s.spent_nanos <> 0 ORDER BY 1, 2', args: [orgId] },
    ],
    'read',
  )
  return {
    entries: JSON.stringify(entries!.rows.map(row => [String(row.n), String(row.total)])),
    prepaid: String(balance!.rows[0]?.prepaid_nanos ?? 'none'),
    topUp: `${balance!.rows[0]?.top_up_credited_nanos ?? 'none'} credited, ${balance!.rows[0]?.top_up_spent_nanos ?? 'none'} spent`,
    allowances: JSON.stringify(allowances!.rows.map(row => [String(row.period_start_ms), String(row.granted_nanos), String(row.used_nanos)])),
    keySpend: JSON.stringify(spend!.rows.map(row => [String(row.key_id), String(row.window_start_ms), String(row.spent_nanos)])),
  }
}

/** A single bigint from the first row of a query. */
export async function scalar(client: Client, sql: string, args: Array<string | number | bigint> = []): Promise<bigint> {
  const result = await client.execute({ sql, args })
  const value = result.rows[0]?.[result.columns[0]!]
  return value === undefined || value === null ? 0n : BigInt(value as bigint)
}

/** The prepaid balance row (0 when there is none). */
export function prepaidOf(t: TestApp, orgId: string): Promise<bigint> {
  return scalar(t.deps.database.client, 'SELECT prepaid_nanos FROM balances WHERE org_id = ?', [orgId])
}

/** Spent in a key's cap window (0 when there is no row). */
export function keySpentOf(t: TestApp, keyId: string, windowStartMs: number): Promise<bigint> {
  return scalar(t.deps.database.client, 'SELECT spent_nanos FROM key_spend WHERE key_id = ? AND window_start_ms = ?', [keyId, windowStartMs])
}

/** Σ settled charges of a key over every window. */
export function keySettledOf(t: TestApp, keyId: string): Promise<bigint> {
  return scalar(t.deps.database.client, "SELECT COALESCE(SUM(amount_nanos), 0) FROM ledger_entries WHERE kind = 'settle' AND key_id = ?", [keyId])
}

export function countEntries(t: TestApp, where = '1 = 1', args: Array<string | number | bigint> = []): Promise<bigint> {
  return scalar(t.deps.database.client, `SELECT COUNT(*) FROM ledger_entries WHERE ${where}`, args)
}

/**
 * A stand-in billed route over the real auth step and metering API (chat and the other billed
 * routes arrive later): POST /billed {estimate, actual?} admits `estimate` with an inference
 * slot, then settles `actual` (default: the estimate) before answering. Requests go through
 * `app.handle`, like the harness's.
 */
export function billedApp(t: TestApp) {
  const app = new Elysia({ normalize: false })
    .use(requestContext(silentLogger))
    .use(authMacro(t.deps.keys, t.deps.limits))
    .post(
      '/billed',
      async ({ body, principal }) => {
        const call = await t.deps.metering.begin({ principal, purpose: 'chat', estimate: BigInt(body.estimate), inference: true })
        await call.settle(BigInt(body.actual ?? body.estimate))
        return { charged: body.actual ?? body.estimate }
      },
      {
        auth: { mode: 'inference', jsonBody: 16 * 1024 },
        body: ElysiaT.Object({ estimate: ElysiaT.String({ pattern: '^[0-9]{1,18}$' }), actual: ElysiaT.Optional(ElysiaT.String({ pattern: '^[0-9]{1,18}$' })) }),
      },
    )
  return {
    call(key: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
      const all: Record<string, string> = { 'content-type': 'application/json', ...headers }
      if (key !== undefined) all.authorization = `Bearer ${key}`
      return app.handle(new Request('http://localhost/billed', { method: 'POST', headers: all, body: typeof body === 'string' ? body : JSON.stringify(body) }))
    },
  }
}
