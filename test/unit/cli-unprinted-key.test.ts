import { expect, test } from 'bun:test'
import { join } from 'node:path'
import { runCli } from '../../src/commands'
import { loadConfig } from '../../src/config/load'
import { createDeps } from '../../src/deps'
import { silentLogger } from '../../src/observability/logger'
import { eachTestCliDatabase } from '../support/cli'

// A new key's secret is printed once (`orgs create`, `keys create`): when standard output does
// not take it, it goes to standard error and the command exits 1; when neither takes it, the key
// is revoked, exit 1. Before, console.log dropped the failed write: exit 0, not a word, and an
// active key nobody saw. Any other command whose output fails exits 1 naming it.

const { db, cli } = eachTestCliDatabase('svc-cli-unprinted-')
const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts')
const ENOSPC = 'ENOSPC: no space left on device, write'

/** An io whose standard output fails, and standard error too for its first `errFailures` lines. */
function failingIo(errFailures = 0) {
  const err: string[] = []
  let failures = errFailures
  const io = {
    out(): void {
      throw new Error(ENOSPC)
    },
    write(): void {
      throw new Error(ENOSPC)
    },
    err(line: string): void {
      if (failures-- > 0) throw new Error('EBADF: bad file descriptor, write')
      err.push(line)
    },
  }
  return { io, err }
}

async function cliJson(...argv: string[]) {
  const result = await cli(...argv, '--json')
  expect({ code: result.code, err: result.err }).toEqual({ code: 0, err: '' })
  return JSON.parse(result.out)
}

async function keyStatuses(orgId: string): Promise<Record<string, string>> {
  const { keys } = await cliJson('keys', 'list', '--org', orgId)
  return Object.fromEntries(keys.map((key: { id: string; status: string }) => [key.id, key.status]))
}

test('orgs create: a key standard output does not take goes to standard error, active, and the command exits 1', async () => {
  const { io, err } = failingIo()
  expect(await runCli(['orgs', 'create', '--name', 'Acme'], db.env, io)).toBe(1)
  const orgId = /^organization: (\S+) \(Acme, plan \w+\)$/.exec(err[0]!)![1]!
  expect(err[2]).toMatch(/^admin key: +z_sk_\S+$/)
  const { keys } = await cliJson('keys', 'list', '--org', orgId)
  expect(keys.map((key: { status: string }) => key.status)).toEqual(['active'])
  expect(err.at(-1)).toBe(`error: ${ENOSPC}; the admin key of organization ${orgId} was printed on standard error instead, and is active`)
})

test('orgs create: a key neither output takes is revoked, and the error says how to make another', async () => {
  // Standard error fails for the key, and takes the error line after it (the line is tried anyway).
  const { io, err } = failingIo(1)
  expect(await runCli(['orgs', 'create', '--name', 'Acme', '--json'], db.env, io)).toBe(1)
  expect(err).toHaveLength(1)
  const [, orgId, userId] = /--org (\S+) --user (\S+) --name admin --admin$/.exec(err[0]!)!
  expect(err[0]).toBe(
    `error: could not print the admin key of organization ${orgId} (${ENOSPC}; EBADF: bad file descriptor, write); it was revoked. ` +
      `Create one with: svc keys create --org ${orgId} --user ${userId} --name admin --admin`,
  )
  expect(Object.values(await keyStatuses(orgId!))).toEqual(['revoked'])
  // The command it names makes a working admin key.
  const created = await cliJson('keys', 'create', '--org', orgId!, '--user', userId!, '--name', 'admin', '--admin')
  expect(created.key).toMatchObject({ admin: true, status: 'active', token: expect.stringMatching(/^z_sk_/) })
})

test('keys create: to standard error when standard output fails; revoked when neither takes it', async () => {
  const org = await cliJson('orgs', 'create', '--name', 'Acme')
  const argv = ['keys', 'create', '--org', org.org_id, '--user', org.owner_user_id, '--name', 'ci']

  const onStderr = failingIo()
  expect(await runCli(argv, db.env, onStderr.io)).toBe(1)
  const [, shownId] = /^key (\S+) \(ci\): z_sk_\S+$/.exec(onStderr.err[0]!)!
  expect(onStderr.err.at(-1)).toBe(`error: ${ENOSPC}; key ${shownId} was printed on standard error instead, and is active`)

  const nowhere = failingIo(1)
  expect(await runCli([...argv, '--json'], db.env, nowhere.io)).toBe(1)
  const [, unseenId] = /^error: could not print key (\S+) \(/.exec(nowhere.err[0]!)!
  expect(nowhere.err[0]).toEndWith('; it was revoked. Run the same svc keys create command again.')
  expect(await keyStatuses(org.org_id)).toEqual({ [org.key_id]: 'active', [shownId!]: 'active', [unseenId!]: 'revoked' })
})

test('any other output that standard output does not take is a failure naming it, even when standard error fails too', async () => {
  const org = await cliJson('orgs', 'create', '--name', 'Acme')
  for (const argv of [['keys', 'list', '--org', org.org_id], ['orgs', 'show', org.org_id, '--json'], ['help'], ['version']]) {
    const { io, err } = failingIo()
    expect({ argv, code: await runCli(argv, db.env, io), err }).toEqual({ argv, code: 1, err: [`error: ${ENOSPC}`] })
  }
  // Nowhere to say it: the exit code still does (before, runCli threw).
  expect(await runCli(['keys', 'list', '--org', org.org_id], db.env, failingIo(Infinity).io)).toBe(1)
})

/** Runs the svc executable with stdout and stderr as given (a shell closes them with `>&-`). */
async function svc(redirect: string, ...argv: string[]) {
  const child = Bun.spawn(['sh', '-c', `exec "$0" "$@" ${redirect}`, process.execPath, CLI, ...argv], { env: { ...process.env, ...db.env }, stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { code, stdout, stderr }
}

test('the svc executable: a full disk or a closed standard output', async () => {
  const full = await svc('>/dev/full', 'orgs', 'create', '--name', 'Full')
  expect(full.code).toBe(1)
  expect(full.stderr).toMatch(/^admin key: +z_sk_/m)
  expect(full.stderr).toContain(`error: cannot write to standard output: ${ENOSPC}; the admin key of organization`)

  const closed = await svc('>&-', 'orgs', 'create', '--name', 'Closed', '--json')
  expect(closed.code).toBe(1)
  expect(JSON.parse(closed.stderr.split('\n')[0]!)).toMatchObject({ name: 'Closed', key: expect.stringMatching(/^z_sk_/) })
  expect(closed.stderr).toContain('error: cannot write to standard output: it is closed; the admin key of organization')

  // Neither: exit 1, the key revoked.
  expect((await svc('>/dev/full 2>/dev/full', 'orgs', 'create', '--name', 'Nowhere')).code).toBe(1)
  expect((await svc('>&- 2>&-', 'orgs', 'create', '--name', 'Nowhere too')).code).toBe(1)
  // An operator's own /dev/null is where they chose to send it: printed there, exit 0.
  expect((await svc('>/dev/null', 'orgs', 'create', '--name', 'Discarded')).code).toBe(0)
  expect(await orgKeyStatuses()).toEqual({ Full: ['active'], Closed: ['active'], Nowhere: ['revoked'], 'Nowhere too': ['revoked'], Discarded: ['active'] })
}, 30_000)

/** Each organization's key statuses, by its name. */
async function orgKeyStatuses(): Promise<Record<string, string[]>> {
  const deps = await createDeps(loadConfig(db.env), { logger: silentLogger })
  try {
    const rows = (await deps.database.client.execute('SELECT o.name, k.status FROM api_keys k JOIN orgs o ON o.id = k.org_id ORDER BY k.created_at_ms')).rows
    const byName: Record<string, string[]> = {}
    for (const row of rows) (byName[String(row.name)] ??= []).push(String(row.status))
    return byName
  } finally {
    await deps.close()
  }
}
