import { afterEach } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDatabase } from '../../src/db/client'
import { newId } from '../../src/lib/ids'
import { buildTestApp, type TestApp } from '../support/harness'
import { hranaServer } from '../support/hrana-server'
import { PAYG_ONLY, configWith, scalar } from './fixtures'

/**
 * One test file's apps, on a local database or on a libSQL server (a Hrana server over HTTP), and
 * the other instances' sweepers it starts: all stopped and removed after each test.
 */
export class Served {
  app: TestApp | undefined
  server: ReturnType<typeof hranaServer> | undefined
  private directory: string | undefined
  readonly others: Array<{ stop(): Promise<unknown> }> = []

  constructor(private readonly prefix: string) {
    afterEach(async () => {
      for (const sweeper of this.others.splice(0)) await sweeper.stop().catch(() => {})
      await this.app?.close()
      this.server?.stop()
      if (this.directory) rmSync(this.directory, { recursive: true, force: true })
      this.app = this.server = this.directory = undefined
    })
  }

  /** The whole app on a Hrana server, whose requests get 300 ms to be answered (DATABASE_TIMEOUT_S). */
  async appOnServer(): Promise<{ app: TestApp; database: ReturnType<typeof hranaServer> }> {
    this.directory = mkdtempSync(join(tmpdir(), this.prefix))
    const server = (this.server = hranaServer(join(this.directory, 'served.db')))
    const database = await openDatabase(server.url, undefined, { replyTimeoutMs: 300 })
    this.app = await buildTestApp({}, configWith({ plans: PAYG_ONLY }), { database, identity: { instanceId: 'served', bootId: newId() } })
    return { app: this.app, database: server }
  }

  /** What the organization's prepaid lease rows hold. */
  leasedRows(orgId: string): Promise<bigint> {
    return scalar(this.app!.deps.database.client, "SELECT COALESCE(SUM(amount_nanos), 0) FROM leases WHERE org_id = ? AND scope = 'prepaid'", [orgId])
  }
}

/** Any committed write proves the database again (as the health probe would, a second later). */
export const anyCommit = (app: TestApp) => app.deps.writer.submit({ kind: 'plain', statements: [{ sql: 'SELECT 1', args: [] }], interpret: () => undefined })
export const prepaidPool = (app: TestApp, orgId: string) => app.deps.ledger.pools.all().find(pool => pool.ref.scope === 'prepaid' && pool.ref.orgId === orgId)
/** A pool's own lease return (its DELETE by id). */
export const poolReturn = (body: string) => body.includes('DELETE FROM leases WHERE id = ?')
