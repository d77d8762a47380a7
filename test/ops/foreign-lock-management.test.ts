import { afterEach, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Libsql from 'libsql'
import { createApp } from '../../src/app'
import { loadConfig } from '../../src/config/load'
import { migrateDatabase, openDatabase } from '../../src/db/client'
import { createDeps } from '../../src/deps'
import { silentLogger } from '../../src/observability/logger'
import { FakeClock } from '../support/fake-clock'
import { seedAdminOrg } from '../support/harness'

// Another process holding the database file's write lock past the busy timeout (an operator's
// sqlite3 session, a long migration from another instance). @libsql/client's connection that met
// SQLITE_BUSY never reset the failed statement: every later management write through it reported
// success inside a transaction that never committed, and kept the file's write lock, so the
// ledger's writer and every other process were locked out until the gateway restarted.

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const step of cleanups.splice(0).reverse()) await step()
})

async function gatewayOnFile() {
  const directory = mkdtempSync(join(tmpdir(), 'svc-foreign-lock-'))
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }))
  const path = join(directory, 'svc.db')
  // A short busy timeout, so the test does not wait SQLite's five seconds.
  const database = await openDatabase(`file:${path}`, undefined, { busyTimeoutMs: 20 })
  await migrateDatabase(database)
  const deps = await createDeps(loadConfig({ DATABASE_URL: `file:${path}` }), { clock: new FakeClock(), database, logger: silentLogger })
  await deps.sweeper.start()
  cleanups.push(() => deps.close().catch(() => {}))
  const app = createApp(deps)
  const org = await seedAdminOrg(deps, 'acme', 10_000_000_000n)
  const other = new Libsql(path, { timeout: 0 })
  cleanups.push(() => other.close())
  const send = (method: string, path: string, body?: unknown) =>
    app.handle(new Request(`http://localhost${path}`, { method, headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined }))
  const persistedKeys = () => other.prepare('SELECT id, status FROM api_keys').all() as Array<{ id: string; status: string }>
  return { send, other, persistedKeys, deps }
}

test('a management write that met a foreign write lock fails with 503; the writes after it are committed, and the lock is not kept', async () => {
  const { send, other, persistedKeys } = await gatewayOnFile()
  other.prepare('BEGIN IMMEDIATE').run()
  const refused = await send('POST', '/api/v1/api-keys', { name: 'during the lock' })
  expect(refused.status).toBe(503)
  other.prepare('COMMIT').run()

  const created = await send('POST', '/api/v1/api-keys', { name: 'after the lock' })
  expect(created.status).toBe(201)
  const { id } = ((await created.json()) as { key: { id: string } }).key
  // On the file, seen by another connection: committed, not held in an open transaction.
  expect(persistedKeys().map(key => key.id)).toContain(id)
  expect((await send('DELETE', `/api/v1/api-keys/${id}`)).status).toBe(204)
  expect(persistedKeys().find(key => key.id === id)?.status).toBe('revoked')
  // The gateway keeps no write lock: another process can write at once.
  other.prepare('BEGIN IMMEDIATE').run()
  other.prepare('COMMIT').run()
})
