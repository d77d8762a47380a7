import { afterEach, beforeEach, expect } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** Line sinks for a command's `io`, and what was written to each. */
export function captureIo() {
  const out: string[] = []
  const err: string[] = []
  /** What was written as it came (a streamed answer). */
  const written: string[] = []
  return { io: { out: (line: string) => out.push(line), err: (line: string) => err.push(line), write: (text: string) => written.push(text) }, out, err, written }
}

/** Runs a command to completion; returns its exit code and output. */
export async function runProcess(cmd: string[], options: { env: Record<string, string | undefined>; cwd?: string }): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = Bun.spawn(cmd, { cwd: options.cwd, env: options.env, stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { code, stdout, stderr }
}

/** runCli with its io captured; `stdout` is what it wrote as it came (a streamed answer). */
export async function runCliCaptured(argv: string[], env: Record<string, string>) {
  // Imported here, not at the top: runProcess users (the ops tests) need not load the CLI.
  const { runCli } = await import('../../src/commands')
  const { io, out, err, written } = captureIo()
  const code = await runCli(argv, env, io)
  return { code, stdout: written.join(''), err, out }
}

/**
 * Before each test of the calling file: a fresh directory with a migrated database file (only
 * migrate and serve create one). `cli` runs a command on it in process; `db.env` and `db.dir` are
 * the current test's, and a test may change `db.env`.
 */
export function eachTestCliDatabase(prefix: string) {
  const db = { dir: '', env: {} as Record<string, string> }
  const cli = async (...argv: string[]) => {
    const { runCli } = await import('../../src/commands')
    const { io, out, err } = captureIo()
    const code = await runCli(argv, db.env, io)
    return { code, out: out.join('\n'), err: err.join('\n') }
  }
  beforeEach(async () => {
    db.dir = mkdtempSync(join(tmpdir(), prefix))
    db.env = { DATABASE_URL: `file:${join(db.dir, 'svc.db')}`, SVC_LOG_LEVEL: 'error' }
    expect((await cli('migrate')).code).toBe(0)
  })
  afterEach(() => rmSync(db.dir, { recursive: true, force: true }))
  return { db, cli }
}
