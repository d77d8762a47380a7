import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { newId } from '../lib/ids'
import { localPathOf } from './executor'
import type { Identity } from './ledger'

/**
 * This process's ledger identity. The instance id is stable across restarts so that a new boot
 * can reclaim the leases its crashed predecessor left: SVC_INSTANCE_ID, else a file kept beside
 * a local database, else (remote database, no id configured) a fresh id whose leases the stale
 * sweep of other instances returns. The boot id is new for every process.
 */
export function loadIdentity(configured: string | undefined, databaseUrl: string): Identity {
  const bootId = newId()
  if (configured) return { instanceId: configured, bootId }
  const path = localPathOf(databaseUrl)
  if (path === undefined) return { instanceId: `ephemeral-${bootId}`, bootId }
  const file = join(dirname(path), `${path.split('/').pop()}.instance-id`)
  if (existsSync(file)) {
    const stored = readFileSync(file, 'utf8').trim()
    if (stored) return { instanceId: stored, bootId }
  }
  const instanceId = newId()
  writeFileSync(file, `${instanceId}\n`)
  return { instanceId, bootId }
}
