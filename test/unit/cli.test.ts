import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { DrizzleQueryError } from 'drizzle-orm/errors'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp } from '../../src/app'
import { failureLine, runCli } from '../../src/commands'
import { loadConfig } from '../../src/config/load'
import { createDeps } from '../../src/deps'
import { silentLogger } from '../../src/observability/logger'
import { captureIo } from '../support/cli'

let dir: string
let env: Record<string, string>
/** A well-formed id that names nothing. */
const MISSING = '00000000-0000-4000-8000-000000000000'

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-cli-'))
  env = { DATABASE_URL: `file:${join(dir, 'svc.db')}`, SVC_LOG_LEVEL: 'error' }
  // Only migrate and serve create a database; the other commands need one.
  expect((await cli('migrate')).code).toBe(0)
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

async function cli(...argv: string[]) {
  const { io, out, err } = captureIo()
  const code = await runCli(argv, env, io)
  return { code, out: out.join('\n'), err: err.join('\n') }
}

async function cliJson(...argv: string[]) {
  const result = await cli(...argv, '--json')
  expect(result.err).toBe('')
  expect(result.code).toBe(0)
  return JSON.parse(result.out)
}

/** The API over the same database file the CLI wrote. */
async function api(path: string, key: string, init: RequestInit = {}) {
  const deps = await createDeps(loadConfig(env), { logger: silentLogger })
  try {
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    return await createApp(deps).handle(new Request(`http://localhost${path}`, { ...init, headers }))
  } finally {
    await deps.close()
  }
}

describe('svc CLI', () => {
  test('migrate on an empty database succeeds and is idempotent', async () => {
    env.DATABASE_URL = `file:${join(dir, 'new', 'svc.db')}`
    expect((await cli('migrate')).code).toBe(0)
    expect((await cli('migrate')).code).toBe(0)
  })

  test('orgs create prints an org, its owner and an admin key that works on the API', async () => {
    const created = await cliJson('orgs', 'create', '--name', 'Acme', '--owner', 'Boss@Example.com', '--plan', 'payg')
    expect(created.plan).toBe('payg')
    expect(created.key).toMatch(/^z_sk_/)
    const response = await api('/api/v1/api-keys', created.key)
    expect(response.status).toBe(200)
    const { keys } = (await response.json()) as { keys: Array<{ id: string; admin: boolean }> }
    expect(keys).toEqual([expect.objectContaining({ id: created.key_id, admin: true })])
  })

  test('human output shows the key once with a warning', async () => {
    const result = await cli('orgs', 'create', '--name', 'Plain')
    expect(result.code).toBe(0)
    expect(result.out).toMatch(/admin key: +z_sk_[0-9A-Za-z]+/)
    expect(result.out).toContain('shown only once')
    expect(result.out).not.toContain('credit:')
    // The credit booked is said too, as --json says it.
    const credited = await cli('orgs', 'create', '--name', 'Funded', '--credit-usd', '1.5')
    expect(credited.out).toMatch(/^credit: +1\.500000000 USD$/m)
  })

  test('users add, keys create, set-role, keys list and keys revoke', async () => {
    const org = await cliJson('orgs', 'create', '--name', 'Acme')
    const user = await cliJson('users', 'add', '--org', org.org_id, '--email', 'dev@example.com', '--role', 'admin')
    expect(user.created).toBe(true)
    const created = await cliJson('keys', 'create', '--org', org.org_id, '--user', user.user_id, '--name', 'dev admin', '--admin', '--expires-in', '30d')
    expect(created.key.admin).toBe(true)
    expect(created.key.expires_at).toBeString()
    expect((await api('/api/v1/api-keys', created.key.token)).status).toBe(200)

    await cliJson('users', 'set-role', '--org', org.org_id, '--user', user.user_id, '--role', 'member')
    expect((await api('/api/v1/api-keys', created.key.token)).status).toBe(403)

    const listed = await cliJson('keys', 'list', '--org', org.org_id)
    expect(listed.keys.map((key: { name: string }) => key.name).sort()).toEqual(['admin', 'dev admin'])
    expect(JSON.stringify(listed)).not.toContain('z_sk_')

    await cliJson('keys', 'revoke', created.key.id)
    expect((await api('/api/v1/api-keys', created.key.token)).status).toBe(401)
    const again = await cli('keys', 'revoke', created.key.id)
    expect(again.code).toBe(1)
    expect(again.err).toContain('no active or expired key')
  })

  test('keys revoke takes a key id in any case, as DELETE /api/v1/api-keys does', async () => {
    const org = await cliJson('orgs', 'create', '--name', 'Acme')
    expect(await cliJson('keys', 'revoke', org.key_id.toUpperCase())).toEqual({ key_id: org.key_id, status: 'revoked' })
    expect((await api('/api/v1/api-keys', org.key)).status).toBe(401)
  })

  test('keys create shares the API rules: a trimmed name counted in characters, leap seconds and long fractions', async () => {
    const org = await cliJson('orgs', 'create', '--name', 'Acme')
    const key = ['keys', 'create', '--org', org.org_id, '--user', org.owner_user_id]
    const leap = await cliJson(...key, '--name', ` ${'🔑'.repeat(200)} `, '--expires-in', '2099-12-31T23:59:60Z')
    expect(leap.key).toMatchObject({ name: '🔑'.repeat(200), expires_at: '2100-01-01T00:00:00.000Z' })
    const fraction = await cliJson(...key, '--name', 'f', '--expires-in', '2099-01-01T00:00:00.1234567891Z')
    expect(fraction.key.expires_at).toBe('2099-01-01T00:00:00.123Z')
    const tooLong = await cli(...key, '--name', '🔑'.repeat(201))
    expect(tooLong.code).toBe(2)
    expect(tooLong.err).toStartWith('usage error: --name must be at most 200 characters')
    const notLeap = await cli(...key, '--name', 'n', '--expires-in', '2099-12-30T23:59:60Z')
    expect(notLeap.code).toBe(2)
    expect(notLeap.err).toStartWith('usage error: --expires-in must be one of')
  })

  test('the last owner cannot be demoted', async () => {
    const org = await cliJson('orgs', 'create', '--name', 'Solo')
    const result = await cli('users', 'set-role', '--org', org.org_id, '--user', org.owner_user_id, '--role', 'admin')
    expect(result.code).toBe(1)
    expect(result.err).toContain('last owner')
  })

  test('bad arguments are usage errors (exit 2) with a clear message', async () => {
    const cases: Array<[string[], string]> = [
      [['orgs', 'create'], '--name is required'],
      [['orgs', 'create', '--name'], "--name"],
      [['orgs', 'create', '--name', 'x', '--bogus'], 'bogus'],
      [['users', 'add', '--org', 'o', '--email', 'e@x.y', '--role', 'king'], '--role must be one of owner, admin, member'],
      [['keys', 'revoke'], 'expected one argument, KEY_ID, got 0'],
      [['orgs', 'show', 'a', 'b'], 'expected one argument, ORG, got 2 (quote an argument that holds spaces)'],
      [['frobnicate'], 'unknown command "frobnicate"'],
      // Names every object inherits are not commands (they once reached the database step).
      [['toString'], 'unknown command "toString"'],
      [['constructor', 'x'], 'unknown command "constructor x"'],
      // A command group alone names its subcommands (before: "unknown command").
      [['ledger'], 'usage error: ledger needs a subcommand: ledger verify'],
      [['keys'], 'usage error: keys needs a subcommand: keys create, keys list, keys revoke'],
      [['ledger', '--json'], 'usage error: ledger needs a subcommand: ledger verify'],
      [['keys', 'show'], 'usage error: unknown command "keys show": keys takes keys create, keys list, keys revoke'],
    ]
    for (const [argv, message] of cases) {
      const result = await cli(...argv)
      expect(result.code).toBe(2)
      expect(result.err).toContain(message)
    }
    // A mistyped command is a usage error even when the configuration would not load.
    const broken = await runCli(['frobnicate'], { ...env, SVC_CONFIG: '/nonexistent/svc.yaml' }, captureIo().io)
    expect(broken).toBe(2)
  })

  test('domain failures exit 1 naming the problem', async () => {
    const org = await cliJson('orgs', 'create', '--name', 'Acme')
    const cases: Array<[string[], string]> = [
      [['keys', 'list', '--org', MISSING], `no organization ${MISSING}`],
      [['keys', 'create', '--org', org.org_id, '--user', MISSING, '--name', 'k'], 'not a member'],
      [['users', 'add', '--org', org.org_id, '--email', 'dup@example.com', '--role', 'member'], ''],
      [['users', 'add', '--org', org.org_id, '--email', 'DUP@example.com', '--role', 'member'], 'already a member'],
    ]
    for (const [argv, message] of cases) {
      const result = await cli(...argv)
      if (message === '') {
        expect(result.code).toBe(0)
        continue
      }
      expect(result.code).toBe(1)
      expect(result.err).toContain(message)
    }
  })

  test('bad flag values are usage errors (exit 2) naming the flag, not the API field, and write nothing', async () => {
    // Before, each exited 1 (a failure, as if the database had erred) with the JSON field's name:
    // "expires_in must be one of …", "spend_cap_period and spend_cap_nanos must be given together".
    const org = await cliJson('orgs', 'create', '--name', 'Acme')
    const key = ['keys', 'create', '--org', org.org_id, '--user', org.owner_user_id, '--name', 'k']
    const cases: Array<[string[], string, string]> = [
      [[...key, '--expires-in', 'tomorrow'], '--expires-in must be one of: never, 10m', 'expires_in'],
      [[...key, '--expires-in', '2001-01-01'], '--expires-in is in the past', 'expires_in'],
      [[...key, '--spend-cap-period', 'daily'], '--spend-cap-period and --spend-cap-nanos must be given together', 'spend_cap'],
      [[...key, '--spend-cap-period', 'weekly', '--spend-cap-nanos', '5'], '--spend-cap-period must be daily, monthly or overall', 'spend_cap'],
      [[...key, '--spend-cap-period', 'daily', '--spend-cap-nanos', '1.5'], '--spend-cap-nanos must be a positive decimal integer', 'spend_cap'],
      [[...key.slice(0, -1), ' '], '--name must not be blank', 'usage error: name'],
      [['orgs', 'create', '--name', ' '], '--name must be 1 to 200 characters', 'usage error: name'],
      // QA: an invisible-only organization name was taken, as a key's is not.
      [['orgs', 'create', '--name', '\u200b\u2060'], '--name must not be blank', 'usage error: name'],
      [['orgs', 'create', '--name', 'x', '--plan', 'gold'], '--plan: unknown plan "gold"', 'usage error: unknown'],
      [['orgs', 'create', '--name', 'x', '--owner', 'not-an-email'], '--owner must be an email address', 'usage error: owner'],
      [['users', 'add', '--org', org.org_id, '--email', 'not-an-email', '--role', 'member'], '--email must be an email address', 'usage error: email'],
    ]
    for (const [argv, message, apiWording] of cases) {
      const result = await cli(...argv)
      expect({ argv, code: result.code }).toEqual({ argv, code: 2 })
      expect(result.err).toStartWith(`usage error: ${message}`)
      expect(result.err).not.toContain(apiWording)
    }
    expect((await cliJson('keys', 'list', '--org', org.org_id)).keys).toHaveLength(1)
    // An organization's name counts characters, as a key's does: 200 emoji fit, 201 do not.
    expect((await cliJson('orgs', 'create', '--name', '🦊'.repeat(200))).name).toBe('🦊'.repeat(200))
    expect((await cli('orgs', 'create', '--name', '🦊'.repeat(201))).code).toBe(2)
    // A flag that is well formed but names something missing is still a failure (exit 1).
    const unknownOrg = await cli('keys', 'create', '--org', MISSING, '--user', org.owner_user_id, '--name', 'k')
    expect(unknownOrg.code).toBe(1)
    expect(unknownOrg.err).toContain(`no organization ${MISSING}`)
    // One that is no id at all is a usage error naming it (before: a lookup that found nothing, exit 1).
    for (const [argv, name] of [
      [['keys', 'list', '--org', 'nope'], '--org'],
      [['keys', 'create', '--org', org.org_id, '--user', 'nobody', '--name', 'k'], '--user'],
      [['keys', 'revoke', 'not-a-uuid'], 'KEY_ID'],
      [['orgs', 'show', 'not-a-uuid'], 'ORG'],
      [['users', 'set-role', '--org', org.org_id, '--user', 'x', '--role', 'admin'], '--user'],
      [['plans', 'set', '--org', 'nope', '--plan', 'payg'], '--org'],
    ] as const) {
      const result = await cli(...argv)
      expect([argv.join(' '), result.code]).toEqual([argv.join(' '), 2])
      expect(result.err).toContain(`${name} must be a UUID, got "`)
    }
  })

  test('invalid configuration stops with a message naming the field', async () => {
    env.PORT = 'eighty'
    const result = await cli('migrate')
    expect(result.code).toBe(1)
    expect(result.err).toContain('PORT')
  })

  test('an empty setting is unset, as an empty PORT is: the command runs on the defaults', async () => {
    Object.assign(env, { PORT: '', SVC_LOG_LEVEL: '', SVC_BOOTSTRAP: '', SVC_INSTANCE_ID: '', SVC_URL: '' })
    const result = await cli('migrate')
    expect(result.err).toBe('')
    expect(result.code).toBe(0)
  })

  test('help prints usage', async () => {
    const result = await cli('--help')
    expect(result.code).toBe(0)
    expect(result.out).toContain('keys create')
  })

  test('version and --version print the package version, opening no database', async () => {
    env.DATABASE_URL = `file:${join(dir, 'unopened.db')}`
    const { version } = await Bun.file(join(import.meta.dir, '..', '..', 'package.json')).json()
    for (const flag of ['--version', 'version']) {
      const result = await cli(flag)
      expect(result).toEqual({ code: 0, out: version, err: '' })
    }
    expect(await Bun.file(join(dir, 'unopened.db')).exists()).toBe(false)
    expect((await cli('--help')).out).toContain('--version')
  })

  test('help names every process setting of the README (Configuration) and every command of its Operator CLI table', async () => {
    const readme = await Bun.file(join(import.meta.dir, '..', '..', 'README.md')).text()
    const section = (title: string) => readme.slice(readme.indexOf(`\n## ${title}\n`)).split('\n\n').find(block => block.startsWith('| '))!
    const firstCells = (table: string) => table.split('\n').slice(2).map(row => row.split(' | ')[0]!)
    const variables = firstCells(section('Configuration')).flatMap(cell => [...cell.matchAll(/`([A-Z_]+)`/g)].map(match => match[1]!))
    const commands = firstCells(section('Operator CLI')).map(cell => /`([a-z-]+(?: [a-z]+)?)/.exec(cell)![1]!)
    expect(variables).toContain('OLLAMA_BASE_URL')
    expect(commands).toContain('keys revoke')
    const usage = (await cli('--help')).out
    const environment = usage.slice(usage.indexOf('\nEnvironment:'))
    expect(variables.filter(name => !environment.includes(name))).toEqual([])
    expect(commands.filter(command => !usage.includes(`  ${command}`))).toEqual([])
  })
})

describe('svc CLI: billing', () => {
  test('credit, orgs show, plans set and ledger verify', async () => {
    const org = await cliJson('orgs', 'create', '--name', 'Acme', '--plan', 'payg', '--credit-usd', '1.5')
    expect(org.credit_nanos).toBe('1500000000')
    const credited = await cliJson('credit', '--org', org.org_id, '--usd', '0.25', '--reference', 'inv-1', '--note', 'invoice 1')
    expect(credited).toMatchObject({ applied: true, amount_nanos: '250000000', available_nanos: '1750000000' })
    // The same reference again changes nothing.
    expect(await cliJson('credit', '--org', org.org_id, '--nanos', '250000000', '--reference', 'inv-1')).toMatchObject({ applied: false, available_nanos: '1750000000' })

    const shown = await cliJson('orgs', 'show', org.org_id)
    expect(shown).toMatchObject({ plan: 'payg', fusion: false, prepaid_nanos: '1750000000', allowance_left_nanos: '0', active_keys: 1 })

    await cliJson('plans', 'set', '--org', org.org_id, '--plan', 'pro')
    const upgraded = await cliJson('orgs', 'show', org.org_id)
    // An upgrade raises this month's allowance at once: 20 USD on top of the prepaid balance.
    expect(upgraded).toMatchObject({ plan: 'pro', fusion: true, allowance_left_nanos: '20000000000', available_nanos: '21750000000' })
    await cliJson('plans', 'set', '--org', org.org_id, '--plan', 'payg')
    // A downgrade keeps this month's allowance.
    expect(await cliJson('orgs', 'show', org.org_id)).toMatchObject({ plan: 'payg', allowance_left_nanos: '20000000000' })

    expect(await cliJson('ledger', 'verify')).toEqual({ ok: true, violations: [] })
    const human = await cli('orgs', 'show', org.org_id)
    expect(human.out).toContain('available:      21.750000000 USD')
  })

  test('a reference already booked for another organization or amount is refused, never reported as done', async () => {
    const a = await cliJson('orgs', 'create', '--name', 'A', '--plan', 'payg')
    const b = await cliJson('orgs', 'create', '--name', 'B', '--plan', 'payg')
    await cliJson('credit', '--org', a.org_id, '--usd', '1', '--reference', 'inv-1')
    // Another organization's payment with a colliding reference: it must not be lost silently.
    const other = await cli('credit', '--org', b.org_id, '--usd', '1', '--reference', 'inv-1')
    expect(other.code).toBe(1)
    expect(other.err).toContain(`reference inv-1 was already used for a top-up of 1.000000000 USD to ${a.org_id}`)
    // The same organization with another amount: a typo or a second payment, never "already credited".
    const amount = await cli('credit', '--org', a.org_id, '--usd', '7', '--reference', 'inv-1')
    expect(amount.code).toBe(1)
    expect(amount.err).toContain('already used for a top-up of 1.000000000 USD')
    expect(await cliJson('orgs', 'show', a.org_id)).toMatchObject({ prepaid_nanos: '1000000000' })
    expect(await cliJson('orgs', 'show', b.org_id)).toMatchObject({ prepaid_nanos: '0' })
    // An empty reference (a script's unset "$PAYMENT_ID") would book every retry again.
    const empty = await cli('credit', '--org', a.org_id, '--usd', '1', '--reference', '')
    expect(empty.code).toBe(2)
    expect(empty.err).toContain('--reference must not be empty')
    // The true repeat (same organization, same amount) is still applied once and reported so.
    expect(await cliJson('credit', '--org', a.org_id, '--nanos', '1000000000', '--reference', 'inv-1')).toMatchObject({ applied: false })
    expect(await cliJson('ledger', 'verify')).toEqual({ ok: true, violations: [] })
  })

  test('ledger verify exits 1 naming each violation', async () => {
    const org = await cliJson('orgs', 'create', '--name', 'Acme', '--credit-usd', '1')
    const deps = await createDeps(loadConfig(env), { logger: silentLogger })
    await deps.database.client.execute({ sql: 'UPDATE balances SET prepaid_nanos = prepaid_nanos + 1 WHERE org_id = ?', args: [org.org_id] })
    await deps.close()
    const result = await cli('ledger', 'verify')
    expect(result.code).toBe(1)
    expect(result.out).toContain(`org ${org.org_id}: balances.prepaid_nanos 1000000001 != ledger entries 1000000000`)
  })

  test('bad billing arguments are usage errors', async () => {
    const org = await cliJson('orgs', 'create', '--name', 'Acme')
    const cases: Array<[string[], string]> = [
      [['credit', '--org', org.org_id], 'exactly one of --usd and --nanos'],
      [['credit', '--org', org.org_id, '--usd', '1', '--nanos', '5'], 'exactly one of --usd and --nanos'],
      [['credit', '--org', org.org_id, '--usd', '1.0000000001'], 'at most 9 decimals'],
      // A negative amount reaches --usd's own check (parseArgs alone calls it "ambiguous").
      [['credit', '--org', org.org_id, '--usd', '-3'], 'usage error: --usd must be a positive decimal'],
      [['credit', '--org', org.org_id, '--nanos', '-3'], 'usage error: --nanos must be a positive integer'],
      [['credit', '--org', org.org_id, '--nanos', '0'], '--nanos must be a positive integer'],
      [['plans', 'set', '--org', org.org_id, '--plan', 'gold'], '--plan must be one of'],
      [['orgs', 'create', '--name', 'x', '--credit-usd', 'lots'], '--credit-usd must be a decimal with at most 9 decimals'],
      [['orgs', 'create', '--name', 'x', '--credit-usd', '01'], '--credit-usd must be a decimal with at most 9 decimals'],
      // Well formed but past int64 nanos: before, these read "must be a decimal with at most 9 decimals" / "a positive integer".
      [['orgs', 'create', '--name', 'x', '--credit-usd', '99999999999999999999'], '--credit-usd is more than the ledger can hold (at most 9223372036.854775807 USD)'],
      [['credit', '--org', org.org_id, '--usd', '9223372036.854775808'], '--usd is more than the ledger can hold (at most 9223372036.854775807 USD)'],
      [['credit', '--org', org.org_id, '--nanos', '99999999999999999999999'], '--nanos is more than the ledger can hold (at most 9223372036854775807 nanos)'],
    ]
    for (const [argv, message] of cases) {
      const result = await cli(...argv)
      expect(result.code).toBe(2)
      expect(result.err).toContain(message)
    }
    const missing = await cli('credit', '--org', MISSING, '--usd', '1')
    expect(missing.code).toBe(1)
    expect(missing.err).toContain(`no organization ${MISSING}`)
    expect((await cli('credit', '--org', 'nope', '--usd', '1')).code).toBe(2)
  })

  test('a top-up --note or --reference past the ledger\'s limit is a usage error naming the flag; nothing is booked', async () => {
    // Before: any length was booked onto the ledger entry.
    const org = await cliJson('orgs', 'create', '--name', 'Acme')
    for (const [argv, message] of [
      [['--note', 'n'.repeat(501)], '--note must be at most 500 characters'],
      [['--reference', 'r'.repeat(201)], '--reference must be at most 200 characters'],
    ] as const) {
      const result = await cli('credit', '--org', org.org_id, '--usd', '1', ...argv)
      expect({ code: result.code, err: result.err }).toEqual({ code: 2, err: expect.stringContaining(message) })
    }
    expect(await cliJson('orgs', 'show', org.org_id)).toMatchObject({ prepaid_nanos: '0' })
    // At the limits, booked; characters, not UTF-16 units (QA: 300 emoji were refused as over 500).
    expect(await cliJson('credit', '--org', org.org_id, '--usd', '1', '--note', 'n'.repeat(500), '--reference', 'r'.repeat(200))).toMatchObject({ applied: true })
    expect(await cliJson('credit', '--org', org.org_id, '--usd', '1', '--note', '🔑'.repeat(500), '--reference', '🔑'.repeat(200))).toMatchObject({ applied: true })
  })
})

test('a write the database refused (another process holds its lock) names the database in the failure line', () => {
  const config = loadConfig({ DATABASE_URL: 'file:/srv/svc/svc.db' })
  const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })
  expect(failureLine(busy, config)).toBe('database error at file:/srv/svc/svc.db: SQLITE_BUSY: database is locked')
  // Anything else is its own cause, unprefixed.
  expect(failureLine(new Error('HTTP 500: boom'), config)).toBe('HTTP 500: boom')
})

test('a cause that repeats its error code (libSQL under drizzle) is said once', () => {
  const config = loadConfig({ DATABASE_URL: 'file:/srv/svc/svc.db' })
  const native = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })
  const libsql = Object.assign(new Error('SQLITE_BUSY: database is locked', { cause: native }), { code: 'SQLITE_BUSY' })
  expect(failureLine(new DrizzleQueryError('insert into orgs …', [], libsql), config)).toBe('database error at file:/srv/svc/svc.db: SQLITE_BUSY: database is locked')
  // A batch's error repeats the code in its own message.
  const batch = Object.assign(new Error('SQLITE_BUSY: SQLITE_BUSY: database is locked', { cause: native }), { code: 'SQLITE_BUSY' })
  expect(failureLine(batch, config)).toBe('database error at file:/srv/svc/svc.db: SQLITE_BUSY: database is locked')
})
