import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { switchPlan } from '../../src/billing/plan-switch'
import { loadClientConfig } from '../../src/config/client'
import { fusion } from '../../src/operator/fusion'
import { captureIo as capture, runCliCaptured, runProcess } from '../support/cli'
import { buildTestApp, type TestApp } from '../support/harness'
import { codeFlowTokens } from '../support/oauth'
import { answer, buildFusionHarness } from '../fusion/support'
import { openAIWire } from '../providers/openai-wire'

// `svc fusion` end to end against a served gateway on the embedded default config: the three
// demo models and the default judge (demo-private), over a real socket.

let t: TestApp
let url: string
let key: string
let orgId: string
const env = { SVC_LOG_LEVEL: 'error' }
const MODELS = 'demo-anonymous,demo-private,demo-alt'
const PROMPT = 'Is 9.11 larger than 9.9?'

beforeAll(async () => {
  t = await buildTestApp()
  url = t.listen()
  const org = await t.createOrg('cli', 1_000_000_000n)
  key = org.adminKey
  orgId = org.orgId
})

afterAll(() => t.close())

async function fusionCharges(): Promise<number> {
  const rows = await t.deps.database.client.execute({ sql: "select count(distinct op_id) as n from ledger_entries where org_id = ? and kind = 'settle' and purpose = 'fusion'", args: [orgId] })
  return Number(rows.rows[0]!.n)
}

const runCaptured = (argv: string[], runEnv: Record<string, string> = env) => runCliCaptured(argv, runEnv)

describe('svc fusion', () => {
  test('streams the synthesis to stdout, each participant status and a summary to stderr; a repeated --request-id bills nothing twice', async () => {
    const { io, out, err, written } = capture()
    const requestId = crypto.randomUUID()
    await fusion(loadClientConfig(env), ['--models', MODELS, '--key', key, '--url', `${url}/`, '--request-id', requestId, PROMPT], io)
    const synthesis = written.join('')
    // The demo judge echoes the candidates block of the synthesis prompt, delta by delta.
    expect(synthesis).toStartWith('Hello from the demo model. You said: 3 models answered the last message above.')
    expect(synthesis).toEndWith('\n')
    expect(written.length).toBeGreaterThan(10)
    expect(out).toEqual([])
    expect(err).toHaveLength(4)
    expect(err.slice(0, 3).map(line => line.replace(/:.*/, '')).sort()).toEqual(['[demo-alt', '[demo-anonymous', '[demo-private'])
    for (const line of err.slice(0, 3)) expect(line).toMatch(/^\[demo-[a-z]+: stop, \d+ input tokens, 12 output tokens, \d+ ms\]$/)
    expect(err[3]).toMatch(new RegExp(`^\\[fusion complete; judge demo-private: \\d+ input tokens, \\d+ output tokens; request id ${requestId}\\]$`))
    expect(await fusionCharges()).toBe(4)
    // The id printed is the one the ledger (and the log) knows the run by.
    const entries = await t.deps.database.client.execute({ sql: "select count(*) as n from ledger_entries where org_id = ? and purpose = 'fusion' and request_id = ?", args: [orgId, requestId] })
    expect(Number(entries.rows[0]!.n)).toBeGreaterThanOrEqual(4)

    // The same run again under the same id: it runs, but no part is billed twice.
    await fusion(loadClientConfig(env), ['--models', MODELS, '--key', key, '--url', url, '--request-id', requestId, PROMPT], capture().io)
    expect(await fusionCharges()).toBe(4)
  })

  test('--json prints the fusion.completion object with its request id; --judge picks the judge', async () => {
    const { code, out, stdout, err } = await runCaptured(['fusion', '--models', 'demo-anonymous,demo-alt', '--judge', 'demo-anonymous', '--system', 'Be brief.', '--key', key, '--url', url, '--json', 'hi'])
    expect(code).toBe(0)
    expect(stdout).toBe('')
    expect(err).toEqual([])
    const result = JSON.parse(out[0]!)
    expect(result).toMatchObject({ object: 'fusion.completion', status: 'complete', judge: 'demo-anonymous' })
    expect(result.request_id).toMatch(/^[0-9a-f-]{36}$/)
    expect(result.models.map((entry: any) => entry.output)).toEqual(['Hello from the demo model. You said: hi', 'Hello from the demo model. You said: hi'])
  })

  test('usage errors exit 2; refusals by the gateway exit 1 with its message', async () => {
    const one = await runCaptured(['fusion', '--models', 'demo-anonymous', '--key', key, '--url', url, 'x'])
    expect(one.code).toBe(2)
    expect(one.err[0]).toStartWith('usage error: --models takes 2 or 3 comma-separated model ids')
    expect((await runCaptured(['fusion', '--key', key, '--url', url, 'x'])).err[0]).toStartWith('usage error: --models is required')
    // Before, a repeated model went to the gateway and came back as its 400: exit 1, a failure.
    const twice = await runCaptured(['fusion', '--models', 'demo-anonymous,demo-anonymous', '--key', key, '--url', url, 'x'])
    expect(twice.code).toBe(2)
    expect(twice.err[0]).toStartWith('usage error: --models names demo-anonymous twice; it takes 2 or 3 distinct model ids')
    expect((await runCaptured(['fusion', '--models', MODELS, '--request-id', 'again', '--key', key, '--url', url, 'x'])).err[0]).toStartWith('usage error: --request-id must be a UUID')

    const unknown = await runCaptured(['fusion', '--models', 'demo-anonymous,nope', '--key', key, '--url', url, 'x'])
    expect(unknown.code).toBe(1)
    expect(unknown.err[0]).toStartWith('error: HTTP 400: models.1: model "nope" is not in the catalog')
    const web = await runCaptured(['fusion', '--models', 'demo-anonymous,demo-alt', '--web-fetch', '--key', key, '--url', url, 'x'])
    expect(web.code).toBe(1)
    expect(web.err[0]).toContain('does not support hosted web_fetch')

    const basic = await t.createOrg('basic', 1_000_000_000n)
    await switchPlan(t.deps.writer, t.deps.plans, t.clock, basic.orgId, 'payg')
    const refused = await runCaptured(['fusion', '--models', MODELS, '--key', basic.adminKey, '--url', url, 'x'])
    expect(refused.code).toBe(1)
    expect(refused.err[0]).toStartWith('error: HTTP 403: Fusion requires a plan with Fusion access')
  })

  test('without a key: the stored token of svc login, against the gateway it signed in to', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-fusion-'))
    try {
      const tokens = await codeFlowTokens(t, key, 'cli:inference')
      mkdirSync(join(dir, 'svc'), { recursive: true })
      const login = { url, access_token: tokens.access_token, refresh_token: tokens.refresh_token, expires_at_ms: Date.now() + 3_600_000, scope: tokens.scope }
      writeFileSync(join(dir, 'svc', 'credentials.json'), JSON.stringify(login), { mode: 0o600 })
      const run = await runCaptured(['fusion', '--models', 'demo-anonymous,demo-alt', 'hello'], { ...env, SVC_CONFIG_DIR: join(dir, 'svc') })
      expect(run.code).toBe(0)
      expect(run.stdout).toStartWith('Hello from the demo model. You said: 2 models answered')
      expect(run.err.at(-1)).toStartWith('[fusion complete; judge demo-private:')
      const none = await runCaptured(['fusion', '--models', 'demo-anonymous,demo-alt', 'hello'], { ...env, SVC_CONFIG_DIR: join(dir, 'nobody') })
      expect(none.code).toBe(2)
      expect(none.err[0]).toStartWith('usage error: an API key is needed')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('the real command (SVC_URL and SVC_API_KEY from the environment)', async () => {
    const { stdout, stderr, code } = await runProcess(['bun', join(import.meta.dir, '../../src/cli.ts'), 'fusion', '--models', MODELS, PROMPT], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, SVC_URL: url, SVC_API_KEY: key, SVC_LOG_LEVEL: 'error' },
    })
    expect(code).toBe(0)
    expect(stdout).toStartWith('Hello from the demo model. You said: 3 models answered the last message above.')
    expect(stderr.trim().split('\n')).toHaveLength(4)
    expect(stderr).toContain('[fusion complete; judge demo-private:')
  })

  test('without a synthesis: the answers that arrived on stdout, the failures on stderr, exit 1', async () => {
    const h = await buildFusionHarness()
    const gateway = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: h.t.app.fetch })
    try {
      const base = `http://127.0.0.1:${gateway.port}`
      h.a.enqueue(answer('A says 9.9.'))
      h.judge.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
      const judged = await runCaptured(['fusion', '--models', 'a,refused', '--key', h.org.adminKey, '--url', base, 'x'])
      expect(judged.code).toBe(1)
      expect(judged.stdout).toBe('[a]\nA says 9.9.\n\n')
      expect(judged.err.find(line => line.startsWith('[refused: failed (provider_error)'))).toBeDefined()
      expect(judged.err.at(-2)).toStartWith('[fusion partial; judge judge failed (provider_error)')
      expect(judged.err.at(-1)).toBe('error: the synthesis failed; the answers above were not synthesized')

      // A judge that answers no text failed too (QA: "[fusion complete …]", then this error).
      h.a.enqueue(answer('A says 9.9.'))
      h.judge.enqueue(answer(''))
      const empty = await runCaptured(['fusion', '--models', 'a,refused', '--key', h.org.adminKey, '--url', base, 'x'])
      expect(empty.code).toBe(1)
      expect(empty.stdout).toBe('[a]\nA says 9.9.\n\n')
      expect(empty.err.at(-2)).toStartWith('[fusion partial; judge judge failed (provider_error): judge returned an empty answer;')
      expect(empty.err.at(-1)).toBe('error: the synthesis failed; the answers above were not synthesized')

      // A synthesis cut at its output limit is one, and the summary says it was cut.
      h.a.enqueue(answer('A says 9.9.'))
      h.b.enqueue(answer('B says 9.9.'))
      h.judge.enqueue(answer('Both say', { inputTokens: 400, outputTokens: 2 }, 'length'))
      const cutShort = await runCaptured(['fusion', '--models', 'a,b', '--key', h.org.adminKey, '--url', base, 'x'])
      expect(cutShort.code).toBe(0)
      expect(cutShort.stdout).toBe('Both say\n')
      expect(cutShort.err.at(-1)).toStartWith('[fusion complete; judge judge: 400 input tokens, 2 output tokens, cut at its output limit;')

      // A synthesis cut mid-stream: what was streamed ends its line before the answers (it ran into them).
      h.a.enqueue(answer('A says 9.9.'))
      h.judge.enqueue({ kind: 'sse', body: openAIWire.partial('Both say'), then: 'reset' })
      const cut = await runCaptured(['fusion', '--models', 'a,refused', '--key', h.org.adminKey, '--url', base, 'x'])
      expect(cut.code).toBe(1)
      expect(cut.stdout).toBe('Both say\n[a]\nA says 9.9.\n\n')
      expect(cut.err.at(-1)).toBe('error: the synthesis failed; the answers above were not synthesized')

      h.b.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
      const failed = await runCaptured(['fusion', '--models', 'b,refused', '--key', h.org.adminKey, '--url', base, 'x'])
      expect(failed.code).toBe(1)
      expect(failed.stdout).toBe('')
      expect(failed.err.at(-1)).toBe('error: every participant failed; nothing was synthesized')
    } finally {
      gateway.stop(true)
      await h.close()
    }
  })
})
