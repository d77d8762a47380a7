import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Subprocess } from 'bun'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { seedOrg, openDeps } from '../support/gateway-process'
import { connectMcp } from '../support/mcp'

// End-to-end check of the compiled executable (STACK-NOTES §7): build it exactly as dist/svc is
// built, run it from an empty directory with no node_modules above it, and drive it over HTTP
// and through its CLI.
// SVC_SKIP_BINARY=1 skips it (e.g. a quick local run); CI runs it.

const REPO = join(import.meta.dir, '..', '..')
const SKIP = process.env.SVC_SKIP_BINARY === '1'

/** Collects a child's output as text while it runs, so we can wait for a line to appear. */
class Output {
  text = ''
  readonly done: Promise<void>
  private readonly waiters: Array<{ pattern: RegExp; resolve: (match: RegExpExecArray) => void }> = []
  constructor(stream: ReadableStream<Uint8Array>) {
    this.done = (async () => {
      const decoder = new TextDecoder()
      for await (const chunk of stream) {
        this.text += decoder.decode(chunk, { stream: true })
        this.settle()
      }
      this.text += decoder.decode()
      this.settle()
    })()
  }

  /** Resolves with the first match of `pattern` in the output; rejects if the output ends without one. */
  waitFor(pattern: RegExp): Promise<RegExpExecArray> {
    const found = pattern.exec(this.text)
    if (found) return Promise.resolve(found)
    return new Promise((resolve, reject) => {
      this.waiters.push({ pattern, resolve })
      void this.done.then(() => reject(new Error(`output ended without ${pattern}:\n${this.text}`)), reject)
    })
  }

  private settle(): void {
    for (const waiter of this.waiters.splice(0)) {
      const found = waiter.pattern.exec(this.text)
      if (found) waiter.resolve(found)
      else this.waiters.push(waiter)
    }
  }
}

/** A port nobody listens on right now: bind port 0, read what the kernel chose, release it. */
function freePort(): number {
  const probe = Bun.serve({ port: 0, fetch: () => new Response(null) })
  const port = probe.port!
  probe.stop(true)
  return port
}


describe.skipIf(SKIP)('compiled binary dist/svc', () => {
  let dir = ''
  let binary = ''
  let port = 0
  let dotenvPort = 0
  let server: Subprocess<'ignore', 'pipe', 'pipe'> | undefined
  let stdout: Output
  let stderr: Output
  let adminKey = ''
  const base = () => `http://127.0.0.1:${port}`
  // A spawned binary gets only these variables: nothing leaks in from the test runner's env.
  const env = (extra: Record<string, string> = {}) => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, ...extra })

  beforeAll(async () => {
    // Built straight into a fresh directory outside the repository (so no node_modules above it
    // can satisfy a missing embed, and parallel runs never share dist/svc).
    dir = mkdtempSync(join(tmpdir(), 'svc-binary-'))
    binary = join(dir, 'svc')
    const build = Bun.spawn([process.execPath, 'run', 'build.ts', '--outfile', binary], { cwd: REPO, stdout: 'pipe', stderr: 'pipe' })
    const [code, out, err] = await Promise.all([build.exited, new Response(build.stdout).text(), new Response(build.stderr).text()])
    if (code !== 0) throw new Error(`bun run build.ts exited ${code}\n${out}\n${err}`)

    // The binary is built with autoloadDotenv/autoloadBunfig off; these files must have no effect.
    // A real env var always beats .env, so PORT here is shadowed by the one we pass; the other
    // variables are set only here, and each would visibly change the run if .env were read.
    dotenvPort = freePort()
    writeFileSync(join(dir, '.env'), `PORT=${dotenvPort}\nSVC_BOOTSTRAP=0\nDATABASE_URL=file:from-dotenv/svc.db\nSVC_LOG_LEVEL=nonsense\n`)
    writeFileSync(join(dir, 'bunfig-preload.js'), `require('node:fs').writeFileSync(${JSON.stringify(join(dir, 'bunfig-was-loaded'))}, '')\n`)
    writeFileSync(join(dir, 'bunfig.toml'), 'preload = ["./bunfig-preload.js"]\n')

    port = freePort()
    const started = performance.now()
    server = Bun.spawn([binary], { cwd: dir, env: env({ PORT: String(port), SVC_LOG_LEVEL: 'info' }), stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
    stdout = new Output(server.stdout)
    stderr = new Output(server.stderr)
    // The server logs `listening` once it accepts connections, after printing the bootstrap key;
    // waiting for that line (not a time) also proves the boot, lazy imports included, completed.
    await stdout.waitFor(/"msg":"listening"/).catch(error => {
      throw new Error(`${error.message}\nstderr:\n${stderr.text}`)
    })
    console.log(`dist/svc: ${(Bun.file(binary).size / 1e6).toFixed(1)} MB, listening after ${Math.round(performance.now() - started)} ms (fresh database)`)
    adminKey = /Bearer (z_sk_[0-9A-Za-z]+)/.exec(stdout.text)?.[1] ?? ''
    expect((await fetch(`${base()}/healthz`)).status).toBe(200)
  }, 180_000)

  afterAll(async () => {
    if (server && server.exitCode === null) {
      server.kill('SIGKILL')
      await server.exited
    }
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  test('runs from a directory with no node_modules above it', () => {
    for (let at = dir; ; at = dirname(at)) {
      expect(existsSync(join(at, 'node_modules')) ? `${at}/node_modules exists` : 'none').toBe('none')
      if (dirname(at) === at) break
    }
  })

  test('applies the embedded migrations to the default database and bootstraps it', () => {
    expect(existsSync(join(dir, 'data', 'svc.db'))).toBe(true)
    expect(adminKey).toMatch(/^z_sk_/)
  })

  test('ignores .env and bunfig.toml in the working directory', async () => {
    expect(existsSync(join(dir, 'from-dotenv'))).toBe(false) // DATABASE_URL from .env not used
    expect(existsSync(join(dir, 'bunfig-was-loaded'))).toBe(false) // bunfig preload never ran
    expect(stdout.text).toContain(`"port":${port}`)
    expect(await fetch(`http://127.0.0.1:${dotenvPort}/healthz`).then(r => r.status, () => 'refused')).toBe('refused')
  })

  test('serves the probes and the self-hosted docs', async () => {
    const ready = await fetch(`${base()}/readyz`)
    expect(ready.status).toBe(200)
    expect(await ready.json()).toEqual({ status: 'ready', database: 'ok' })
    const docs = await fetch(`${base()}/docs`)
    expect(docs.status).toBe(200)
    expect(await docs.text()).toContain('/docs-assets/swagger-ui-bundle.js')
    for (const [path, type, marker] of [
      ['/docs-assets/swagger-ui-bundle.js', 'text/javascript', 'SwaggerUIBundle'],
      ['/docs-assets/swagger-ui.css', 'text/css', '.swagger-ui'],
      // Swagger UI's OAuth2 redirect page, its script embedded as text.
      ['/docs/oauth2-redirect.html', 'text/html', 'swaggerUIRedirectOauth2'],
    ] as const) {
      const response = await fetch(`${base()}${path}`)
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toStartWith(type)
      expect(await response.text()).toContain(marker)
    }
    const spec = (await fetch(`${base()}/openapi.json`).then(r => r.json())) as { paths: Record<string, unknown> }
    expect(Object.keys(spec.paths)).toContain('/api/v1/api-keys')
  })

  test('creates and lists a key over HTTP with the bootstrap admin key', async () => {
    const created = await fetch(`${base()}/api/v1/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'from-e2e', admin: true }),
    })
    expect(created.status).toBe(201)
    const { key } = (await created.json()) as { key: { id: string; token: string; admin: boolean } }
    expect(key.token).toMatch(/^z_sk_/)
    expect(key.admin).toBe(true)

    // List with the new key itself: it authenticates, and the list holds it and the bootstrap key.
    const listed = await fetch(`${base()}/api/v1/api-keys`, { headers: { authorization: `Bearer ${key.token}` } })
    expect(listed.status).toBe(200)
    const { keys } = (await listed.json()) as { keys: Array<{ id: string; name: string; status: string }> }
    expect(keys.find(k => k.id === key.id)).toMatchObject({ name: 'from-e2e', status: 'active' })
    expect(keys).toHaveLength(2)
  })

  test('answers a chat, and stdout stays JSON lines (the minified routes give Elysia nothing to warn about)', async () => {
    const from = stdout.text.length
    const chat = await fetch(`${base()}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'demo-private', messages: [{ role: 'user', content: 'hi' }] }),
    })
    expect(chat.status).toBe(200)
    expect(((await chat.json()) as { object: string }).object).toBe('chat.completion')
    await stdout.waitFor(/"route":"\/v1\/chat\/completions"/)
    const lines = stdout.text.slice(from).split('\n').filter(line => line !== '')
    expect(lines.filter(line => !line.startsWith('{'))).toEqual([])
  })

  test('extracts every accepted format through the embedded extraction worker', async () => {
    // The worker is its own build entrypoint (build.ts); a miss would surface as "the extractor crashed".
    const fixtures = join(REPO, 'test', 'fixtures', 'documents')
    const cases: Array<[string, string, string]> = [
      ['report.pdf', 'pdf', 'Grüße aus Zürich'],
      ['report.docx', 'docx', 'Bern\t1200\t4 %'],
      ['slides.pptx', 'pptx', '[Slide 2]\nSlide two: Résultats 2026'],
      ['sheets.xlsx', 'xlsx', '[Sheet: Übersicht]'],
      ['sheets.xls', 'xls', 'Jürgen\tKöln\t42'],
      ['notes.txt', 'text', '日本語'],
    ]
    for (const [name, type, snippet] of cases) {
      const form = new FormData()
      form.append('file', Bun.file(join(fixtures, name)), name)
      const response = await fetch(`${base()}/api/v1/attachments/parse`, { method: 'POST', headers: { authorization: `Bearer ${adminKey}` }, body: form })
      const body = (await response.json()) as { text: string; document_type: string }
      expect({ name, status: response.status, type: body.document_type }).toEqual({ name, status: 200, type })
      expect(body.text).toContain(snippet)
    }
    expect(stdout.text).not.toContain('document extractor failed')
  })

  test('the MCP SDK, imported on the first POST /mcp, is embedded and answers', async () => {
    // A token minted straight into the binary's database (no CLI command issues MCP tokens).
    const env = { DATABASE_URL: `file:${join(dir, 'data', 'svc.db')}` }
    const org = await seedOrg(env, 0n)
    const deps = await openDeps(env)
    const grant = await deps.oauth.tokens.issue({ clientId: 'svc-cli', userId: org.userId, orgId: org.orgId, scope: 'mcp:inference', resource: null, keyId: org.keyId }).finally(() => deps.close())
    const client = await connectMcp(base(), grant.tokens.access_token)
    const { tools } = await client.listTools()
    await client.close()
    expect(tools.map(tool => tool.name)).toContain('svc.list_models')
  })

  test('svc orgs create works against the live server database', async () => {
    // No DATABASE_URL: the CLI must resolve the same default file the server uses (and not .env's).
    const cli = Bun.spawn([binary, 'orgs', 'create', '--name', 'x', '--json'], { cwd: dir, env: env(), stdout: 'pipe', stderr: 'pipe' })
    const [code, out, err] = await Promise.all([cli.exited, new Response(cli.stdout).text(), new Response(cli.stderr).text()])
    expect({ code, err }).toEqual({ code: 0, err: '' })
    const org = JSON.parse(out) as { org_id: string; key_id: string; key: string }
    expect(org.key).toMatch(/^z_sk_/)

    const listed = await fetch(`${base()}/api/v1/api-keys`, { headers: { authorization: `Bearer ${org.key}` } })
    expect(listed.status).toBe(200)
    const { keys } = (await listed.json()) as { keys: Array<{ id: string }> }
    expect(keys.map(k => k.id)).toEqual([org.key_id]) // only the new org's key, none of the bootstrap org's
  })

  test('SIGTERM shuts down cleanly with exit code 0', async () => {
    server!.kill('SIGTERM')
    const code = await Promise.race([server!.exited, Bun.sleep(10_000).then(() => 'still running')])
    await Promise.all([stdout.done, stderr.done])
    expect({ code, stderr: stderr.text }).toEqual({ code: 0, stderr: '' })
    expect(stdout.text).toContain('"msg":"shutting down"')
  })
})
