import { expect, test } from 'bun:test'
import { ConfigError, loadConfig } from '../../src/config/load'

// The operations config keys: metrics (token, admin port), shutdown (drain deadline), and the
// timings that must leave room for a periodic action (heartbeats, device-flow polls).
const BASE = 'plans: { payg: { monthly_allowance: "0", fusion: false } }\n'
const load = (yaml: string, env: Record<string, string> = {}) => loadConfig({ SVC_CONFIG: '/virtual.yaml', ...env }, () => BASE + yaml)
const problems = (yaml: string, env: Record<string, string> = {}) => {
  try {
    load(yaml, env)
  } catch (error) {
    return (error as ConfigError).problems
  }
  return []
}

test('defaults: /metrics off, admin host loopback, 25 s drain', () => {
  const config = load('')
  expect(config.metrics).toEqual({ token: undefined, port: undefined, host: '127.0.0.1' })
  expect(config.shutdown).toEqual({ drainTimeoutMs: 25_000 })
})

test('metrics token from the named variable, admin port and host, fractional drain seconds', () => {
  const config = load('metrics: { token_env: MY_TOKEN, port: 9090, host: 0.0.0.0 }\nshutdown: { drain_timeout_s: 1.5 }', { MY_TOKEN: 'x'.repeat(16) })
  expect(config.metrics).toEqual({ token: 'x'.repeat(16), port: 9090, host: '0.0.0.0' })
  expect(config.shutdown.drainTimeoutMs).toBe(1500)
})

test('a metrics token variable that is unset or short, a bad port or a negative drain stops the boot', () => {
  expect(problems('metrics: { token_env: MY_TOKEN }')).toEqual(['metrics.token_env: MY_TOKEN must be set to a token of at least 16 characters'])
  expect(problems('metrics: { token_env: MY_TOKEN }', { MY_TOKEN: 'short' })).toHaveLength(1)
  expect(problems('metrics: { port: 70000 }')[0]).toContain('metrics.port')
  expect(problems('metrics: { tokn_env: X }')[0]).toContain('metrics')
  expect(problems('shutdown: { drain_timeout_s: -1 }')[0]).toContain('shutdown.drain_timeout_s')
})

test('SVC_FAULT_POINT (crash tests) accepts only the named steps, and is unset by default', () => {
  expect(load('').faultPoint).toBeUndefined()
  expect(load('', { SVC_FAULT_POINT: 'before_settle' }).faultPoint).toBe('before_settle')
  expect(problems('', { SVC_FAULT_POINT: 'whenever' })[0]).toContain('SVC_FAULT_POINT')
})

test('a metrics token with whitespace stops the boot by name: no Authorization header could ever carry it', () => {
  // Before, it loaded, and every scrape was 401 (the bearer is one run of non-space characters);
  // a secret file's trailing newline is the usual way in.
  for (const token of ['metrics-token-0123456789\n', 'metrics token 0123456789', '\tmetrics-token-0123456789']) {
    expect(problems('metrics: { token_env: MY_TOKEN }', { MY_TOKEN: token })).toEqual([
      'metrics.token_env: MY_TOKEN must not contain spaces or control characters (a trailing newline from a secret file, say)',
    ])
  }
  expect(load('metrics: { token_env: MY_TOKEN }', { MY_TOKEN: 'metrics-token-0123456789' }).metrics.token).toBe('metrics-token-0123456789')
})

test('bootstrap.owner_email must be an email address, as everywhere else an email is taken', () => {
  // Before, any 3 characters passed (even blanks), and the first boot created an owner whose
  // email `svc users add` and the API would have refused.
  for (const email of ['not an email', '   ', 'owner', 'a@b@c']) {
    expect(problems(`bootstrap: { owner_email: "${email}" }`)).toEqual([`bootstrap.owner_email: must be an email address, got "${email}"`])
  }
  expect(load('bootstrap: { owner_email: " Ops@Example.test " }').bootstrap.ownerEmail).toBe(' Ops@Example.test ')
})

test('bootstrap.org_name refuses control characters, as every organization name does', () => {
  // Before, the first boot's organization could be named with an escape sequence that `svc orgs show` printed raw.
  expect(problems('bootstrap: { org_name: "\\e[2Jfake\\nplan: enterprise" }')).toEqual(['bootstrap.org_name: must not contain control characters'])
  expect(load('bootstrap: { org_name: "Acme 🦊" }').bootstrap.orgName).toBe('Acme 🦊')
})

test('metrics.host must look like an address, and metrics.port must not be the public PORT: each stops the boot by name', () => {
  // Before, both loaded: `svc serve` then bound the public port and failed on the admin one with
  // "getaddrinfo ENOTFOUND not a host!!" or "EADDRINUSE … port 8080", naming no setting.
  for (const host of ['not a host!!', 'http://127.0.0.1', '10.0.0.1/24', ' ']) {
    const found = problems(`metrics: { port: 9090, host: "${host}" }`)
    expect(found).toHaveLength(1)
    expect(found[0]).toStartWith('metrics.host: ')
  }
  for (const host of ['127.0.0.1', '0.0.0.0', '::', '::1', 'metrics.internal', 'fe80::1%eth0']) expect(load(`metrics: { port: 9090, host: "${host}" }`).metrics.host).toBe(host)
  expect(problems('metrics: { port: 8080 }')).toEqual(['metrics.port: 8080 is the public PORT too; the admin port needs a port of its own'])
  expect(problems('metrics: { port: 9090 }', { PORT: '9090' })).toEqual(['metrics.port: 9090 is the public PORT too; the admin port needs a port of its own'])
  // Port 0 (any free port) for both is fine: they get different ones.
  expect(load('metrics: { port: 0 }', { PORT: '0' }).metrics.port).toBe(0)
})

test('ledger.instance_stale_after_s must span three heartbeats: below that, live instances get their leases swept', () => {
  // Before, 5 (one heartbeat interval) loaded: another instance then found a live one stale
  // between two of its beats and returned the leases its in-flight holds were drawn on.
  for (const seconds of [1, 5, 10, 14]) {
    expect(problems(`ledger: { instance_stale_after_s: ${seconds} }`)).toEqual([
      `ledger.instance_stale_after_s: must be at least 15 (3 heartbeats of 5 s), got ${seconds}: a live instance would be declared stale between its own heartbeats and its leases returned`,
    ])
  }
  expect(load('ledger: { instance_stale_after_s: 15 }').ledger.instanceStaleAfterMs).toBe(15_000)
  expect(load('').ledger.instanceStaleAfterMs).toBe(30_000)
  expect(problems('ledger: { instance_stale_after_s: 3601 }')[0]).toStartWith('ledger.instance_stale_after_s: ')
})

test('oauth.device_code_ttl_s must leave svc login three polls: a code that expires before its first poll cannot be redeemed', () => {
  // Before, ttl 60 with a 60 s interval loaded: svc login slept 60 s, polled, and got expired_token every time.
  for (const [ttl, interval] of [[60, 60], [60, 30], [89, 30]]) {
    expect(problems(`oauth: { device_code_ttl_s: ${ttl}, device_poll_interval_s: ${interval} }`)).toEqual([
      `oauth.device_code_ttl_s: must be at least 3 × oauth.device_poll_interval_s (${3 * interval!}), got ${ttl}: svc login waits one interval before each poll, and the code would expire before it could be redeemed`,
    ])
  }
  expect(problems('oauth: { device_poll_interval_s: 60 }')).toEqual([])
  expect(load('oauth: { device_code_ttl_s: 90, device_poll_interval_s: 30 }').oauth).toMatchObject({ deviceCodeTtlMs: 90_000, devicePollIntervalS: 30 })
  expect(load('').oauth).toMatchObject({ deviceCodeTtlMs: 600_000, devicePollIntervalS: 5 })
})

test('a value that fails a pattern is told what the field takes, in words, never the regular expression', () => {
  // Before: "oauth.issuer: Expected string to match '^https?://[^/?#\s]+$'", and so on.
  const cases: Array<[string, string]> = [
    ['oauth: { issuer: "https://gateway.example.com/app" }', 'oauth.issuer: must be an http(s) origin without a path, query or fragment, e.g. https://gateway.example.com'],
    ['mcp: { allowed_origins: ["inspector.example"] }', 'mcp.allowed_origins.0: must be an http(s) origin without a path, query or fragment, e.g. https://gateway.example.com'],
    ['metrics: { port: 9090, host: "http://127.0.0.1" }', 'metrics.host: must be an IP address or a host name (letters, digits, dots, colons, dashes, a %zone; at most 255), not a URL'],
    ['metrics: { token_env: "MY TOKEN" }', 'metrics.token_env: must be an environment variable name: 1 to 128 letters, digits or underscores, not starting with a digit'],
    ['prices: { web_fetch: "$0.002" }', 'prices.web_fetch: must be a decimal USD amount with at most 9 decimals, e.g. "20" or "0.40"'],
    ['ledger: { bootstrap_credit: "5.0000000001" }', 'ledger.bootstrap_credit: must be a decimal USD amount with at most 9 decimals, e.g. "20" or "0.40"'],
  ]
  for (const [yaml, problem] of cases) expect(problems(yaml)).toEqual([problem])
})
