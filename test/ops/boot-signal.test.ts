import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { createClient } from '@libsql/client'
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { runProcess } from '../support/cli'
import { gatewayWorkspace, type GatewayWorkspace } from '../support/gateway-process'

// A shutdown signal during the boot (ARCHITECTURE.md §7.5) ends the boot at its next step: the
// step in progress finishes (the database is not closed under a migration), nothing after it
// starts (no listener left undrained, no first-boot admin key), and the process exits 0. Before
// (QA), a SIGTERM during a first boot's migration was followed by `listening` and the printed
// admin key, then `stopped`, while the drain closed the database under the boot.

const CHILD = join(import.meta.dir, '..', 'support', 'serve-child.ts')
const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts')
// Every migration of drizzle/meta/_journal.json.
const MIGRATIONS = (await Bun.file(new URL('../../drizzle/meta/_journal.json', import.meta.url)).json()).entries.length as number

let workspace: GatewayWorkspace
afterEach(() => workspace.remove())

/** A first boot (SVC_BOOTSTRAP=1, new database file) signalled inside `step`; its output and what it left in the database. */
async function signalledBoot(step: string) {
  workspace = gatewayWorkspace('svc-boot-signal-', 'plans: { payg: { monthly_allowance: "0", fusion: false } }\n')
  const run = await runProcess([process.execPath, CHILD], { env: { ...process.env, ...workspace.env, PORT: '0', SVC_BOOTSTRAP: '1', SIGNAL_AT_STEP: step } })
  const messages = run.stdout.split('\n').filter(line => line.startsWith('{')).map(line => JSON.parse(line).msg as string)
  const client = createClient({ url: workspace.env.DATABASE_URL! })
  try {
    const count = async (sql: string) => Number((await client.execute(sql)).rows[0]![0])
    return { ...run, messages, migrations: await count('SELECT COUNT(*) FROM __drizzle_migrations'), orgs: await count('SELECT COUNT(*) FROM orgs') }
  } finally {
    client.close()
  }
}

for (const step of ['migrate', 'listen']) {
  test(`a SIGTERM during the boot's ${step} step: the step ends, nothing after it runs, exit 0`, async () => {
    const run = await signalledBoot(step)
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    expect(run.messages).not.toContain('listening')
    expect(run.messages.indexOf('shutting down')).toBeGreaterThanOrEqual(0)
    expect(run.messages.at(-1)).toBe('stopped')
    expect(run.stdout).not.toContain('Created organization')
    expect(run.migrations).toBe(MIGRATIONS) // the migration ran to its end
    expect(run.orgs).toBe(0) // no bootstrap
  }, 30_000)
}

// Before serve's own handlers, while the modules load and the configuration is read, a signal
// killed the process (143, QA). SVC_CONFIG names a FIFO here: the child blocks reading it, which
// the test sees when its own open returns, and is signalled there, with no sleep to aim it.
test('a SIGTERM while the configuration is read (before serve handles signals): exit 0, nothing started', async () => {
  workspace = gatewayWorkspace('svc-boot-signal-early-', '')
  const fifo = join(workspace.directory, 'config.fifo')
  expect(Bun.spawnSync(['mkfifo', fifo]).exitCode).toBe(0)
  const child = Bun.spawn([process.execPath, CLI, 'serve'], {
    env: { ...process.env, ...workspace.env, SVC_CONFIG: fifo, PORT: '0', SVC_BOOTSTRAP: '1' },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const writer = await open(fifo, 'w')
  child.kill('SIGTERM')
  await writer.writeFile('plans: { payg: { monthly_allowance: "0", fusion: false } }\n')
  await writer.close()
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  expect(stderr).toBe('')
  expect(code).toBe(0)
  const messages = stdout.split('\n').filter(line => line.startsWith('{')).map(line => JSON.parse(line).msg as string)
  expect(messages).toEqual(['shutting down', 'stopped'])
}, 30_000)

// A libSQL server that accepts the connection but never answers held the boot's migration, and
// with it the process: past drain_timeout_s and after a second signal it still ran, until SIGKILL
// (QA). The step is given up on at the deadline or the second signal, and the exit code is 1:
// what the step did is unknown.
describe('a boot step the database never answers', () => {
  let answered: () => void
  let asked: Promise<void>
  let silent: ReturnType<typeof Bun.serve>
  let child: ReturnType<typeof Bun.spawn> | undefined
  beforeEach(() => {
    asked = new Promise(resolve => (answered = resolve))
    silent = Bun.serve({ port: 0, fetch: () => (answered(), new Promise<Response>(() => {})) })
  })
  afterEach(() => {
    child?.kill('SIGKILL')
    silent.stop(true)
  })

  /** `svc serve` on the silent server, signalled once the migration has asked it; its log messages and exit code, within `boundMs`. */
  async function stuckBoot(drainTimeoutS: number, secondSignal: boolean, boundMs: number) {
    workspace = gatewayWorkspace('svc-boot-silent-db-', `plans: { payg: { monthly_allowance: "0", fusion: false } }\nshutdown: { drain_timeout_s: ${drainTimeoutS} }\n`)
    child = Bun.spawn([process.execPath, CLI, 'serve'], {
      env: { ...process.env, ...workspace.env, DATABASE_URL: `http://127.0.0.1:${silent.port}`, PORT: '0', SVC_BOOTSTRAP: '0' },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const lines = logLines(child.stdout as ReadableStream<Uint8Array>)
    const stderr = new Response(child.stderr as ReadableStream<Uint8Array>).text()
    await asked
    child.kill('SIGTERM')
    const signalledAt = performance.now()
    if (secondSignal) {
      // Once the first is handled (one held before serve's handlers would count once).
      await lines.until('shutting down')
      child.kill('SIGINT')
    }
    const code = await Promise.race([child.exited, Bun.sleep(boundMs).then(() => 'still running')])
    const elapsedMs = performance.now() - signalledAt
    child.kill('SIGKILL')
    return { code, elapsedMs, messages: lines.messages, stderr: await stderr }
  }

  test('one SIGTERM: given up on at the drain deadline, exit 1', async () => {
    const run = await stuckBoot(1, false, 10_000)
    expect(run.code).toBe(1)
    expect(run.elapsedMs).toBeGreaterThanOrEqual(1000)
    expect(run.messages.map(line => line.msg)).toEqual(['shutting down', 'shutdown: a boot step did not end by the drain deadline or a second signal; exiting without it', 'stopped'])
    expect(run.messages[1]!.step).toBe('migrate')
    expect(run.stderr).toBe('')
  }, 30_000)

  test('a second signal: given up on at once, exit 1', async () => {
    const run = await stuckBoot(600, true, 10_000)
    expect(run.code).toBe(1)
    expect(run.messages.map(line => line.msg)).toEqual(['shutting down', 'shutdown: a boot step did not end by the drain deadline or a second signal; exiting without it', 'stopped'])
    expect(run.stderr).toBe('')
  }, 30_000)
})

/** The JSON log lines of a child's stdout as they come; `until` resolves once a line has that `msg`. */
function logLines(stdout: ReadableStream<Uint8Array>) {
  const messages: Array<Record<string, any>> = []
  const waiting: Array<{ msg: string; resolve: () => void }> = []
  void (async () => {
    const decoder = new TextDecoder()
    let buffer = ''
    for await (const chunk of stdout) {
      buffer += decoder.decode(chunk, { stream: true })
      let newline: number
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline)
        buffer = buffer.slice(newline + 1)
        if (!line.startsWith('{')) continue
        const message = JSON.parse(line)
        messages.push(message)
        for (const wait of waiting) if (wait.msg === message.msg) wait.resolve()
      }
    }
  })()
  const until = (msg: string) =>
    messages.some(message => message.msg === msg) ? Promise.resolve() : new Promise<void>(resolve => waiting.push({ msg, resolve }))
  return { messages, until }
}
