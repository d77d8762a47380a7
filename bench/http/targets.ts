/**
 * The processes of one benchmark run: two mock upstreams (instant and paced), a bare Bun proxy in
 * front of each, and one gateway with a production-like configuration (auth, rate limits and
 * billing on, a local database file, info logging to a file) serving a model on each upstream.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { HEAP_RAM_VARIABLE, heapRamSize } from '../../src/lib/heap-ram'

const root = resolve(import.meta.dir, '../..')

export interface Process {
  readonly name: string
  readonly pid: number
  readonly url: string
  kill(): void
}

/** Starts a bench helper script that prints `{"port": N}` on its first line. */
export async function startScript(name: string, script: string, env: Record<string, string>): Promise<Process> {
  const child = Bun.spawn(['bun', join(import.meta.dir, script)], { env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'inherit' })
  const reader = child.stdout.getReader()
  let text = ''
  while (!text.includes('\n')) {
    const { value, done } = await reader.read()
    if (done) throw new Error(`${name} exited before listening`)
    text += new TextDecoder().decode(value)
  }
  reader.releaseLock()
  const { port } = JSON.parse(text.split('\n')[0]!) as { port: number }
  return { name, pid: child.pid, url: `http://127.0.0.1:${port}`, kill: () => child.kill() }
}

export interface Upstreams {
  instant: Process
  paced: Process
}

/** The paced upstream's default pacing: the issue's 50 ms to the first chunk, 5 ms between chunks. */
export const DEFAULT_PACING = { firstMs: 50, gapMs: 5 }

export async function startUpstreams(pacing = DEFAULT_PACING): Promise<Upstreams> {
  return {
    instant: await startScript('upstream-instant', 'mock-upstream.ts', { FIRST_MS: '0', GAP_MS: '0' }),
    paced: await startScript('upstream-paced', 'mock-upstream.ts', { FIRST_MS: String(pacing.firstMs), GAP_MS: String(pacing.gapMs) }),
  }
}

export async function startProxies(upstreams: Upstreams): Promise<{ instant: Process; paced: Process }> {
  return {
    instant: await startScript('proxy-instant', 'bare-proxy.ts', { UPSTREAM: upstreams.instant.url }),
    paced: await startScript('proxy-paced', 'bare-proxy.ts', { UPSTREAM: upstreams.paced.url }),
  }
}

/** `anthropic`: also an Anthropic provider at that origin, serving model `bench-claude` (in-process.ts --messages, ab.ts --scenario messages). */
export function gatewayConfig(upstreams: Upstreams, anthropic?: { url: string }): string {
  const model = (id: string, provider: string) => `
  - id: ${id}
    level: private
    backends: [{ provider: ${provider}, model: bench-upstream }]
    price: { input_per_mtok: "0.10", output_per_mtok: "0.40" }
    context_length: 32768
    max_output_tokens: 4096
    capabilities: { tools: true }`
  return `providers:
  - { id: instant, type: openai-compatible, base_url: "${upstreams.instant.url}/v1", api_key_env: BENCH_UPSTREAM_KEY, retention: none }
  - { id: paced, type: openai-compatible, base_url: "${upstreams.paced.url}/v1", api_key_env: BENCH_UPSTREAM_KEY, retention: none }${
    anthropic ? `\n  - { id: claude, type: anthropic, base_url: "${anthropic.url}/v1", api_key_env: BENCH_UPSTREAM_KEY, retention: none }` : ''
  }
models:${model('bench-instant', 'instant')}${model('bench-paced', 'paced')}${anthropic ? model('bench-claude', 'claude') : ''}
plans:
  pro: { monthly_allowance: "20", fusion: true }
bootstrap: { org_name: bench, owner_email: bench@localhost }
# Limits stay on (every request passes both buckets and the concurrency gate), sized so the
# load never hits them.
limits:
  inference: { key: { burst: 1000000, per_second: 1000000 }, org: { burst: 1000000, per_second: 1000000 } }
  management: { key: { burst: 1000, per_second: 100 }, org: { burst: 1000, per_second: 100 } }
  org_inference_concurrency: 1024
ledger:
  bootstrap_credit: "1000000"
  instance_stale_after_s: 30
auth:
  cache_ttl_ms: 2000
  cache_max_entries: 100000
`
}

async function freePort(): Promise<number> {
  const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const port = probe.port!
  probe.stop(true)
  return port
}

/**
 * The gateway as `svc serve` runs it, on a fresh database file; returns it and its bootstrap key.
 * Options (bench/http/ab.ts compares two gateways): `tree`, the source tree to run; `env`, added
 * to its environment; `flags`, bun flags added to BENCH_GATEWAY_FLAGS; `stderr`, a file for its
 * standard error (gc-pauses.ts reads JSC's collection log there).
 */
export async function startGateway(
  upstreams: Upstreams,
  options: { tree?: string; env?: Record<string, string>; flags?: string[]; stderr?: string } = {},
): Promise<{ process: Process; key: string; dir: string; exited: Promise<number> }> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-'))
  // The instant mock answers Messages too: `bench-claude` is served by an Anthropic provider there.
  writeFileSync(join(dir, 'config.yaml'), gatewayConfig(upstreams, { url: upstreams.instant.url }))
  const port = await freePort()
  const log = join(dir, 'gateway.log')
  // BENCH_GATEWAY_FLAGS: extra bun flags for the gateway only (e.g. `--cpu-prof-md --cpu-prof-dir=/tmp/prof`).
  const flags = [...(process.env.BENCH_GATEWAY_FLAGS ?? '').split(' ').filter(Boolean), ...(options.flags ?? [])]
  // A profiled `svc serve` spawned from Bun hung silently in its heap-sizing re-execution (Bun
  // 1.4.5): give it the size it would pick, so that it serves as it would, without re-executing.
  const heapEnv = flags.some(flag => flag.startsWith('--cpu-prof') || flag.startsWith('--heap-prof')) ? servedHeapEnv() : {}
  const child = Bun.spawn(['bun', ...flags, join(options.tree ?? root, 'src/cli.ts'), 'serve'], {
    cwd: dir,
    env: { ...process.env, PORT: String(port), DATABASE_URL: `file:${join(dir, 'svc.db')}`, SVC_CONFIG: join(dir, 'config.yaml'), SVC_LOG_LEVEL: 'info', BENCH_UPSTREAM_KEY: 'bench', ...heapEnv, ...options.env },
    // Production logging: one JSON line per request, written to a file (not to a pipe nobody drains).
    stdout: Bun.file(log),
    stderr: options.stderr === undefined ? 'inherit' : Bun.file(options.stderr),
  })
  for (let i = 0; i < 300; i++) {
    const text = (() => {
      try {
        return readFileSync(log, 'utf8')
      } catch {
        return ''
      }
    })()
    const key = /Bearer (z_sk_[A-Za-z0-9]+)/.exec(text)?.[1]
    if (key) {
      const url = `http://127.0.0.1:${port}`
      return { process: { name: 'gateway', pid: child.pid, url, kill: () => child.kill() }, key, dir, exited: child.exited }
    }
    if (child.exitCode !== null) throw new Error(`the gateway exited: ${text}`)
    await Bun.sleep(50)
  }
  throw new Error('the gateway did not print its bootstrap key within 15 s')
}

/** The variable `svc serve` re-executes with to size JSC's heap (src/lib/heap-ram.ts), for a gateway started without that step. */
export function servedHeapEnv(): Record<string, string> {
  const size = heapRamSize(process.env)
  return size === undefined ? {} : { [HEAP_RAM_VARIABLE]: String(size) }
}

/**
 * The gateway's app of a source tree (default: this one) in this process, on a fresh database file
 * with the same configuration as startGateway's: for harnesses that drive it through `app.handle`
 * or their own listener (in-process.ts, alloc-probe.ts, gc-bytes.ts). `close` stops its
 * background work and removes the directory.
 */
export async function appInProcess(upstreams: Upstreams, options: { tree?: string; anthropic?: { url: string } } = {}) {
  const tree = options.tree ?? root
  const { createApp } = await import(join(tree, 'src/app'))
  const { loadConfig } = await import(join(tree, 'src/config/load'))
  const { migrateDatabase } = await import(join(tree, 'src/db/client'))
  const { createDeps } = await import(join(tree, 'src/deps'))
  const { bootstrapIfEmpty } = await import(join(tree, 'src/orgs/bootstrap'))
  const dir = mkdtempSync(join(tmpdir(), 'svc-in-process-'))
  writeFileSync(join(dir, 'config.yaml'), gatewayConfig(upstreams, options.anthropic))
  const config = loadConfig({ DATABASE_URL: `file:${join(dir, 'svc.db')}`, SVC_CONFIG: join(dir, 'config.yaml'), SVC_LOG_LEVEL: 'info', BENCH_UPSTREAM_KEY: 'bench' })
  const deps = await createDeps(config)
  await migrateDatabase(deps.database)
  await deps.sweeper.start()
  const key: string = (await bootstrapIfEmpty(deps))!.secret
  const app: { handle(request: Request): Promise<Response>; listen(options: object): { server: { port: number; stop(force?: boolean): void } | null } } = createApp(deps)
  return {
    app,
    key,
    close: async () => {
      await deps.close()
      removeDir(dir)
    },
  }
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true })
}

/**
 * What a scenario sends (ab.ts, gc-pauses.ts): Chat Completions to the instant model (`nonstream`,
 * `stream`) or the paced one (`paced`), or a Messages client to the Anthropic provider on the
 * instant mock (`messages`, `messages-stream`).
 */
export function scenarioRequest(scenario: string): { path: string; body: string } {
  if (!['nonstream', 'stream', 'paced', 'messages', 'messages-stream'].includes(scenario)) throw new Error(`unknown scenario ${scenario}`)
  const stream = scenario === 'stream' || scenario === 'paced' || scenario === 'messages-stream'
  const messages = scenario.startsWith('messages')
  const body = JSON.stringify({
    model: messages ? 'bench-claude' : scenario === 'paced' ? 'bench-paced' : 'bench-instant',
    messages: [{ role: 'user', content: 'Say twenty words.' }],
    max_tokens: 64,
    ...(stream ? { stream: true, ...(messages ? {} : { stream_options: { include_usage: true } }) } : {}),
  })
  return { path: messages ? '/v1/messages' : '/v1/chat/completions', body }
}
