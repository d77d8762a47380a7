import { afterEach, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDatabase } from '../../src/db/client'
import { isInMemoryUrl, localPathOf } from '../../src/db/file-url'

// A file: DATABASE_URL's path as libSQL's client reads it: no //localhost authority, percent-decoded.

let dir = ''
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('the path libSQL opens: //localhost dropped, the path percent-decoded', () => {
  expect(localPathOf('file:data/svc.db')).toBe('data/svc.db')
  expect(localPathOf('file:/srv/svc.db?authToken=x')).toBe('/srv/svc.db')
  expect(localPathOf('file:///srv/svc.db')).toBe('/srv/svc.db')
  // QA: these created `/localhost/srv` and a directory named `p%2Fq`, then libSQL opened elsewhere.
  expect(localPathOf('file://localhost/srv/svc.db')).toBe('/srv/svc.db')
  expect(localPathOf('file:data/p%2Fq/a%20b.db')).toBe('data/p/q/a b.db')
  expect(localPathOf('libsql://db.example.turso.io')).toBeUndefined()
  expect([isInMemoryUrl(':memory:'), isInMemoryUrl('file::memory:?cache=shared'), localPathOf('file::memory:')]).toEqual([true, true, undefined])
})

test('the directory made for a new database is the one libSQL then opens the file in', async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-file-url-'))
  for (const url of [`file://localhost${dir}/one%20dir/x.db`, `file:${dir}/p%2Fq/y.db`]) {
    const database = await openDatabase(url)
    await database.client.execute('CREATE TABLE t (x)')
    database.close()
  }
  expect([existsSync(join(dir, 'one dir', 'x.db')), existsSync(join(dir, 'p', 'q', 'y.db'))]).toEqual([true, true])
  expect([existsSync(join(dir, 'one%20dir')), existsSync(join(dir, 'p%2Fq')), existsSync(`/localhost${dir}`)]).toEqual([false, false, false])
})
