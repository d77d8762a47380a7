// The real gateway as a child process (`bun src/cli.ts serve`) on a local database file, for the
// operations tests (test/ops/): graceful shutdown, SIGKILL crash rounds, several instances on one
// database. The child's log lines (JSON on stdout) are collected; `listening` gives its ports.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config/load'
import { migrateDatabase } from '../../src/db/client'
import { createDeps, type Deps } from '../../src/deps'
import { silentLogger } from '../../src/observability/logger'
import { runProcess } from './cli'
import { seedAdminOrg } from './harness'

const ROOT = join(import.meta.dir, '..', '..')
const CLI = join(ROOT, 'src', 'cli.ts')

/** A temporary directory with a gateway config and a database file, and the env that points a gateway process (or openDeps) at them. */
export interface GatewayWorkspace {
  directory: string
  env: Record<string, string>
  remove(): void
}

/**
 * Writes `yaml` to a fresh temporary directory (named after `prefix`) and returns the env for a
 * gateway on it: the config, a database file beside it, UP_KEY for the upstream the config names,
 * plus `extraEnv` (e.g. SVC_INSTANCE_ID).
 */
export function gatewayWorkspace(prefix: string, yaml: string, extraEnv: Record<string, string> = {}): GatewayWorkspace {
  const directory = mkdtempSync(join(tmpdir(), prefix))
  const configPath = join(directory, 'config.yaml')
  writeFileSync(configPath, yaml)
  return {
    directory,
    env: { DATABASE_URL: `file:${join(directory, 'svc.db')}`, SVC_CONFIG: configPath, UP_KEY: 'sk-up-0123456789', ...extraEnv },
    remove: () => rmSync(directory, { recursive: true, force: true }),
  }
}

/** A running gateway process. */
export interface GatewayProcess {
  readonly process: ReturnType<typeof Bun.spawn>
  readonly port: number
  readonly adminPort: number | undefined
  readonly url: string
  /** Every stdout line so far (JSON log lines, mostly). */
  readonly lines: string[]
  /** Resolves with the exit code. */
  readonly exited: Promise<number>
  /** The parsed log lines whose `msg` is `msg`. */
  logs(msg: string): Array<Record<string, any>>
}

/** Starts `svc serve` with `env` (PORT=0 unless given) and waits for its `listening` line; `bunFlags` go before the script (e.g. `--preload`). */
export async function startGateway(env: Record<string, string>, bunFlags: string[] = []): Promise<GatewayProcess> {
  const child = Bun.spawn([process.execPath, ...bunFlags, CLI, 'serve'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', SVC_BOOTSTRAP: '0', ...env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const lines: string[] = []
  let listening: ((line: Record<string, any>) => void) | undefined
  const ready = new Promise<Record<string, any>>(resolve => (listening = resolve))
  void (async () => {
    const decoder = new TextDecoder()
    let buffer = ''
    for await (const chunk of child.stdout as ReadableStream<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true })
      let newline: number
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline)
        buffer = buffer.slice(newline + 1)
        lines.push(line)
        if (line.includes('"msg":"listening"')) listening?.(JSON.parse(line))
      }
    }
  })()
  const stderr = new Response(child.stderr as ReadableStream<Uint8Array>).text()
  const exited = child.exited
  const started = await Promise.race([ready, exited.then(async code => ({ exited: code }))])
  if ('exited' in started) throw new Error(`gateway exited (${started.exited}) before listening: ${await stderr}\n${lines.join('\n')}`)
  return {
    process: child,
    port: started.port,
    adminPort: started.admin_port,
    url: `http://127.0.0.1:${started.port}`,
    lines,
    exited,
    logs: msg => lines.filter(line => line.startsWith('{')).map(line => JSON.parse(line)).filter(line => line.msg === msg),
  }
}

/** Deps of the test process on the same database file (seeding, checks); close them when done. */
export async function openDeps(env: Record<string, string>, instanceId = 'test-inspector'): Promise<Deps> {
  const deps = await createDeps(loadConfig({ ...env, SVC_INSTANCE_ID: instanceId }), { logger: silentLogger })
  await migrateDatabase(deps.database)
  return deps
}

/** Creates an organization with an admin key and `credit` nanos of prepaid balance. */
export async function seedOrg(env: Record<string, string>, credit: bigint): Promise<{ orgId: string; key: string; keyId: string; userId: string }> {
  const deps = await openDeps(env, 'seed')
  try {
    const org = await seedAdminOrg(deps, 'ops', credit)
    return { orgId: org.orgId, key: org.adminKey, keyId: org.adminKeyId, userId: org.ownerUserId }
  } finally {
    await deps.close()
  }
}

/** Runs `svc <args>` to completion; returns its exit code and output. */
export async function runSvc(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return runProcess([process.execPath, CLI, ...args], { cwd: ROOT, env: { ...process.env, SVC_BOOTSTRAP: '0', ...env } })
}
