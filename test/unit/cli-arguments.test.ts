import { expect, test } from 'bun:test'
import { join } from 'node:path'
import { eachTestCliDatabase } from '../support/cli'

// How the operator commands read their arguments (QA cli #4, #8, #9).

const { db, cli } = eachTestCliDatabase('svc-cli-args-')

async function cliJson(...argv: string[]) {
  const result = await cli(...argv, '--json')
  expect({ code: result.code, err: result.err }).toEqual({ code: 0, err: '' })
  return JSON.parse(result.out)
}

test('a flag given twice is a usage error naming it, and nothing is written', async () => {
  // Before, the last value won: `--usd 1 --usd 1000` booked 1000 USD, `--org A --org B` credited B.
  const a = await cliJson('orgs', 'create', '--name', 'A', '--plan', 'payg')
  const b = await cliJson('orgs', 'create', '--name', 'B', '--plan', 'payg')
  const cases: Array<[string[], string]> = [
    [['credit', '--org', a.org_id, '--usd', '1', '--usd', '1000'], '--usd'],
    [['credit', '--org', a.org_id, '--usd=1', '--usd=1000'], '--usd'],
    [['credit', '--org', a.org_id, '--org', b.org_id, '--usd', '5'], '--org'],
    [['credit', '--org', a.org_id, '--usd', '5', '--reference', 'inv-1', '--reference', 'inv-2'], '--reference'],
    [['plans', 'set', '--org', a.org_id, '--plan', 'pro', '--plan', 'payg'], '--plan'],
    [['orgs', 'create', '--name', 'x', '--name', 'y'], '--name'],
    [['keys', 'create', '--org', a.org_id, '--user', a.owner_user_id, '--name', 'k', '--admin', '--admin'], '--admin'],
    [['keys', 'list', '--org', a.org_id, '--json', '--json'], '--json'],
  ]
  for (const [argv, flag] of cases) {
    const result = await cli(...argv)
    expect({ argv, code: result.code, err: result.err.split('\n')[0] }).toEqual({ argv, code: 2, err: `usage error: ${flag} was given more than once` })
  }
  for (const org of [a, b]) expect(await cliJson('orgs', 'show', org.org_id)).toMatchObject({ plan: 'payg', prepaid_nanos: '0', keys: 1 })
})

test('an argument to a command that takes none is a usage error naming it, not an unknown command', async () => {
  // Before: `unknown command "version --json"` (and the same for migrate and serve), though the command exists.
  db.env.DATABASE_URL = `file:${join(db.dir, 'unopened.db')}`
  for (const argv of [['version', '--json'], ['--version', 'x'], ['migrate', '--json'], ['migrate', 'extra'], ['serve', '--port', '1']]) {
    const result = await cli(...argv)
    expect({ argv, code: result.code, err: result.err.split('\n')[0] }).toEqual({ argv, code: 2, err: `usage error: ${argv[0]} takes no arguments, got "${argv[1]}"` })
  }
  // Nothing was opened or created for them.
  expect(await Bun.file(join(db.dir, 'unopened.db')).exists()).toBe(false)
})

test('organization and user ids are read in any case, as key ids are (RFC 9562: UUIDs are case-insensitive)', async () => {
  // Before, every command but keys revoke said "no organization 01A2…" for an upper-case id.
  const org = await cliJson('orgs', 'create', '--name', 'Acme', '--plan', 'payg')
  const ORG = org.org_id.toUpperCase()
  const OWNER = org.owner_user_id.toUpperCase()
  expect(await cliJson('credit', '--org', ORG, '--usd', '1')).toMatchObject({ org_id: org.org_id, applied: true })
  expect(await cliJson('plans', 'set', '--org', ` ${ORG}`, '--plan', 'pro')).toEqual({ org_id: org.org_id, plan: 'pro' })
  const member = await cliJson('users', 'add', '--org', ORG, '--email', 'm@example.com', '--role', 'owner')
  expect(member.org_id).toBe(org.org_id)
  expect(await cliJson('users', 'set-role', '--org', ORG, '--user', member.user_id.toUpperCase(), '--role', 'member')).toEqual({ user_id: member.user_id, org_id: org.org_id, role: 'member' })
  const created = await cliJson('keys', 'create', '--org', ORG, '--user', OWNER, '--name', 'k')
  expect(created.key).toMatchObject({ name: 'k', status: 'active' })
  expect((await cliJson('keys', 'list', '--org', ORG)).keys).toHaveLength(2)
  expect(await cliJson('orgs', 'show', ORG)).toMatchObject({ org_id: org.org_id, plan: 'pro', prepaid_nanos: '1000000000', keys: 2 })
  expect(await cliJson('keys', 'revoke', created.key.id.toUpperCase())).toEqual({ key_id: created.key.id, status: 'revoked' })
  const human = await cli('credit', '--org', ORG, '--usd', '1')
  expect(human.out).toContain(`credited 1.000000000 USD to ${org.org_id}`)
})

test('the help names the commands --json applies to, each of them prints one JSON object, and says where svc login keeps its token', async () => {
  // Before: "Every command that prints data accepts --json", yet `version --json` is a usage error;
  // and "SVC_CONFIG_DIR (default ~/.config/svc)", though $XDG_CONFIG_HOME/svc comes first.
  const help = (await cli('--help')).out.replace(/\s+/g, ' ')
  expect(help).toContain('--json prints one JSON object instead of text, on orgs, users, keys, credit, plans set, ledger verify, chat, fusion, encrypted-chat and dev-tee')
  expect(help).toContain('SVC_CONFIG_DIR (default $XDG_CONFIG_HOME/svc, else ~/.config/svc)')
  expect(help).not.toContain('Every command')
  // The database commands of that list (chat, fusion, encrypted-chat and dev-tee: their own tests).
  const org = await cliJson('orgs', 'create', '--name', 'Acme', '--plan', 'payg')
  const user = await cliJson('users', 'add', '--org', org.org_id, '--email', 'm@example.com', '--role', 'admin')
  const key = await cliJson('keys', 'create', '--org', org.org_id, '--user', user.user_id, '--name', 'k')
  for (const argv of [
    ['orgs', 'show', org.org_id],
    ['users', 'set-role', '--org', org.org_id, '--user', user.user_id, '--role', 'member'],
    ['keys', 'list', '--org', org.org_id],
    ['keys', 'revoke', key.key.id],
    ['credit', '--org', org.org_id, '--usd', '1'],
    ['plans', 'set', '--org', org.org_id, '--plan', 'pro'],
    ['ledger', 'verify'],
  ]) {
    const result = await cli(...argv, '--json')
    expect({ argv, code: result.code, lines: result.out.split('\n').length }).toEqual({ argv, code: 0, lines: 1 })
    expect(typeof JSON.parse(result.out)).toBe('object')
  }
})

test('--help and -h are help only as flags: a flag value or an argument after -- is no help request', async () => {
  // Before, either anywhere in argv printed the usage and exited 0: `credit … --note -h` booked
  // nothing, and `chat … -- -h` never sent its prompt (test/unit/cli-chat.test.ts).
  const org = await cliJson('orgs', 'create', '--name', 'A', '--plan', 'payg')
  const valued = await cli('credit', '--org', org.org_id, '--usd', '1', '--note', '-h')
  expect({ code: valued.code, out: valued.out, err: valued.err.split('\n')[0] }).toEqual({ code: 2, out: '', err: "usage error: Option '--note' argument is ambiguous." })
  expect(await cliJson('orgs', 'show', org.org_id)).toMatchObject({ prepaid_nanos: '0' })
  expect(await cliJson('credit', '--org', org.org_id, '--usd', '1', '--note=-h')).toMatchObject({ applied: true })

  // As a flag: the usage, exit 0, and nothing done; before the database is opened or the
  // configuration read, so a database that does not exist is not even looked for.
  const usage = (await cli('--help')).out
  expect(usage).toStartWith('svc — self-hostable LLM inference gateway')
  db.env.DATABASE_URL = `file:${join(db.dir, 'absent.db')}`
  db.env.SVC_CONFIG = join(db.dir, 'absent.yaml')
  for (const argv of [['credit', '-h'], ['ledger', 'verify', '--help'], ['orgs', 'show', '-h'], ['keys', 'create', '--org', org.org_id, '--admin', '-h'], ['keys', '--help'], ['migrate', '-h']]) {
    expect({ argv, ...(await cli(...argv)) }).toEqual({ argv, code: 0, out: usage, err: '' })
  }
  expect(await Bun.file(join(db.dir, 'absent.db')).exists()).toBe(false)
})

test('a help flag among a command group\'s arguments is the named subcommand\'s help, wherever it stands', async () => {
  // Before, `svc orgs --help create` was the usage error "orgs needs a subcommand", though
  // `svc orgs create --help` printed the help.
  const org = await cliJson('orgs', 'create', '--name', 'A', '--plan', 'payg')
  const help = await cli('orgs', 'create', '--help')
  expect({ code: help.code, err: help.err }).toEqual({ code: 0, err: '' })
  db.env.DATABASE_URL = `file:${join(db.dir, 'absent.db')}`
  for (const argv of [
    ['orgs', '--help', 'create'],
    ['orgs', '-h', 'create', '--name', 'B'],
    ['keys', '--org', org.org_id, '-h', 'list'],
    ['keys', '--org', org.org_id, 'create', '--admin', '--help'],
    ['users', '-h', 'set-role'],
    ['keys', '-h', 'frob'],
  ]) {
    expect({ argv, ...(await cli(...argv)) }).toEqual({ argv, ...help })
  }
  expect(await Bun.file(join(db.dir, 'absent.db')).exists()).toBe(false)
  // A flag's value stays no help request, wherever the subcommand stands; after `--` neither.
  for (const argv of [['orgs', '--name', '-h', 'create'], ['orgs', 'create', '--name', '-h']]) {
    const result = await cli(...argv)
    expect({ argv, code: result.code, err: result.err.split('\n')[0] }).toEqual({ argv, code: 2, err: "usage error: Option '--name' argument is ambiguous." })
  }
  // A subcommand's name as a flag's value is not the subcommand (QA: `show` was taken, and its
  // parser refused --name: "Unknown option '--name'", exit 2).
  for (const argv of [['orgs', '--name', 'show', 'create', '--help'], ['keys', '--org', org.org_id, '--name', 'list', 'create', '-h']]) {
    expect({ argv, ...(await cli(...argv)) }).toEqual({ argv, ...help })
  }
  const unknown = await cli('orgs', '--frob', 'show', 'create', '--help')
  // No candidate's parser takes the arguments: the first one's usage error.
  expect({ code: unknown.code, err: unknown.err.split('.')[0] }).toEqual({ code: 2, err: "usage error: Unknown option '--frob'" })
  const dashed = await cli('orgs', '--', '-h', 'create')
  expect({ code: dashed.code, err: dashed.err.split('\n')[0] }).toEqual({ code: 2, err: 'usage error: orgs needs a subcommand: orgs create, orgs show' })
})
