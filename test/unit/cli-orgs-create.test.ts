import { afterEach, beforeEach, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../../src/commands'
import { loadConfig } from '../../src/config/load'
import { createDeps } from '../../src/deps'
import { silentLogger } from '../../src/observability/logger'
import { captureIo } from '../support/cli'

// `svc orgs create`: what it accepts as a name, and what it says when it cannot finish (QA cli #3, #7).

let dir: string
let env: Record<string, string>
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-cli-orgs-'))
  env = { DATABASE_URL: `file:${join(dir, 'svc.db')}`, SVC_LOG_LEVEL: 'error' }
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

async function cli(...argv: string[]) {
  const { io, out, err } = captureIo()
  const code = await runCli(argv, env, io)
  return { code, out: out.join('\n'), err: err.join('\n') }
}

/** Runs a count on the command's database file, as an operator's sqlite3 session would. */
async function count(statement: string): Promise<number> {
  const deps = await createDeps(loadConfig(env), { logger: silentLogger })
  try {
    return Number((await deps.database.client.execute(statement)).rows[0]![0])
  } finally {
    await deps.close()
  }
}

test('an organization name with control characters is refused as a key name is, and nothing is created', async () => {
  // Before, an escape sequence was stored and `orgs show` printed it raw: a cleared screen and a fake "plan:" line.
  for (const name of ['\u001b[2J\u001b[31mEVIL\u001b[0m', 'two\nlines', 'tab\there', 'del\u007f', 'csi\u009b31m']) {
    const org = await cli('orgs', 'create', '--name', name)
    expect({ name, code: org.code, err: org.err.split('\n')[0] }).toEqual({ name, code: 2, err: 'usage error: --name must not contain control characters' })
  }
  const surrogate = await cli('orgs', 'create', '--name', 'half \ud800')
  expect(surrogate.err.split('\n')[0]).toBe('usage error: --name must be valid Unicode text (no unpaired surrogates)')
  expect(await count('SELECT count(*) FROM orgs')).toBe(0)
  // Text a person can read still goes through.
  expect((await cli('orgs', 'create', '--name', 'Acme — Zürich 🦊')).code).toBe(0)
})
