import { afterEach, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadIdentity } from '../../src/billing/identity'

// A local database's stable instance id belongs to one live process at a time: a boot returns
// every lease of its instance's earlier boots, so a second live process under the same id would
// take the first one's leases and the organization could spend them twice.

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function database(): { url: string; lock: string } {
  const dir = mkdtempSync(join(tmpdir(), 'svc-identity-'))
  dirs.push(dir)
  return { url: `file:${join(dir, 'svc.db')}`, lock: join(dir, 'svc.db.instance-id.lock') }
}

test('the first process takes the stable id; a second one while it lives runs under a fresh id', () => {
  const { url, lock } = database()
  const first = loadIdentity(undefined, url, () => true)
  expect(first.instanceId).not.toStartWith('ephemeral-')
  expect(readFileSync(lock, 'utf8').trim()).toBe(String(process.pid))
  // Another app on the same file (here: in this very process) is refused the stable id.
  const second = loadIdentity(undefined, url, () => true)
  expect(second.instanceId).toStartWith('ephemeral-')
  second.release() // not its claim: nothing happens
  expect(readFileSync(lock, 'utf8').trim()).toBe(String(process.pid))
  // Once the first released it (its leases returned at shutdown), a restart gets the id back.
  first.release()
  const restarted = loadIdentity(undefined, url, () => true)
  expect(restarted.instanceId).toBe(first.instanceId)
  restarted.release()
})

test('a lock left by a live other process keeps the id from this one; a dead one (a crash) gives it back', () => {
  const { url, lock } = database()
  const stable = loadIdentity(undefined, url, () => false)
  stable.release()
  writeFileSync(lock, '4194000\n')
  expect(loadIdentity(undefined, url, pid => pid === 4194000).instanceId).toStartWith('ephemeral-')
  // The holder is gone: the restart takes the id, and with it the dead boot's leases.
  const restarted = loadIdentity(undefined, url, () => false)
  expect(restarted.instanceId).toBe(stable.instanceId)
  restarted.release()
})

test("a lock naming this process's own pid that it did not take is a dead predecessor's (a container's pid 1)", () => {
  const { url, lock } = database()
  const stable = loadIdentity(undefined, url, () => true)
  stable.release()
  // The crashed gateway was pid N; the restarted one is pid N again (here: this process).
  writeFileSync(lock, `${process.pid}\n`)
  const restarted = loadIdentity(undefined, url, () => true)
  expect(restarted.instanceId).toBe(stable.instanceId)
  restarted.release()
})

test('a configured SVC_INSTANCE_ID and a remote database are untouched by the lock', () => {
  expect(loadIdentity('edge-1', 'file:/nonexistent/dir/svc.db').instanceId).toBe('edge-1')
  expect(loadIdentity(undefined, 'libsql://db.example').instanceId).toStartWith('ephemeral-')
})
