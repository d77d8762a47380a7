import { afterEach, beforeEach } from 'bun:test'
import { createApp, type App } from '../../src/app'
import type { Config } from '../../src/config/config'
import { loadConfig } from '../../src/config/load'
import { migrateDatabase, openDatabase } from '../../src/db/client'
import type { Role } from '../../src/db/schema'
import { createDeps, type Deps, type DepsOverrides } from '../../src/deps'
import { silentLogger } from '../../src/observability/logger'
import { FakeClock } from './fake-clock'

export interface TestApp {
  app: App
  deps: Deps
  clock: FakeClock
  /** Sends a request through app.handle; a FormData body is sent as multipart, another non-string body as JSON. */
  request(method: string, path: string, options?: { body?: unknown; key?: string; headers?: Record<string, string> }): Promise<Response>
  /** A new organization with an owner, an admin key and `credit` nanos of prepaid balance (default 10 USD). */
  createOrg(name?: string, credit?: bigint): Promise<TestOrg>
  /** A user with `role` in `org` and a key for them. */
  createMember(org: TestOrg, role: Role, options?: { admin?: boolean }): Promise<{ userId: string; key: string; keyId: string }>
  /** Serves the app on 127.0.0.1:0 (once; close() stops it) and returns its base URL, for SDK clients and CLIs. */
  listen(): string
  close(): Promise<void>
}

export interface TestOrg {
  orgId: string
  ownerUserId: string
  adminKey: string
  adminKeyId: string
}

let emailCounter = 0

/**
 * A fresh app on a fresh in-memory libSQL database (or `overrides.database`, migrated here) with
 * the real migrations and a fake clock.
 */
export async function buildTestApp(env: Record<string, string | undefined> = {}, config?: Config, overrides: DepsOverrides = {}): Promise<TestApp> {
  const clock = new FakeClock()
  const database = overrides.database ?? (await openDatabase(':memory:'))
  await migrateDatabase(database)
  const deps = await createDeps(config ?? loadConfig(env), { logger: silentLogger, ...overrides, clock, database })
  await deps.sweeper.start()
  const app = createApp(deps)

  const request: TestApp['request'] = (method, path, options = {}) => {
    const headers: Record<string, string> = { ...options.headers }
    if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`
    let body: string | FormData | undefined
    if (options.body instanceof FormData) {
      // Multipart: fetch sets the content type with its boundary.
      body = options.body
    } else if (options.body !== undefined) {
      body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body)
      headers['content-type'] ??= 'application/json'
    }
    return app.handle(new Request(`http://localhost${path}`, { method, headers, body }))
  }

  const createMember: TestApp['createMember'] = async (org, role, options = {}) => {
    const { userId } = await deps.orgs.addUser({ orgId: org.orgId, email: `user${++emailCounter}@example.test`, role })
    const { key, secret } = await deps.keys.create({ orgId: org.orgId, userId, name: `${role} key`, admin: options.admin ?? false, expiresAtMs: null, spendCap: null })
    return { userId, key: secret, keyId: key.id }
  }

  let server: ReturnType<typeof Bun.serve> | undefined
  return {
    app,
    deps,
    clock,
    request,
    createMember,
    listen() {
      server ??= Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch })
      return `http://127.0.0.1:${server.port}`
    },
    createOrg: (name = 'acme', credit = 10_000_000_000n) => seedAdminOrg(deps, name, credit, `owner${++emailCounter}@example.test`),
    async close() {
      await server?.stop(true)
      await deps.close()
    },
  }
}

/**
 * A fresh test app and organization (10 USD) before each test of the calling file or describe
 * block, closed after it; `assign` stores them where the tests read them.
 */
export function eachTestWithOrg(assign: (t: TestApp, org: TestOrg) => void | Promise<void>): void {
  let current: TestApp | undefined
  beforeEach(async () => {
    current = await buildTestApp()
    await assign(current, await current.createOrg())
  })
  afterEach(() => current?.close())
}

/**
 * An organization on the default plan with an owner, an admin key and `credit` nanos prepaid, on
 * any deps: a test app's (TestApp.createOrg) or ones a test built itself.
 */
export async function seedAdminOrg(deps: Deps, name: string, credit: bigint, ownerEmail?: string): Promise<TestOrg> {
  const { org, ownerUserId } = await deps.orgs.createOrg({ name, planId: deps.config.defaultPlanId, ownerEmail })
  const { key, secret } = await deps.keys.create({ orgId: org.id, userId: ownerUserId, name: 'admin', admin: true, expiresAtMs: null, spendCap: null })
  if (credit > 0n) await deps.ledger.topUp({ orgId: org.id, amount: credit })
  return { orgId: org.id, ownerUserId, adminKey: secret, adminKeyId: key.id }
}

/**
 * An organization on `planId` (default pay-as-you-go: no allowance, so every charge shows in the
 * prepaid balance) with a key for its owner (not admin unless asked) and `credit` nanos prepaid.
 */
export async function createPlanOrg(
  t: Pick<TestApp, 'deps'>,
  options: { name?: string; planId?: string; credit?: bigint; keyName?: string; admin?: boolean } = {},
): Promise<{ orgId: string; ownerUserId: string; key: string }> {
  const name = options.name ?? 'payg'
  const { org, ownerUserId } = await t.deps.orgs.createOrg({ name, planId: options.planId ?? 'payg', ownerEmail: `${name}-${Bun.randomUUIDv7()}@example.test` })
  const { secret } = await t.deps.keys.create({ orgId: org.id, userId: ownerUserId, name: options.keyName ?? 'k', admin: options.admin ?? false, expiresAtMs: null, spendCap: null })
  const credit = options.credit ?? 1_000_000_000n
  if (credit > 0n) await t.deps.ledger.topUp({ orgId: org.id, amount: credit })
  return { orgId: org.id, ownerUserId, key: secret }
}

/**
 * A test app configured by YAML text (a list is joined by newlines), as SVC_CONFIG would load it
 * from `env.SVC_CONFIG` (default /virtual/gateway.yaml); `env` also holds the keys it names.
 */
export async function buildConfiguredApp(yaml: string | string[], env: Record<string, string> = {}, overrides: DepsOverrides = {}): Promise<TestApp> {
  const configEnv = { SVC_CONFIG: '/virtual/gateway.yaml', ...env }
  const text = Array.isArray(yaml) ? yaml.join('\n') : yaml
  return buildTestApp(configEnv, loadConfig(configEnv, () => text), overrides)
}

/** Reads a JSON body (typed loosely: tests assert on it). */
export async function json(response: Response): Promise<any> {
  return response.json()
}
