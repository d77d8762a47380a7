import { afterEach, beforeEach, expect, test } from 'bun:test'
import { Database as SQLite } from 'bun:sqlite'
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { migrate } from 'drizzle-orm/libsql/migrator'
import { runCli } from '../../src/commands'
import { migrationsFolder, openDatabase } from '../../src/db/client'
import { captureIo } from '../support/cli'
import { startGateway } from '../support/gateway-process'

// A local database file that does not exist: only `svc migrate` and `svc serve` create one (QA cli #5),
// nor the gateway's schema in a database that has none.
// An in-memory database: no operator command runs on one, and `svc serve` warns (QA dburl #1).

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

const id = '01a21b96-0000-7000-8000-000000000000'
/** Every command that opens the server's database, but migrate. */
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

test('a command other than migrate and serve refuses a database file that does not exist, creating nothing', async () => {
  // Before, each created the directories, the file, its WAL and .instance-id, and `ledger verify`
  // then reported "ledger ok: every invariant holds" on that new, empty database.
  const path = join(dir, 'mistyped', 'dir', 'svc.db')
  const env = { DATABASE_URL: `file:${path}` }
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

test('a command other than migrate and serve refuses a database without the gateway schema, writing nothing to it', async () => {
  // Before, an empty file or another application's database got the gateway's tables and WAL,
  // and `ledger verify` then reported "every invariant holds" on it.
  const empty = join(dir, 'empty.db')
  writeFileSync(empty, '')
  const other = join(dir, 'customers.db')
  const customers = new SQLite(other)
  customers.run('CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)')
  customers.close()
  for (const path of [empty, other]) {
    const before = readFileSync(path)
    for (const argv of commands) {
      const result = await cli({ DATABASE_URL: `file:${path}` }, ...argv)
      expect({ argv, code: result.code, out: result.out, err: result.err }).toEqual({
        argv, code: 1, out: '',
        err: `error: cannot open the database at file:${path} (DATABASE_URL): ${path} is not a gateway database (no __drizzle_migrations table); svc migrate or svc serve creates the gateway's tables in it`,
      })
    }
    expect(readFileSync(path).equals(before)).toBe(true)
  }
  expect(readdirSync(dir).sort()).toEqual(['customers.db', 'empty.db'])

  // migrate makes the empty file a gateway database; then the commands run.
  expect(await cli({ DATABASE_URL: `file:${empty}` }, 'migrate')).toEqual({ code: 0, out: '', err: '' })
  expect(await cli({ DATABASE_URL: `file:${empty}` }, 'ledger', 'verify')).toEqual({ code: 0, out: 'ledger ok: every invariant holds', err: '' })
})

test('a usage error (conflicting, missing or malformed flags) comes before the database: none is looked for, created or opened', async () => {
  // Before, these checks ran on the opened database: on a file that does not exist they said
  // "does not exist" (exit 1), on a file that is no database "not a gateway database", instead of
  // the usage error every other database state gave.
  const usage: Array<[string[], string]> = [
    [['credit', '--org', id, '--usd', '1', '--nanos', '5'], 'give exactly one of --usd and --nanos'],
    [['credit', '--org', id], 'give exactly one of --usd and --nanos'],
    [['credit', '--org', id, '--usd', '1', '--reference', ' '], '--reference must not be empty (omit it for a top-up without one)'],
    [['credit', '--org', 'acme', '--usd', '1'], '--org must be a UUID, got "acme"'],
    [['keys', 'create', '--org', id, '--user', id, '--name', 'k', '--spend-cap-period', 'daily'], '--spend-cap-period and --spend-cap-nanos must be given together'],
    [['keys', 'create', '--org', id, '--user', id, '--name', ' '], '--name must not be blank (whitespace or invisible characters only)'],
    [['keys', 'revoke', 'k1'], 'KEY_ID must be a UUID, got "k1"'],
    [['orgs', 'create', '--name', 'Acme', '--credit-usd', 'five'], '--credit-usd must be a decimal with at most 9 decimals, e.g. 25 or 0.50'],
    [['orgs', 'create', '--name', 'Acme', '--owner', 'nobody'], '--owner must be an email address'],
    [['orgs', 'create', '--name', 'Acme', '--plan', 'gold'], '--plan: unknown plan "gold" (configured: pro, payg)'],
    [['plans', 'set', '--org', id, '--plan', 'gold'], '--plan must be one of pro, payg'],
    [['users', 'add', '--org', id, '--email', 'a@example.com', '--role', 'boss'], '--role must be one of owner, admin, member'],
    [['users', 'set-role', '--org', id, '--user', 'u1', '--role', 'member'], '--user must be a UUID, got "u1"'],
  ]
  const absent = join(dir, 'absent', 'svc.db')
  const text = join(dir, 'notes.txt')
  writeFileSync(text, 'not a database')
  for (const path of [absent, text]) {
    for (const [argv, message] of usage) {
      const result = await cli({ DATABASE_URL: `file:${path}` }, ...argv)
      expect({ path, argv, code: result.code, out: result.out, err: result.err.split('\n')[0] }).toEqual({ path, argv, code: 2, out: '', err: `usage error: ${message}` })
    }
  }
  expect(readdirSync(dir)).toEqual(['notes.txt'])
  expect(readFileSync(text, 'utf8')).toBe('not a database')
})

test('a gateway database that is merely behind is migrated by any command', async () => {
  // Only the first migration applied, as by an older gateway.
  const folder = join(dir, 'drizzle')
  cpSync(migrationsFolder(), folder, { recursive: true })
  const journalPath = join(folder, 'meta', '_journal.json')
  const journal = JSON.parse(readFileSync(journalPath, 'utf8'))
  const all = journal.entries.length
  writeFileSync(journalPath, JSON.stringify({ ...journal, entries: journal.entries.slice(0, 1) }))
  const url = `file:${join(dir, 'old.db')}`
  const old = await openDatabase(url)
  await migrate(old.db, { migrationsFolder: folder })
  old.close()
  expect(await cli({ DATABASE_URL: url }, 'ledger', 'verify')).toEqual({ code: 0, out: 'ledger ok: every invariant holds', err: '' })
  const migrated = new SQLite(join(dir, 'old.db'))
  expect(migrated.query('SELECT count(*) AS n FROM __drizzle_migrations').get()).toEqual({ n: all })
  migrated.close()
})

test('no operator command, migrate included, runs on an in-memory database', async () => {
  // Before, each ran on a fresh database of its own process: `ledger verify` passed, `orgs create
  // --credit-usd 5` printed a key and its credit, and nothing was stored where a server reads.
  for (const url of [':memory:', 'file::memory:', 'file::memory:?cache=shared']) {
    for (const argv of [['migrate'], ...commands]) {
      const result = await cli({ DATABASE_URL: url }, ...argv)
      expect({ url, argv, ...result }).toEqual({
        url, argv, code: 1, out: '',
        err: "error: DATABASE_URL names an in-memory database; operator commands need the server's database file or URL",
      })
    }
  }
})

test('svc serve on an in-memory database runs, and warns that nothing survives it', async () => {
  const gateway = await startGateway({ DATABASE_URL: ':memory:', SVC_LOG_LEVEL: 'info' })
  try {
    expect(gateway.logs('DATABASE_URL names an in-memory database: every organization, key and credit is lost when this process stops, and svc operator commands cannot reach it'))
      .toEqual([expect.objectContaining({ level: 'warn', database: ':memory:' })])
  } finally {
    gateway.process.kill('SIGTERM')
    await gateway.exited
  }
}, 30_000)

test('a file: URL with no path (file:${DB}, DB unset) is a configuration error, serve included', async () => {
  // SQLite took it for a temporary database: serve bootstrapped a fresh organization and credit
  // at every start, and the commands ran on nothing, as on :memory:.
  for (const argv of [['serve'], ['migrate'], ...commands]) {
    expect({ argv, ...(await cli({ DATABASE_URL: 'file:' }, ...argv)) }).toEqual({
      argv, code: 1, out: '', err: 'invalid configuration:\n  - DATABASE_URL: file: names no file; give its path, e.g. file:data/svc.db',
    })
  }
})
