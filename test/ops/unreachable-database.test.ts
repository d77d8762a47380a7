import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runSvc } from '../support/gateway-process'

// `svc` with a database it cannot reach, as an operator meets it: the real CLI in a child
// process. One line on stderr that names the database and the cause, exit 1; no stack trace,
// no SQL, and never the DATABASE_AUTH_TOKEN.

const SECRET = 'db-token-must-not-leak-0123456789'
const UNREACHABLE = { DATABASE_URL: 'http://127.0.0.1:1', DATABASE_AUTH_TOKEN: SECRET, SVC_LOG_LEVEL: 'error' }

function expectOneClearLine(result: { code: number; stdout: string; stderr: string }): void {
  expect(result.code).toBe(1)
  const lines = result.stderr.trimEnd().split('\n')
  expect(lines).toHaveLength(1)
  expect(lines[0]).toMatch(/^error: cannot reach the database at http:\/\/127\.0\.0\.1:1: .*ECONNREFUSED/)
  expect(result.stderr + result.stdout).not.toContain(SECRET)
  expect(result.stderr).not.toContain('CREATE TABLE')
  expect(result.stderr).not.toMatch(/\n\s+at /)
}

describe('an unreachable database', () => {
  test('svc serve: one line naming the cause, exit 1', async () => {
    const result = await runSvc(['serve'], { ...UNREACHABLE, PORT: '0' })
    expectOneClearLine(result)
    expect(result.stdout).toBe('')
  })

  test('an operator command (keys list): the cause, not just "Failed query"', async () => {
    expectOneClearLine(await runSvc(['keys', 'list', '--org', '00000000-0000-4000-8000-000000000000'], UNREACHABLE))
  })

  test('credentials in the URL are redacted too', async () => {
    const result = await runSvc(['migrate'], { ...UNREACHABLE, DATABASE_URL: `http://admin:${SECRET}@127.0.0.1:1` })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('cannot reach the database at http://[redacted]@127.0.0.1:1')
    expect(result.stderr).not.toContain(SECRET)
  })

  test('a URL with credentials and an authToken is shown redacted once, cleanly', async () => {
    // Before: `…127.0.0.1:1?[redacted]]: …`, the URL's own redaction redacted again as free text.
    const result = await runSvc(['keys', 'list', '--org', '00000000-0000-4000-8000-000000000000'], { ...UNREACHABLE, DATABASE_URL: `libsql://user:pass@127.0.0.1:1?authToken=${SECRET}` })
    expect(result.code).toBe(1)
    expect(result.stderr).toStartWith('error: cannot reach the database at libsql://[redacted]@127.0.0.1:1?[redacted]: ECONNREFUSED')
    expect(result.stderr).not.toContain(SECRET)
  })
})

describe('a DATABASE_URL that names a directory', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-db-dir-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const env = { DATABASE_URL: `file:${dir}`, SVC_LOG_LEVEL: 'error' }

  function expectNamed(result: { code: number; stdout: string; stderr: string }): void {
    expect(result.code).toBe(1)
    const lines = result.stderr.trimEnd().split('\n')
    expect(lines).toEqual([`error: cannot open the database at file:${dir} (DATABASE_URL): ${dir} is a directory, not a database file`])
  }

  test('svc serve: one line naming DATABASE_URL and the cause, exit 1', async () => {
    const result = await runSvc(['serve'], { ...env, PORT: '0' })
    expectNamed(result)
    expect(result.stdout).toBe('')
  })

  test('the commands that open the database say the same', async () => {
    expectNamed(await runSvc(['migrate'], env))
    expectNamed(await runSvc(['keys', 'list', '--org', '00000000-0000-4000-8000-000000000000'], env))
  })
})
