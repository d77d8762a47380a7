import { expect, test } from 'bun:test'
import { ConfigError, loadConfig } from '../../src/config/load'
import { runSvc } from '../support/gateway-process'

// Config problems go to stderr, and so into the boot log: a value echoed back must not carry the
// credential the operator put in it (README: credentials in DATABASE_URL are never printed; API
// keys are redacted on every path).

const PLANS = 'plans: { payg: { monthly_allowance: "0", fusion: false } }\n'
const KEY = 'z_sk_4Fq9Zr0aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789abcdef'

function problemsOf(env: Record<string, string>, yaml?: string): string {
  try {
    loadConfig(yaml === undefined ? env : { SVC_CONFIG: '/virtual.yaml', ...env }, () => yaml ?? '')
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    return `${(error as ConfigError).problems.join('\n')}\n${(error as Error).message}`
  }
  throw new Error('expected a ConfigError')
}

test('a URL refused with its credentials in it is named without them', () => {
  const cases: Array<[Record<string, string>, string | undefined, string]> = [
    [{ DATABASE_URL: 'postgres://admin:hunter2@db.internal/svc' }, undefined, 'DATABASE_URL: must start with file:, libsql://, http:// or https://, got "postgres://[redacted]@db.internal/svc"'],
    [{ DATABASE_URL: 'ws://db.internal?authToken=hunter2' }, undefined, 'got "ws://db.internal?[redacted]"'],
    // Any parameter may be the secret, not only authToken: a refused URL is quoted without its query or fragment.
    [{ DATABASE_URL: 'postgres://db.internal/svc?password=hunter2' }, undefined, 'got "postgres://db.internal/svc?[redacted]"'],
    [{ DATABASE_URL: 'libsql://admin:hunter2@' }, undefined, 'DATABASE_URL: must be a valid URL naming the server, e.g. libsql://db.example.turso.io, got "libsql://[redacted]@"'],
    [{ OLLAMA_BASE_URL: 'http://gpu-box:11434/?token=hunter2' }, undefined, 'OLLAMA_BASE_URL: must not have a query or fragment, got "http://gpu-box:11434/?[redacted]"'],
    [{}, `${PLANS}providers: [{ id: a, type: openai-compatible, base_url: "http://h/v1?key=hunter2" }]`, 'providers.0.base_url: provider "a": must not have a query or fragment, got "http://h/v1?[redacted]"'],
    [{}, `${PLANS}providers: [{ id: a, type: openai-compatible, base_url: "http://h/v1#hunter2" }]`, 'got "http://h/v1#[redacted]"'],
    [{}, `${PLANS}providers: [{ id: a, type: openai-compatible, base_url: "ftp://h/v1?key=hunter2" }]`, 'must be an absolute http:// or https:// URL, got "ftp://h/v1?[redacted]"'],
    [{ OLLAMA_BASE_URL: 'http://ollama:hunter2@gpu-box:11434' }, undefined, 'OLLAMA_BASE_URL: must not carry credentials (use api_key_env), got "http://[redacted]@gpu-box:11434"'],
    [{}, `${PLANS}providers: [{ id: a, type: openai-compatible, base_url: "https://u:hunter2@x/v1" }]`, 'providers.0.base_url: provider "a": must not carry credentials (use api_key_env), got "https://[redacted]@x/v1"'],
    // An unencoded `@` in the password: the URL's authority ends at the last one.
    [{}, `${PLANS}providers: [{ id: a, type: openai-compatible, base_url: "https://u:hun@ter2@x/v1" }]`, 'got "https://[redacted]@x/v1"'],
  ]
  for (const [env, yaml, expected] of cases) {
    const text = problemsOf(env, yaml)
    expect(text).toContain(expected)
    expect(text).not.toContain('hunter2')
    expect(text).not.toContain('ter2')
  }
})

test('an API key pasted into a config field is redacted in the problem naming it', () => {
  const text = problemsOf({}, `${PLANS}models: [{ id: m, backends: [{ provider: demo, model: m }], price: { input_per_mtok: "0", output_per_mtok: "0" }, context_length: 10, max_output_tokens: 5 }]
providers: [{ id: demo, type: demo }]
fusion: { judge: "${KEY}" }`)
  expect(text).toContain('fusion.judge: "z_sk_[redacted]" is not a configured model')
  expect(text).not.toContain(KEY.slice(5))
})

test('svc (a real process) prints a bad DATABASE_URL without its password', async () => {
  const result = await runSvc(['migrate'], { DATABASE_URL: 'postgres://admin:hunter2@db.internal/svc', SVC_CONFIG: '' })
  expect(result.code).toBe(1)
  expect(result.stderr).toContain('DATABASE_URL')
  expect(result.stderr).toContain('postgres://[redacted]@db.internal/svc')
  expect(result.stdout + result.stderr).not.toContain('hunter2')
})

test('svc (a real process): a failure line never prints the password of a URL or a key', async () => {
  // SVC_URL with a proxy's basic-auth credentials, and a key in the query by mistake.
  for (const url of ['http://proxy:hunter2@127.0.0.1:1', `http://127.0.0.1:1/?key=${KEY}`]) {
    const result = await runSvc(['chat', '--model', 'demo-anonymous', '--key', KEY, '--url', url, 'hi'], { SVC_CONFIG: '', SVC_CONFIG_DIR: '/nonexistent/svc' })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('error: cannot reach the gateway at http://')
    expect(result.stdout + result.stderr).not.toContain('hunter2')
    expect(result.stdout + result.stderr).not.toContain(KEY.slice(5))
  }
})

test('svc (a real process): a usage error never prints the password of the URL it refuses', async () => {
  const result = await runSvc(['chat', '--model', 'demo-anonymous', '--key', KEY, '--url', 'ftp://proxy:hunter2@gateway.internal', 'hi'], { SVC_CONFIG: '', SVC_CONFIG_DIR: '/nonexistent/svc' })
  expect(result.code).toBe(2)
  expect(result.stderr).toContain('usage error: ')
  expect(result.stderr).toContain('ftp://[redacted]@gateway.internal')
  expect(result.stdout + result.stderr).not.toContain('hunter2')
})
