import { afterEach, beforeEach, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../../src/commands'
import { captureIo } from '../support/cli'

// A local database file that does not exist: only `svc migrate` and `svc serve` create one (QA cli #5).

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-cli-file-'))
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

async function cli(env: Record<string, string>, ...argv: string[]) {
  const { io, out, err } = captureIo()
  const code = await runCli(argv, { SVC_LOG_LEVEL: 'error', ...env }, io)
  return { code, out: out.join('\n'), err: err.join('\n') }
}

test('a command other than migrate and serve refuses a database file that does not exist, creating nothing', async () => {
  // Before, each created the directories, the file, its WAL and .instance-id, and `ledger verify`
  // then reported "ledger ok: every invariant holds" on that new, empty database.
  const path = join(dir, 'mistyped', 'dir', 'svc.db')
  const env = { DATABASE_URL: `file:${path}` }
  const id = '01a21b96-0000-7000-8000-000000000000'
  const commands = [
    ['ledger', 'verify'],
    ['orgs', 'show', id],
    ['keys', 'list', '--org', id],
    ['orgs', 'create', '--name', 'Acme'],
    ['credit', '--org', id, '--usd', '1'],
    ['plans', 'set', '--org', id, '--plan', 'pro'],
    ['users', 'add', '--org', id, '--email', 'a@example.com', '--role', 'member'],
    ['users', 'set-role', '--org', id, '--user', id, '--role', 'member'],
    ['keys', 'create', '--org', id, '--user', id, '--name', 'k'],
    ['keys', 'revoke', id],
  ]
  for (const argv of commands) {
    const result = await cli(env, ...argv)
    expect({ argv, code: result.code, out: result.out, err: result.err }).toEqual({
      argv, code: 1, out: '',
      err: `error: cannot open the database at file:${path} (DATABASE_URL): ${path} does not exist (svc migrate or svc serve creates it)`,
    })
  }
  expect(readdirSync(dir)).toEqual([])

  // migrate creates it; then the commands run.
  expect(await cli(env, 'migrate')).toEqual({ code: 0, out: '', err: '' })
  expect(existsSync(path)).toBe(true)
  expect(await cli(env, 'ledger', 'verify')).toEqual({ code: 0, out: 'ledger ok: every invariant holds', err: '' })
})
