import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { runCli } from '../../src/commands'
import { loadClientConfig } from '../../src/config/client'
import { loadConfig } from '../../src/config/load'
import { chat } from '../../src/operator/chat'
import { openAIWire } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { captureIo as capture, runCliCaptured, runProcess } from '../support/cli'
import { buildTestApp, type TestApp } from '../support/harness'

// `svc chat`: one streamed answer through a running gateway (here: the embedded default, i.e.
// the demo model, on a real port).

let t: TestApp
let url: string
let key: string
const env = { SVC_LOG_LEVEL: 'error' }

beforeAll(async () => {
  t = await buildTestApp()
  url = t.listen()
  key = (await t.createOrg('cli', 1_000_000_000n)).adminKey
})

afterAll(() => t.close())

describe('svc chat', () => {
  test('streams the demo answer piece by piece, then prints the usage on stderr', async () => {
    const { io, out, err, written } = capture()
    await chat(loadClientConfig(env), ['--model', 'demo-anonymous', '--key', key, '--url', `${url}/`, '--system', 'Be terse.', 'hello'], io)
    expect(written.join('')).toBe('Hello from the demo model. You said: hello\n')
    // Token by token (8 words), then the newline.
    expect(written).toHaveLength(9)
    expect(out).toEqual([])
    // 'Be terse.' (9 chars → 3 tokens) + 'hello' (5 chars → 2 tokens); 8 output tokens.
    expect(err).toEqual(['[5 input tokens, 8 output tokens]'])
  })

  test('--json prints one JSON object with the answer and its usage, and nothing else', async () => {
    const { io, out, err, written } = capture()
    await chat(loadClientConfig(env), ['--model', 'demo-anonymous', '--key', key, '--url', url, '--json', 'hello'], io)
    expect(written).toEqual([])
    expect(err).toEqual([])
    expect(out).toHaveLength(1)
    // usage is the gateway's own usage object, as is.
    expect(JSON.parse(out[0]!)).toMatchObject({ model: 'demo-anonymous', content: 'Hello from the demo model. You said: hello', usage: { prompt_tokens: 2, completion_tokens: 8 } })
  })

  test('runCli chat exits 0; a bad key exits 1 with the 401 message; a missing model is a usage error', async () => {
    // runCli's chat writes the answer to process.stdout: capture it for the duration of the call.
    const ok = await runCliCaptured(['chat', '--model', 'demo-anonymous', '--key', key, '--url', url, 'hello'], env)
    expect(ok.code).toBe(0)
    expect(ok.stdout).toBe('Hello from the demo model. You said: hello\n')
    expect(ok.err).toEqual(['[2 input tokens, 8 output tokens]'])

    const malformed = capture()
    expect(await runCli(['chat', '--model', 'demo-anonymous', '--key', 'z_sk_not-a-real-key', '--url', url, 'hello'], env, malformed.io)).toBe(1)
    expect(malformed.err).toEqual(['error: HTTP 401: malformed API key (bad length or checksum)'])

    // A well-formed key that was revoked: the server's 401 message is shown as is.
    const org = await t.createOrg('cli-revoked', 0n)
    const member = await t.createMember(org, 'member')
    expect(await t.deps.keys.revoke(org.orgId, member.keyId)).toBe(true)
    const revoked = capture()
    expect(await runCli(['chat', '--model', 'demo-anonymous', '--key', member.key, '--url', url, 'hello'], env, revoked.io)).toBe(1)
    expect(revoked.err).toEqual(['error: HTTP 401: this API key has been revoked'])

    const unknownModel = capture()
    expect(await runCli(['chat', '--model', 'no-such-model', '--key', key, '--url', url, 'hello'], env, unknownModel.io)).toBe(1)
    expect(unknownModel.err[0]).toStartWith('error: HTTP 400: model "no-such-model" is not in the catalog')

    const usage = capture()
    expect(await runCli(['chat', '--key', key, '--url', url, 'hello'], env, usage.io)).toBe(2)
    expect(usage.err[0]).toStartWith('usage error: --model is required')

    // After `--` a prompt is a prompt, `-h` as `--json` (before, `-h` printed the usage and exited 0).
    for (const prompt of ['-h', '--help', '--json']) {
      const sent = await runCliCaptured(['chat', '--model', 'demo-anonymous', '--key', key, '--url', url, '--', prompt], env)
      expect({ code: sent.code, stdout: sent.stdout }).toEqual({ code: 0, stdout: `Hello from the demo model. You said: ${prompt}\n` })
    }
  })

  test('a --url or SVC_URL that is not an http(s) URL is a usage error naming it, on every command that takes one', async () => {
    const cases: Array<[string[], Record<string, string>, string]> = [
      [['chat', '--model', 'demo-anonymous', '--key', key, '--url', 'localhost:8080', 'hi'], {}, '--url must be an http(s) URL'],
      [['chat', '--model', 'demo-anonymous', '--key', key, '--url', 'ftp://example.test', 'hi'], {}, '--url must be an http(s) URL'],
      [['fusion', '--models', 'a,b', '--key', key, '--url', 'not a url', 'hi'], {}, '--url must be an http(s) URL'],
      [['encrypted-chat', '--model', 'm:encrypted', '--key', key, '--url', 'gateway', 'hi'], {}, '--url must be an http(s) URL'],
      [['login', '--url', 'notaurl'], {}, '--url must be an http(s) URL'],
      [['chat', '--model', 'demo-anonymous', '--key', key, 'hi'], { SVC_URL: 'gateway.example:8080' }, 'SVC_URL must be an http(s) URL'],
    ]
    for (const [argv, extra, message] of cases) {
      const result = capture()
      expect(await runCli(argv, { ...env, ...extra }, result.io)).toBe(2)
      expect(result.err[0]).toStartWith(`usage error: ${message}`)
    }
  })

  test('an empty or whitespace-only PROMPT is a usage error naming it on every chat command; nothing is sent', async () => {
    // Before: the blank prompt went to the gateway (exit 0 or 1 on its answer, not 2).
    let requests = 0
    const gateway = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => (requests++, new Response('{}', { status: 500 })) })
    try {
      const at = `http://127.0.0.1:${gateway.port}`
      const commands = [
        ['chat', '--model', 'demo-anonymous'],
        ['fusion', '--models', 'demo-anonymous,demo-private'],
        ['encrypted-chat', '--model', 'demo-encrypted:encrypted'],
      ]
      for (const command of commands) {
        for (const prompt of ['', '   ', '\n\t ']) {
          const result = capture()
          expect({ command: command[0], prompt, code: await runCli([...command, '--key', key, '--url', at, prompt], env, result.io) }).toEqual({ command: command[0], prompt, code: 2 })
          expect(result.err[0]).toStartWith('usage error: PROMPT must not be empty or only whitespace')
        }
      }
      expect(requests).toBe(0)
    } finally {
      gateway.stop(true)
    }
  })

  test('a stream that fails mid-way: the text so far is written, then the command fails with the in-band error', async () => {
    const upstream = await FakeUpstream.start()
    const yaml = [
      'providers:',
      `  - { id: up, type: openai-compatible, base_url: "${upstream.url}/v1", retention: none }`,
      'models:',
      '  - { id: flaky, backends: [{ provider: up, model: m }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 8192, max_output_tokens: 512 }',
      'plans: { payg: { monthly_allowance: "0", fusion: false } }',
    ].join('\n')
    const configEnv = { SVC_CONFIG: '/virtual/cli.yaml' }
    const other = await buildTestApp(configEnv, loadConfig(configEnv, () => yaml))
    const otherServer = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: other.app.fetch })
    try {
      const otherKey = (await other.createOrg('flaky', 1_000_000_000n)).adminKey
      let open!: () => void
      const sent = new Promise<void>(resolve => (open = resolve))
      upstream.enqueue({ kind: 'sse', body: [openAIWire.partial('Half an answer'), sent], then: 'reset' })
      const { io, err } = capture()
      const written: string[] = []
      const run = chat(loadClientConfig(env), ['--model', 'flaky', '--key', otherKey, '--url', `http://127.0.0.1:${otherServer.port}`, 'go'], {
        ...io,
        write: text => {
          written.push(text)
          if (written.join('') === 'Half an answer') open()
        },
      })
      await expect(run).rejects.toThrow(/^the stream failed: the upstream provider failed/)
      expect(written.join('')).toBe('Half an answer')
      expect(err).toEqual([])
    } finally {
      otherServer.stop(true)
      await upstream.close()
      await other.close()
    }
  })

  test('a stream that closes before its end (no finish_reason, no [DONE]) fails the command, with --json too', async () => {
    // Before: "The answer is", exit 0, and --json printed it with nothing marking it incomplete.
    const chunk = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`
    const cut = chunk({ choices: [{ index: 0, delta: { content: 'The answer is' }, finish_reason: null }] })
    const fusionCut = `event: synthesis.delta\n${chunk({ delta: 'The answer is' })}`
    const gateway = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch: request => new Response(new URL(request.url).pathname === '/api/v1/chat/fusion' ? fusionCut : cut, { headers: { 'content-type': 'text/event-stream' } }),
    })
    try {
      const at = `http://127.0.0.1:${gateway.port}`
      const text = await runCliCaptured(['chat', '--model', 'm', '--key', key, '--url', at, 'hi'], env)
      expect(text).toEqual({ code: 1, stdout: 'The answer is', out: [], err: ['error: the answer was cut: the gateway closed the stream before its end (no finish_reason or [DONE])'] })
      const json = await runCliCaptured(['chat', '--model', 'm', '--key', key, '--url', at, '--json', 'hi'], env)
      expect(json).toEqual({ code: 1, stdout: '', out: [], err: text.err })
      // svc fusion already needs its final result event.
      const fusion = await runCliCaptured(['fusion', '--models', 'a,b', '--key', key, '--url', at, '--json', 'hi'], env)
      expect(fusion).toEqual({ code: 1, stdout: '', out: [], err: ['error: the gateway closed the stream before the result'] })
    } finally {
      gateway.stop(true)
    }
  })

  test('an answer standard output does not take fails the command, naming it (a closed stdout exits 1)', async () => {
    // Before: the streamed answer went through process.stdout.write, which drops a failed write:
    // `svc chat … >&-` exited 0 having shown nothing.
    const { io } = capture()
    let writes = 0
    const run = chat(loadClientConfig(env), ['--model', 'demo-anonymous', '--key', key, '--url', url, 'hello'], {
      ...io,
      write: () => {
        writes += 1
        throw new Error('cannot write to standard output: EPIPE: broken pipe, write')
      },
    })
    await expect(run).rejects.toThrow('cannot write to standard output: EPIPE')
    expect(writes).toBe(1)

    const cli = join(import.meta.dir, '../../src/cli.ts')
    const closed = await runProcess(['sh', '-c', `exec bun ${cli} chat --model demo-private 'hi there' >&-`], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, SVC_URL: url, SVC_API_KEY: key, SVC_LOG_LEVEL: 'error' },
    })
    expect(closed.stderr).toBe('error: cannot write to standard output: it is closed\n')
    expect(closed.code).toBe(1)
  })

  test('the real command prints the streamed answer on stdout (SVC_URL and SVC_API_KEY from the environment)', async () => {
    const { stdout, stderr, code } = await runProcess(['bun', join(import.meta.dir, '../../src/cli.ts'), 'chat', '--model', 'demo-private', 'hi there'], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, SVC_URL: url, SVC_API_KEY: key, SVC_LOG_LEVEL: 'error' },
    })
    expect(stderr).toBe('[2 input tokens, 9 output tokens]\n')
    expect(stdout).toBe('Hello from the demo model. You said: hi there\n')
    expect(code).toBe(0)
  })
})
