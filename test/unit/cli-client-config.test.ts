import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../../src/commands'
import { loadClientConfig } from '../../src/config/client'
import { captureIo, runCliCaptured, runProcess } from '../support/cli'
import { buildTestApp, type TestApp } from '../support/harness'

// The client commands (chat, fusion, login, logout, encrypted-chat) and dev-tee run on a
// workstation: they read SVC_URL, SVC_API_KEY and the login token's directory, never the
// server's config file or the provider secrets it names. And no command needs a home directory
// unless it keeps the login token there.

const CLI = join(import.meta.dir, '../../src/cli.ts')

let t: TestApp
let url: string
let key: string
let dir: string
/** A server's config whose provider key (VLLM_A_KEY) is not set here: loadConfig refuses it. */
let serverConfig: string

beforeAll(async () => {
  t = await buildTestApp()
  url = t.listen()
  key = (await t.createOrg('client-config', 1_000_000_000n)).adminKey
  dir = mkdtempSync(join(tmpdir(), 'svc-client-config-'))
  serverConfig = join(dir, 'server.yaml')
  writeFileSync(
    serverConfig,
    [
      'providers:',
      '  - { id: vllm-a, type: openai-compatible, base_url: "http://vllm-a:8000/v1", api_key_env: VLLM_A_KEY }',
      'models:',
      '  - { id: m, backends: [{ provider: vllm-a, model: m }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 8192, max_output_tokens: 512 }',
      'plans: { payg: { monthly_allowance: "0", fusion: false } }',
    ].join('\n'),
  )
})

afterAll(async () => {
  await t.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('client commands ignore the server config', () => {
  test('chat answers through SVC_URL and SVC_API_KEY while SVC_CONFIG names a config whose secrets are not set', async () => {
    const result = await runCliCaptured(['chat', '--model', 'demo-anonymous', 'hi'], { SVC_CONFIG: serverConfig, SVC_URL: url, SVC_API_KEY: key })
    expect(result.err).toEqual(['[1 input tokens, 8 output tokens]'])
    expect(result.stdout).toBe('Hello from the demo model. You said: hi\n')
    expect(result.code).toBe(0)
  })

  test('fusion, encrypted-chat and dev-tee get to their own argument checks; logout to the token directory', async () => {
    const env = { SVC_CONFIG: serverConfig, SVC_URL: url, SVC_API_KEY: key, SVC_CONFIG_DIR: join(dir, 'svc') }
    const usage: Array<[string[], string]> = [
      [['fusion', '--models', 'demo-anonymous', 'hi'], '--models takes 2 or 3'],
      [['encrypted-chat', '--model', 'demo-anonymous', 'hi'], '--model must be an :encrypted model id'],
      [['dev-tee', '--family', 'other'], '--family must be nearai or phala'],
    ]
    for (const [argv, message] of usage) {
      const { io, err } = captureIo()
      expect({ argv, code: await runCli(argv, env, io) }).toEqual({ argv, code: 2 })
      expect(err[0]).toStartWith(`usage error: ${message}`)
    }
    const { io, out } = captureIo()
    expect(await runCli(['logout'], env, io)).toBe(0)
    expect(out).toEqual(['Not signed in.'])
  })

  test('login and logout print no JSON: --json is an unknown flag there, a usage error', async () => {
    // Before: both took it and printed their text lines, where a script expected one JSON object.
    const env = { SVC_URL: url, SVC_CONFIG_DIR: join(dir, 'svc') }
    for (const argv of [['logout', '--json'], ['login', '--url', 'http://127.0.0.1:1', '--json']]) {
      const { io, out, err } = captureIo()
      expect({ argv, code: await runCli(argv, env, io), out }).toEqual({ argv, code: 2, out: [] })
      expect(err[0]).toStartWith("usage error: Unknown option '--json'")
    }
  })

  test('database commands still refuse the config, naming the missing secret', async () => {
    const { io, err } = captureIo()
    expect(await runCli(['migrate'], { SVC_CONFIG: serverConfig, DATABASE_URL: `file:${join(dir, 'refused.db')}` }, io)).toBe(1)
    expect(err.join('\n')).toStartWith('invalid configuration:')
    expect(err.join('\n')).toContain('VLLM_A_KEY')
    expect(existsSync(join(dir, 'refused.db'))).toBe(false)
  })

  test('a bad PORT matters to a client command only when SVC_URL does not replace it', async () => {
    const refused = captureIo()
    expect(await runCli(['logout'], { PORT: 'x', SVC_CONFIG_DIR: join(dir, 'svc') }, refused.io)).toBe(1)
    expect(refused.err.join('\n')).toContain('PORT: must be an integer from 0 to 65535, got "x"')
    const fine = captureIo()
    expect(await runCli(['logout'], { PORT: 'x', SVC_URL: url, SVC_CONFIG_DIR: join(dir, 'svc') }, fine.io)).toBe(0)
  })
})

describe('loadClientConfig', () => {
  test('an empty variable means unset, as for every setting', () => {
    const empty = loadClientConfig({ SVC_URL: '', SVC_API_KEY: '', SVC_CONFIG_DIR: '', XDG_CONFIG_HOME: '', PORT: '', HOME: '/home/svc' })
    expect({ url: empty.url, apiKey: empty.apiKey, configDir: empty.configDir() }).toEqual({ url: 'http://localhost:8080', apiKey: undefined, configDir: '/home/svc/.config/svc' })
  })

  test('SVC_CONFIG_DIR, else $XDG_CONFIG_HOME/svc, else ~/.config/svc; SVC_URL without trailing slashes, else PORT on localhost', () => {
    expect(loadClientConfig({ SVC_CONFIG_DIR: '/c', XDG_CONFIG_HOME: '/x', HOME: '/h' }).configDir()).toBe('/c')
    expect(loadClientConfig({ XDG_CONFIG_HOME: '/x', HOME: '/h' }).configDir()).toBe('/x/svc')
    expect(loadClientConfig({ HOME: '/h' }).configDir()).toBe('/h/.config/svc')
    expect(loadClientConfig({ SVC_URL: 'https://gateway.example//', PORT: '9' }).url).toBe('https://gateway.example')
    expect(loadClientConfig({ PORT: '9090' }).url).toBe('http://localhost:9090')
  })
})

// A container's uid often has no passwd entry: with HOME unset too, os.homedir() throws. Only a
// root test process can switch to such a uid (setpriv), so elsewhere this is skipped.
describe.skipIf(process.getuid?.() !== 0 || Bun.which('setpriv') === null)('a uid without a home directory', () => {
  // `env -i` but PATH: no HOME, no XDG_CONFIG_HOME, no SVC_CONFIG_DIR.
  const nobody = (args: string[]) => ['setpriv', '--reuid', '10001', '--regid', '10001', '--clear-groups', process.execPath, CLI, ...args]
  const asNobody = (args: string[], env: Record<string, string>) => runProcess(nobody(args), { env: { PATH: process.env.PATH, ...env } })
  let data: string

  beforeAll(() => {
    data = mkdtempSync(join(tmpdir(), 'svc-no-home-'))
    chmodSync(data, 0o777)
  })
  afterAll(() => rmSync(data, { recursive: true, force: true }))

  test('serve starts, and migrate runs', async () => {
    const database = { DATABASE_URL: `file:${join(data, 'svc.db')}`, SVC_BOOTSTRAP: '0' }
    const migrated = await asNobody(['migrate'], database)
    expect(migrated.stderr).toBe('')
    expect(migrated.code).toBe(0)
    const child = Bun.spawn(nobody(['serve']), {
      env: { PATH: process.env.PATH, PORT: '0', ...database },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    try {
      // The first stdout line is the `listening` log line; a crash closes stdout first.
      const decoder = new TextDecoder()
      let text = ''
      for await (const chunk of child.stdout as ReadableStream<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true })
        if (text.includes('\n')) break
      }
      expect(text).toContain('"msg":"listening"')
    } finally {
      child.kill()
      await child.exited
    }
  })

  test('login names the variables to set, in one line, before contacting the gateway', async () => {
    // Port 1 on loopback refuses: a contacted gateway would fail with "cannot reach".
    const result = await asNobody(['login', '--url', 'http://127.0.0.1:1'], {})
    expect(result.stderr).toBe('error: no directory to keep the svc login token in: this user has no home directory; set SVC_CONFIG_DIR, XDG_CONFIG_HOME or HOME\n')
    expect(result.code).toBe(1)
  })

  test('chat without a key says how to get one; logout has no token to remove', async () => {
    const chat = await asNobody(['chat', '--model', 'demo-anonymous', '--url', url, 'hi'], {})
    expect(chat.stderr).toStartWith('usage error: an API key is needed: --key, SVC_API_KEY, or sign in with svc login')
    expect(chat.code).toBe(2)
    const logout = await asNobody(['logout'], {})
    expect(logout).toEqual({ code: 0, stdout: 'Not signed in.\n', stderr: '' })
  })
})
