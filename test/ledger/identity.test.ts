import { afterEach, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadIdentity } from '../../src/billing/identity'

// A local database's stable instance id belongs to one live process at a time: a boot returns
// every lease of its instance's earlier boots, so a second live process under the same id would
// take the first one's leases and the organization could spend them twice.

const dirs: string[] = []
/** Other processes a test started: killed after it, whatever it asserted. */
const children: Array<ReturnType<typeof Bun.spawn>> = []
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL')
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function database(): { url: string; lock: string } {
  const dir = mkdtempSync(join(tmpdir(), 'svc-identity-'))
  dirs.push(dir)
  return { url: `file:${join(dir, 'svc.db')}`, lock: join(dir, 'svc.db.instance-id.lock') }
}

test('the first process takes the stable id; a second one while it lives runs under a fresh id', () => {
  const { url } = database()
  const first = loadIdentity(undefined, url)
  expect(first.instanceId).not.toStartWith('ephemeral-')
  // Another app on the same file (here: in this very process) is refused the stable id.
  const second = loadIdentity(undefined, url)
  expect(second.instanceId).toStartWith('ephemeral-')
  second.release() // not its claim: nothing happens
  expect(loadIdentity(undefined, url).instanceId).toStartWith('ephemeral-')
  // Once the first released it (its leases returned at shutdown), a restart gets the id back.
  first.release()
  const restarted = loadIdentity(undefined, url)
  expect(restarted.instanceId).toBe(first.instanceId)
  restarted.release()
})

/** Another process holding the id: it prints the id it got once it holds the lock, then waits to be killed. */
async function otherProcess(url: string, configured?: string): Promise<{ instanceId: string; kill(): Promise<void> }> {
  const code = `import { loadIdentity } from ${JSON.stringify(join(import.meta.dir, '../../src/billing/identity'))}\nconsole.log(loadIdentity(${JSON.stringify(configured)}, ${JSON.stringify(url)}).instanceId)\nsetInterval(() => {}, 1000)`
  const child = Bun.spawn(['bun', '-e', code], { stdout: 'pipe', stderr: 'inherit' })
  children.push(child)
  const reader = child.stdout.getReader()
  let text = ''
  while (!text.includes('\n')) {
    const { value, done } = await reader.read()
    if (done) throw new Error('the other process ended before taking the lock')
    text += new TextDecoder().decode(value)
  }
  return {
    instanceId: text.trim(),
    kill: async () => {
      child.kill('SIGKILL')
      await child.exited
    },
  }
}

test('a live other process keeps the id from this one, whatever its pid; its crash gives the id back', async () => {
  const { url } = database()
  const stable = loadIdentity(undefined, url)
  stable.release()
  // The lock is the kernel's, not a pid in a file: two containers sharing a volume are each pid 1.
  const other = await otherProcess(url)
  expect(other.instanceId).toBe(stable.instanceId)
  expect(loadIdentity(undefined, url).instanceId).toStartWith('ephemeral-')
  // The holder is killed (a crash): the restart takes the id, and with it the dead boot's leases.
  await other.kill()
  const restarted = loadIdentity(undefined, url)
  expect(restarted.instanceId).toBe(stable.instanceId)
  restarted.release()
}, 20_000)

test("an earlier version's lock (a pid in a text file) is replaced", () => {
  const { url, lock } = database()
  const stable = loadIdentity(undefined, url)
  stable.release()
  writeFileSync(lock, `${process.pid}\n`)
  const restarted = loadIdentity(undefined, url)
  expect(restarted.instanceId).toBe(stable.instanceId)
  expect(readFileSync(lock).subarray(0, 15).toString()).toBe('SQLite format 3')
  restarted.release()
})

test('a remote database has no lock: a configured SVC_INSTANCE_ID is taken as given, else a fresh id', () => {
  expect(loadIdentity('edge-1', 'libsql://db.example').instanceId).toBe('edge-1')
  expect(loadIdentity(undefined, 'libsql://db.example').instanceId).toStartWith('ephemeral-')
})

test('a configured SVC_INSTANCE_ID on a local database belongs to one live process too (QA: a second copy returned its leases)', async () => {
  const { url } = database()
  // Another process (a second copy with the same environment, or an overlapping restart) holds it.
  const other = await otherProcess(url, 'prod-1')
  expect(other.instanceId).toBe('prod-1')
  const second = loadIdentity('prod-1', url)
  expect(second.instanceId).toStartWith('ephemeral-')
  expect(second.fallback).toContain('SVC_INSTANCE_ID prod-1 is held by a live process')
  // Another configured id, and the kept id, are other locks.
  const neighbour = loadIdentity('prod-2', url)
  expect(neighbour.instanceId).toBe('prod-2')
  neighbour.release()
  // The holder crashes: the restart takes the id, and with it the dead boot's leases.
  await other.kill()
  const restarted = loadIdentity('prod-1', url)
  expect(restarted.instanceId).toBe('prod-1')
  expect(restarted.fallback).toBeUndefined()
  restarted.release()
}, 20_000)

test('SVC_INSTANCE_ID set to the id kept beside the database is that id: one live process holds it either way', async () => {
  // Before: a process configured with the kept id took another lock than the kept id's holder, and
  // its boot returned that live process's leases (QA: the organization could spend them twice).
  const { url } = database()
  const other = await otherProcess(url)
  expect(other.instanceId).not.toStartWith('ephemeral-')
  const configured = loadIdentity(other.instanceId, url)
  expect(configured.instanceId).toStartWith('ephemeral-')
  expect(configured.fallback).toContain(`SVC_INSTANCE_ID ${other.instanceId} is held by a live process`)
  await other.kill()
  // The other way round: the configured process holds it, a process reading the kept file does not take it.
  const holder = loadIdentity(other.instanceId, url)
  expect(holder.instanceId).toBe(other.instanceId)
  const kept = loadIdentity(undefined, url)
  expect(kept.instanceId).toStartWith('ephemeral-')
  expect(kept.fallback).toContain('held by a live process started with it as SVC_INSTANCE_ID')
  holder.release()
  // Once released, the kept id is taken as before, and released whole (both locks).
  const later = loadIdentity(undefined, url)
  expect(later.instanceId).toBe(other.instanceId)
  later.release()
  const again = loadIdentity(other.instanceId, url)
  expect(again.instanceId).toBe(other.instanceId)
  again.release()
}, 20_000)
