import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import Libsql from 'libsql'
import { dirname, join } from 'node:path'
import { newId } from '../lib/ids'
import { localPathOf } from '../db/file-url'
import type { Identity } from './ledger'

/** This process's ledger identity, and how to give up its claim on a stable id at shutdown. */
export interface ProcessIdentity extends Identity {
  release(): void
  /** Why the process runs under a fresh id instead of its stable one (deps logs it). */
  readonly fallback?: string
}

/**
 * This process's ledger identity. The instance id is stable across restarts so that a new boot
 * can reclaim the leases its crashed predecessor left: SVC_INSTANCE_ID, else a file kept beside
 * a local database, else (remote database, no id configured) a fresh id whose leases the stale
 * sweep of other instances returns. The boot id is new for every process.
 *
 * A local database's stable id, kept or configured, belongs to one live process at a time. A boot returns every
 * lease of its instance's earlier boots, so a second process sharing the file (README: "Several
 * processes on one host may also share a local file: database", or a restart whose new process
 * starts before the old one exits) would take a live process's leases, and the organization could
 * spend them twice (QA). A process that finds the id held by a live process runs under a fresh
 * id instead; its leases come back through the stale sweep if it dies.
 */
export function loadIdentity(configured: string | undefined, databaseUrl: string): ProcessIdentity {
  const bootId = newId()
  const release = () => {}
  const path = localPathOf(databaseUrl)
  const fresh = (fallback: string): ProcessIdentity => ({ instanceId: `ephemeral-${bootId}`, bootId, release, fallback })
  if (configured) {
    // A configured id on a remote database cannot be locked here: each live process needs its own (README).
    if (path === undefined) return { instanceId: configured, bootId, release }
    // The same rule for an id the operator gave: a second copy started with the same environment
    // (it fails to bind, but only after its boot returned the live process's leases: QA), or a
    // restart that overlaps the old process, must not take a live process's leases.
    const held = claim(idLock(path, configured))
    if (held === undefined) return fresh(`SVC_INSTANCE_ID ${configured} is held by a live process on this database; running under a fresh id`)
    return { instanceId: configured, bootId, release: held }
  }
  if (path === undefined) return { instanceId: `ephemeral-${bootId}`, bootId, release }
  // This lock guards the kept file (one process creates the id); the id's own lock, below, is the
  // one a process configured with the same id takes too.
  const file = join(dirname(path), `${path.split('/').pop()}.instance-id`)
  const keptFile = claim(`${file}.lock`)
  if (keptFile === undefined) return fresh('the instance id kept beside the database is held by a live process; running under a fresh id')
  let instanceId = existsSync(file) ? readFileSync(file, 'utf8').trim() : ''
  if (!instanceId) {
    instanceId = newId()
    writeFileSync(file, `${instanceId}\n`)
  }
  const id = claim(idLock(path, instanceId))
  if (id === undefined) {
    keptFile()
    return fresh(`the instance id kept beside the database (${instanceId}) is held by a live process started with it as SVC_INSTANCE_ID; running under a fresh id`)
  }
  return {
    instanceId,
    bootId,
    release: () => {
      id()
      keptFile()
    },
  }
}

/**
 * The lock of one instance id on a local database, however the id was chosen: configured, or kept
 * beside the file. A process configured with the kept id took another lock than the kept id's
 * holder, and its boot returned that live process's leases (QA).
 */
function idLock(path: string, instanceId: string): string {
  return `${path}.instance-${new Bun.CryptoHasher('sha256').update(instanceId).digest('hex').slice(0, 16)}.lock`
}

/**
 * Lock files this process holds, with the connections holding them: kept here, so that a lock
 * lasts as long as the process (a collected connection would close and drop it), and a second
 * app in this process does not take one again.
 */
const held = new Map<string, Libsql.Database>()

/**
 * Takes the lock for this process's lifetime, or undefined when a live process holds it. The lock
 * is an exclusive SQLite file lock (fcntl) on a tiny database of its own, held by an open
 * connection in exclusive locking mode: the kernel drops it when the process ends, however it
 * ends, so a crashed holder's restart gets it back. A pid written to a file could not tell: two
 * containers sharing a volume are each pid 1 (QA: the second took the first's live leases and
 * the organization spent them twice), and another namespace's pid means nothing here.
 * Returns the function that releases it.
 *
 * Releasing leaves the file in place (one small file per instance id ever used on the database):
 * the lock belongs to the open file, not its name. A process that opened the file just before
 * the holder deleted it would lock the deleted file, while the next one created a new file under
 * the name and locked that: two live holders of one id, each taking the other's leases.
 */
function claim(lock: string): (() => void) | undefined {
  if (held.has(lock)) return undefined
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const database = new Libsql(lock, { timeout: 0 })
    try {
      // In exclusive locking mode the first write's EXCLUSIVE lock is kept until the connection closes.
      database.exec('PRAGMA locking_mode=EXCLUSIVE')
      database.exec('BEGIN EXCLUSIVE')
      database.exec('COMMIT')
      held.set(lock, database)
      return () => {
        if (held.get(lock) !== database) return
        held.delete(lock)
        database.close()
      }
    } catch (error) {
      database.close()
      const code = (error as { code?: string }).code
      if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') return undefined
      // An earlier version's lock (a pid in a text file): replaced once by a lock of this kind.
      if (code !== 'SQLITE_NOTADB' || attempt > 0) throw error
      unlinkSync(lock)
    }
  }
  return undefined
}
