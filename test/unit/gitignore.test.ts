import { expect, test } from 'bun:test'
import { join } from 'node:path'

// A local database gets an instance id file and its lock beside it (src/billing/identity.ts):
// like the database file itself, never something to commit, in whatever directory it lives and
// whatever the database file is called (the gateway appends the suffix to any file name).
test('.gitignore ignores the instance id files of a local database anywhere, whatever its extension', () => {
  const root = join(import.meta.dir, '..', '..')
  const paths = [
    'svc.db.instance-id', 'svc.db.instance-id.lock', 'some/dir/gateway.db.instance-id', 'some/dir/gateway.db.instance-id.lock',
    'gateway.sqlite.instance-id', 'gateway.sqlite.instance-id.lock', 'some/dir/ledger.instance-id', 'some/dir/ledger.instance-id.lock',
    // The lock of one instance id, kept or configured (SVC_INSTANCE_ID).
    'svc.db.instance-0123456789abcdef.lock', 'some/dir/ledger.instance-0123456789abcdef.lock',
  ]
  const ignored = (path: string) => Bun.spawnSync(['git', 'check-ignore', '--quiet', '--no-index', path], { cwd: root }).exitCode === 0
  expect(paths.filter(path => !ignored(path))).toEqual([])
  // Not everything: the sources are not ignored.
  expect(ignored('src/billing/identity.ts')).toBe(false)
})
