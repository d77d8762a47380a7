import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { newId } from '../lib/ids'
import { localPathOf } from './executor'
import type { Identity } from './ledger'

/** This process's ledger identity, and how to give up its claim on a stable id at shutdown. */
export interface ProcessIdentity extends Identity {
  release(): void
}

/**
 * This process's ledger identity. The instance id is stable across restarts so that a new boot
 * can reclaim the leases its crashed predecessor left: SVC_INSTANCE_ID, else a file kept beside
 * a local database, else (remote database, no id configured) a fresh id whose leases the stale
 * sweep of other instances returns. The boot id is new for every process.
 *
 * A local database's stable id belongs to one live process at a time. A boot returns every
 * lease of its instance's earlier boots, so a second process sharing the file (README: "Several
 * processes on one host may also share a local file: database", or a restart whose new process
 * starts before the old one exits) would take a live process's leases, and the organization could
 * spend them twice (QA). A process that finds the id held by a live process runs under a fresh
 * id instead; its leases come back through the stale sweep if it dies.
 */
export function loadIdentity(configured: string | undefined, databaseUrl: string, alive: (pid: number) => boolean = processAlive): ProcessIdentity {
  const bootId = newId()
  const release = () => {}
  if (configured) return { instanceId: configured, bootId, release }
  const path = localPathOf(databaseUrl)
  if (path === undefined) return { instanceId: `ephemeral-${bootId}`, bootId, release }
  const file = join(dirname(path), `${path.split('/').pop()}.instance-id`)
  const lock = `${file}.lock`
  if (!claim(lock, alive)) return { instanceId: `ephemeral-${bootId}`, bootId, release }
  const ours = { release: () => releaseClaim(lock) }
  if (existsSync(file)) {
    const stored = readFileSync(file, 'utf8').trim()
    if (stored) return { instanceId: stored, bootId, ...ours }
  }
  const instanceId = newId()
  writeFileSync(file, `${instanceId}\n`)
  return { instanceId, bootId, ...ours }
}

/** Lock files this process holds (a second app in this process must not take one again). */
const held = new Set<string>()

/**
 * Takes the lock file for this process: true when it was free, or held by a process that is gone
 * (a crash: the restart reclaims its leases). Created exclusively, so two processes starting at
 * once cannot both win. A lock naming this very pid that this process did not take is a dead
 * predecessor's: in a container the restarted gateway is pid 1 again.
 */
function claim(lock: string, alive: (pid: number) => boolean): boolean {
  if (held.has(lock)) return false
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      writeFileSync(lock, `${process.pid}\n`, { flag: 'wx' })
      held.add(lock)
      return true
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return false
    }
    const holder = Number(readFileSync(lock, 'utf8').trim())
    if (Number.isSafeInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) return false
    try {
      unlinkSync(lock)
    } catch {
      // Another process removed it first; the exclusive create decides between us.
    }
  }
  return false
}

function releaseClaim(lock: string): void {
  if (!held.delete(lock)) return
  try {
    if (Number(readFileSync(lock, 'utf8').trim()) === process.pid) unlinkSync(lock)
  } catch {
    // Gone already: nothing to release.
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
