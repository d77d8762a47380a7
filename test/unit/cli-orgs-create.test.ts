import { expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { createDeps } from '../../src/deps'
import { silentLogger } from '../../src/observability/logger'
import { eachTestCliDatabase } from '../support/cli'

// `svc orgs create`: what it accepts as a name, and what it says when it cannot finish (QA cli #3, #7).

const { db, cli } = eachTestCliDatabase('svc-cli-orgs-')

/** Runs a statement on the command's database file, as an operator's sqlite3 session would. */
async function execute(statement: string) {
  const deps = await createDeps(loadConfig(db.env), { logger: silentLogger })
  try {
    return (await deps.database.client.execute(statement)).rows
  } finally {
    await deps.close()
  }
}

/** Stands in for a database failure during the ledger's write (QA did the same with sqlite3). */
const REFUSE_ENTRIES = "CREATE TRIGGER refuse_entries BEFORE INSERT ON ledger_entries BEGIN SELECT raise(abort, 'simulated ledger failure'); END"

test('an organization name with control characters is refused as a key name is, and nothing is created', async () => {
  // Before, an escape sequence was stored and `orgs show` printed it raw: a cleared screen and a fake "plan:" line.
  for (const name of ['\u001b[2J\u001b[31mEVIL\u001b[0m', 'two\nlines', 'tab\there', 'del\u007f', 'csi\u009b31m']) {
    const org = await cli('orgs', 'create', '--name', name)
    expect({ name, code: org.code, err: org.err.split('\n')[0] }).toEqual({ name, code: 2, err: 'usage error: --name must not contain control characters' })
  }
  const surrogate = await cli('orgs', 'create', '--name', 'half \ud800')
  expect(surrogate.err.split('\n')[0]).toBe('usage error: --name must be valid Unicode text (no unpaired surrogates)')
  expect(Number((await execute('SELECT count(*) FROM orgs'))[0]![0])).toBe(0)
  // Text a person can read still goes through.
  expect((await cli('orgs', 'create', '--name', 'Acme — Zürich 🦊')).code).toBe(0)
})

test('when the initial credit fails, the organization and key that were created are printed with the command that books it', async () => {
  // Before: only "error: …", exit 1, while the organization and an admin key whose secret was
  // never printed stayed in the database (a retry made a second organization).
  await execute(REFUSE_ENTRIES)
  const failed = await cli('orgs', 'create', '--name', 'Acme', '--plan', 'payg', '--credit-usd', '25')
  expect(failed.code).toBe(1)
  const orgId = /^organization: (\S+) \(Acme, plan payg\)$/m.exec(failed.out)![1]!
  const secret = /^admin key: +(z_sk_\S+)$/m.exec(failed.out)![1]!
  const [note, error] = failed.err.split('\n')
  const keyId = (await cliJsonOk('keys', 'list', '--org', orgId)).keys[0].id
  const retry = `svc credit --org ${orgId} --usd 25.000000000 --reference orgs-create:${orgId}`
  expect(note).toBe(`organization ${orgId} and its admin key ${keyId} were created, but the initial credit of 25.000000000 USD was not booked; book it with: ${retry}`)
  expect(error).toContain('simulated ledger failure')

  // The printed command books the credit, once.
  await execute('DROP TRIGGER refuse_entries')
  const argv = retry.split(' ').slice(1)
  expect(await cliJsonOk(...argv)).toMatchObject({ applied: true, available_nanos: '25000000000' })
  expect(await cliJsonOk(...argv)).toMatchObject({ applied: false })
  // The printed key is the organization's admin key.
  expect((await cliJsonOk('orgs', 'show', orgId))).toMatchObject({ active_keys: 1, prepaid_nanos: '25000000000' })
  expect(secret).toStartWith('z_sk_')

  // --json prints the same object as on success, with nothing credited.
  await execute(REFUSE_ENTRIES)
  const json = await cli('orgs', 'create', '--name', 'Beta', '--credit-usd', '1', '--json')
  expect(json.code).toBe(1)
  expect(JSON.parse(json.out)).toMatchObject({ name: 'Beta', credit_nanos: '0', key: expect.stringMatching(/^z_sk_/) })
})

async function cliJsonOk(...argv: string[]) {
  const result = await cli(...argv, '--json')
  expect({ code: result.code, err: result.err }).toEqual({ code: 0, err: '' })
  return JSON.parse(result.out)
}
