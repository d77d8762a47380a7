import { describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { loadConfig } from '../../src/config/load'
import { noFile, problemsOf } from '../support/config'

// The process settings: the embedded defaults and the environment variables that override them
// (README: Configuration). The config file, providers and models, and the fusion and documents
// sections are in the other config-*.test.ts files.

describe('defaults (no env, embedded config)', () => {
  test('process settings', () => {
    const config = loadConfig({}, noFile)
    expect(config.port).toBe(8080)
    expect(config.databaseUrl).toBe('file:data/svc.db')
    expect(config.databaseAuthToken).toBeUndefined()
    expect(config.logLevel).toBe('info')
    expect(config.bootstrap).toEqual({ enabled: true, orgName: 'default', ownerEmail: 'owner@localhost' })
    expect(config.source).toBe('embedded default')
  })

  test('plans, default plan and auth cache from the embedded file', () => {
    const config = loadConfig({}, noFile)
    expect([...config.plans.keys()]).toEqual(['pro', 'payg'])
    expect(config.plans.get('pro')).toEqual({ id: 'pro', monthlyAllowanceNanos: 20_000_000_000n, fusion: true })
    expect(config.plans.get('payg')).toEqual({ id: 'payg', monthlyAllowanceNanos: 0n, fusion: false })
    expect(config.defaultPlanId).toBe('pro')
    expect(config.auth).toEqual({ cacheTtlMs: 2000, cacheMaxEntries: 100_000 })
  })

  test('limits and ledger settings', () => {
    const config = loadConfig({}, noFile)
    expect(config.limits.inference).toEqual({ key: { burst: 60, perSecond: 1 }, org: { burst: 600, perSecond: 10 } })
    expect(config.limits.management).toEqual({ key: { burst: 30, perSecond: 0.5 }, org: { burst: 120, perSecond: 2 } })
    expect(config.limits.orgInferenceConcurrency).toBe(32)
    expect(config.ledger).toEqual({ bootstrapCreditNanos: 5_000_000_000n, instanceStaleAfterMs: 30_000 })
  })

  test('is frozen all the way down', () => {
    const config = loadConfig({}, noFile)
    expect(Object.isFrozen(config)).toBe(true)
    expect(Object.isFrozen(config.bootstrap)).toBe(true)
    expect(Object.isFrozen(config.auth)).toBe(true)
    expect(Object.isFrozen(config.plans.get('pro'))).toBe(true)
    expect(() => {
      ;(config as { port: number }).port = 1
    }).toThrow()
  })

  test('reads only the env object it is given, not process.env', () => {
    const saved = { PORT: process.env.PORT, SVC_LOG_LEVEL: process.env.SVC_LOG_LEVEL }
    process.env.PORT = '1234'
    process.env.SVC_LOG_LEVEL = 'bogus'
    try {
      const config = loadConfig({ HOME: '/root', UNRELATED: 'x' }, noFile)
      expect(config.port).toBe(8080)
      expect(config.logLevel).toBe('info')
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name]
        else process.env[name] = value
      }
    }
  })
})

describe('PORT', () => {
  test.each([
    ['0', 0],
    ['1', 1],
    ['80', 80],
    ['08080', 8080],
    ['65535', 65535],
    ['', 8080],
  ])('%p → %p', (raw, port) => {
    expect(loadConfig({ PORT: raw }, noFile).port).toBe(port)
  })

  test.each(['65536', '99999', '123456', '-1', '80.5', '8e3', '0x50', ' 80', '80 ', 'abc', 'NaN', 'Infinity'])('%p is refused', raw => {
    const problems = problemsOf(() => loadConfig({ PORT: raw }, noFile))
    expect(problems).toEqual([`PORT: must be an integer from 0 to 65535, got "${raw}"`])
  })
})

describe('DATABASE_URL and DATABASE_AUTH_TOKEN', () => {
  test.each(['file:data/other.db', 'file:/var/lib/svc/svc.db', 'libsql://db.example.turso.io', 'http://127.0.0.1:8081', 'https://db.example.com', ':memory:', 'file::memory:'])(
    '%p is accepted as is',
    url => {
      expect(loadConfig({ DATABASE_URL: url }, noFile).databaseUrl).toBe(url)
    },
  )

  test.each(['file:', 'file:?tls=0'])('%p, a file: URL with no path, is refused', url => {
    // SQLite opens an empty path as a temporary database, deleted on close (`file:${DB}` with DB unset).
    expect(problemsOf(() => loadConfig({ DATABASE_URL: url }, noFile))).toEqual(['DATABASE_URL: file: names no file; give its path, e.g. file:data/svc.db'])
  })

  test('empty means the default', () => {
    expect(loadConfig({ DATABASE_URL: '' }, noFile).databaseUrl).toBe('file:data/svc.db')
  })

  test.each(['postgres://db/svc', '/var/lib/svc.db', 'data/svc.db', 'ftp://x', ':memory:x', 'ws://db', 'FILE:x'])('%p is refused', url => {
    const problems = problemsOf(() => loadConfig({ DATABASE_URL: url }, noFile))
    expect(problems).toHaveLength(1)
    expect(problems[0]).toStartWith('DATABASE_URL: ')
    expect(problems[0]).toContain(url)
  })

  // libSQL's client refused these only when opening the database, with a bare ERR_INVALID_URL.
  test.each(['libsql://', 'https://', 'http://', 'libsql://[::1', 'libsql://db example', 'libsql://?authToken=x'])('%p, a server URL naming no valid host, is refused', url => {
    expect(problemsOf(() => loadConfig({ DATABASE_URL: url }, noFile))).toEqual([
      `DATABASE_URL: must be a valid URL naming the server, e.g. libsql://db.example.turso.io, got "${url.replace(/\?.*/, '?[redacted]')}"`,
    ])
  })

  // What libSQL's client takes (@libsql/core's URL parse): authToken and tls query parameters,
  // percent-encoding, ?tls=0 on libsql: with a port, a file: URL with an empty or localhost host.
  test.each([
    'libsql://db.example.turso.io?authToken=abc&tls=1',
    'libsql://127.0.0.1:8080?tls=0',
    'http://127.0.0.1:8081?tls=0',
    'https://db.example.com/?tls=1&authToken=a%20b',
    'libsql://db.example.turso.io/a%20b',
    'file:data/a%20b.db?tls=0',
    'file:///srv/svc.db',
    'file://localhost/srv/svc.db',
    'file::memory:?cache=shared',
  ])('%p, a URL libSQL takes, is accepted', url => {
    expect(loadConfig({ DATABASE_URL: url }, noFile).databaseUrl).toBe(url)
  })

  // libSQL's client refused these only when opening the database, with a bare error naming no
  // field ("URL_INVALID: URL fragments are not supported"); quoted without query or fragment.
  test.each([
    ['libsql://h#frag', 'libSQL takes no #fragment'],
    ['file:data/svc.db#frag', 'libSQL takes no #fragment'],
    ['libsql://h?foo=1', 'the only query parameters libSQL takes are authToken and tls (cache for :memory:)'],
    ['libsql://h?secret-token', 'the only query parameters libSQL takes are authToken and tls (cache for :memory:)'],
    ['libsql://h?tls=maybe', 'Unknown value for the "tls" query argument: "maybe". Supported values are: ["0", "1"]'],
    ['libsql://h?tls=0', 'A "libsql:" URL with ?tls=0 must specify an explicit port'],
    ['http://h?tls=1', 'an http: URL cannot opt into TLS with ?tls=1 (use https:)'],
    ['https://h?tls=0', 'an https: URL cannot opt out of TLS with ?tls=0 (use http:)'],
    ['libsql://h/%zz', 'malformed percent-encoding (a % must start %XX, bytes of UTF-8)'],
    ['file:data/%zz.db', 'malformed percent-encoding (a % must start %XX, bytes of UTF-8)'],
    ['file://db.internal/svc.db', 'a file: URL names no host; an absolute path starts with one slash or three (file:/srv/svc.db, file:///srv/svc.db)'],
  ])('%p, a URL libSQL refuses, is refused naming DATABASE_URL', (url, why) => {
    expect(problemsOf(() => loadConfig({ DATABASE_URL: url }, noFile))).toEqual([`DATABASE_URL: ${why}, got "${url.replace(/[?#].*/, s => `${s[0]}[redacted]`)}"`])
  })

  test('the auth token is passed through; empty means none', () => {
    expect(loadConfig({ DATABASE_AUTH_TOKEN: 'tok' }, noFile).databaseAuthToken).toBe('tok')
    expect(loadConfig({ DATABASE_AUTH_TOKEN: '' }, noFile).databaseAuthToken).toBeUndefined()
  })
})

describe('SVC_LOG_LEVEL', () => {
  test.each(['debug', 'info', 'warn', 'error'] as const)('%p', level => {
    expect(loadConfig({ SVC_LOG_LEVEL: level }, noFile).logLevel).toBe(level)
  })

  test.each(['DEBUG', 'Info', 'trace', 'warning', 'fatal', ' info'])('%p is refused', level => {
    const problems = problemsOf(() => loadConfig({ SVC_LOG_LEVEL: level }, noFile))
    expect(problems).toHaveLength(1)
    expect(problems[0]).toStartWith('SVC_LOG_LEVEL: must be one of debug, info, warn, error')
    expect(problems[0]).toContain(`"${level}"`)
  })
})

describe('DATABASE_TIMEOUT_S', () => {
  test('seconds a libSQL server gets per request: 10 unless set', () => {
    expect(loadConfig({}, noFile).databaseTimeoutMs).toBe(10_000)
    expect(loadConfig({ DATABASE_TIMEOUT_S: '2.5' }, noFile).databaseTimeoutMs).toBe(2500)
    expect(loadConfig({ DATABASE_TIMEOUT_S: '3600' }, noFile).databaseTimeoutMs).toBe(3_600_000)
  })

  test.each(['0', '0.05', '3601', '-1', '1e3', 'ten', ' 5', '5s', 'Infinity'])('%p is refused', raw => {
    const problems = problemsOf(() => loadConfig({ DATABASE_TIMEOUT_S: raw }, noFile))
    expect(problems).toEqual([`DATABASE_TIMEOUT_S: must be a number of seconds from 0.1 to 3600, got "${raw}"`])
  })
})

describe('SVC_BOOTSTRAP', () => {
  test('0 turns bootstrap off, 1 and unset leave it on', () => {
    expect(loadConfig({ SVC_BOOTSTRAP: '0' }, noFile).bootstrap.enabled).toBe(false)
    expect(loadConfig({ SVC_BOOTSTRAP: '1' }, noFile).bootstrap.enabled).toBe(true)
    expect(loadConfig({}, noFile).bootstrap.enabled).toBe(true)
  })

  test.each(['true', 'false', 'yes', 'no', 'off', '2', '00', ' 0'])('%p is refused', flag => {
    const problems = problemsOf(() => loadConfig({ SVC_BOOTSTRAP: flag }, noFile))
    expect(problems).toEqual([`SVC_BOOTSTRAP: must be 0 or 1, got "${flag}"`])
  })
})

describe('an empty variable means unset', () => {
  /** Every variable the README's Configuration table lists (its `Env` column). */
  function documentedVariables(): string[] {
    const readme = require('node:fs').readFileSync(join(import.meta.dir, '../../README.md'), 'utf8') as string
    const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('The config file is validated strictly'))
    const rows = section.split('\n').filter(line => line.startsWith('| `'))
    return rows.flatMap(row => [...row.split('|')[1]!.matchAll(/`([A-Z_]+)`/g)].map(match => match[1]!))
  }

  test('the table lists the process settings', () => {
    expect(documentedVariables()).toEqual(expect.arrayContaining(['PORT', 'DATABASE_URL', 'SVC_LOG_LEVEL', 'SVC_BOOTSTRAP', 'SVC_INSTANCE_ID', 'SVC_URL', 'SVC_CONFIG_DIR']))
  })

  test.each(documentedVariables())('%s="" loads as when it is unset', name => {
    expect(loadConfig({ HOME: '/home/svc', [name]: '' }, noFile)).toEqual(loadConfig({ HOME: '/home/svc' }, noFile))
  })

  test('all of them empty at once', () => {
    const empty = Object.fromEntries(documentedVariables().map(name => [name, '']))
    expect(loadConfig({ ...empty, HOME: '/home/svc' }, noFile)).toEqual(loadConfig({ HOME: '/home/svc' }, noFile))
  })
})

test('every env problem is reported at once', () => {
  const problems = problemsOf(() => loadConfig({ PORT: 'x', SVC_LOG_LEVEL: 'loud', SVC_BOOTSTRAP: 'maybe', DATABASE_URL: 'mysql://x' }, noFile))
  expect(problems.map(problem => problem.split(':')[0])).toEqual(['PORT', 'SVC_LOG_LEVEL', 'SVC_BOOTSTRAP', 'DATABASE_URL'])
})
