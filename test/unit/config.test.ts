import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, loadConfig } from '../../src/config/load'

type Env = Record<string, string | undefined>

/** A readText that must not be called (no SVC_CONFIG). */
const noFile = (path: string): string => {
  throw new Error(`unexpected read of ${path}`)
}

/** Loads config from `text` as the file named by SVC_CONFIG. */
function fromFile(text: string, env: Env = {}) {
  const reads: string[] = []
  const config = loadConfig({ SVC_CONFIG: '/etc/svc/config.yaml', ...env }, path => {
    reads.push(path)
    return text
  })
  return { config, reads }
}

/** The ConfigError that loading throws (fails the test when loading succeeds). */
function problemsOf(load: () => unknown): string[] {
  try {
    load()
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    const problems = (error as ConfigError).problems
    expect(problems.length).toBeGreaterThan(0)
    // The message lists every problem, one per line, for the boot log.
    for (const problem of problems) expect((error as Error).message).toContain(problem)
    return problems
  }
  throw new Error('expected a ConfigError')
}

function fileProblems(text: string, env: Env = {}): string[] {
  return problemsOf(() => fromFile(text, env))
}

const MINIMAL = 'plans:\n  basic: { monthly_allowance: "0", fusion: false }\n'

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
  test.each(['file:data/other.db', 'file:/var/lib/svc/svc.db', 'libsql://db.example.turso.io', 'http://127.0.0.1:8081', 'https://db.example.com', ':memory:'])(
    '%p is accepted as is',
    url => {
      expect(loadConfig({ DATABASE_URL: url }, noFile).databaseUrl).toBe(url)
    },
  )

  test('empty means the default', () => {
    expect(loadConfig({ DATABASE_URL: '' }, noFile).databaseUrl).toBe('file:data/svc.db')
  })

  test.each(['postgres://db/svc', '/var/lib/svc.db', 'data/svc.db', 'ftp://x', ':memory:x', 'ws://db', 'FILE:x'])('%p is refused', url => {
    const problems = problemsOf(() => loadConfig({ DATABASE_URL: url }, noFile))
    expect(problems).toHaveLength(1)
    expect(problems[0]).toStartWith('DATABASE_URL: ')
    expect(problems[0]).toContain(url)
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

test('every env problem is reported at once', () => {
  const problems = problemsOf(() => loadConfig({ PORT: 'x', SVC_LOG_LEVEL: 'loud', SVC_BOOTSTRAP: 'maybe', DATABASE_URL: 'mysql://x' }, noFile))
  expect(problems.map(problem => problem.split(':')[0])).toEqual(['PORT', 'SVC_LOG_LEVEL', 'SVC_BOOTSTRAP', 'DATABASE_URL'])
})

describe('config file (SVC_CONFIG)', () => {
  const YAML = `# team config
plans:
  free: { monthly_allowance: "0", fusion: false }
  team:
    monthly_allowance: "12.5"
    fusion: true
  exact: { monthly_allowance: "9007199.254740993", fusion: true }
bootstrap:
  org_name: Acme Corp
  owner_email: ops@acme.test
auth:
  cache_ttl_ms: 0
  cache_max_entries: 10
`

  test('a YAML file is read through readText and replaces the embedded default', () => {
    const { config, reads } = fromFile(YAML)
    expect(reads).toEqual(['/etc/svc/config.yaml'])
    expect(config.source).toBe('/etc/svc/config.yaml')
    expect([...config.plans.keys()]).toEqual(['free', 'team', 'exact'])
    expect(config.plans.get('team')).toEqual({ id: 'team', monthlyAllowanceNanos: 12_500_000_000n, fusion: true })
    // Money goes string → bigint without passing through a float.
    expect(config.plans.get('exact')!.monthlyAllowanceNanos).toBe(9007199254740993n)
    expect(config.plans.has('pro')).toBe(false)
    // The first plan with Fusion, not the first plan.
    expect(config.defaultPlanId).toBe('team')
    expect(config.bootstrap).toEqual({ enabled: true, orgName: 'Acme Corp', ownerEmail: 'ops@acme.test' })
    expect(config.auth).toEqual({ cacheTtlMs: 0, cacheMaxEntries: 10 })
  })

  test('a JSON file is valid YAML', () => {
    const json = JSON.stringify({
      plans: { starter: { monthly_allowance: '1.000000001', fusion: false }, max: { monthly_allowance: '100', fusion: false } },
      auth: { cache_ttl_ms: 1500 },
    })
    const { config } = fromFile(json)
    expect(config.plans.get('starter')!.monthlyAllowanceNanos).toBe(1_000_000_001n)
    expect(config.plans.get('max')!.monthlyAllowanceNanos).toBe(100_000_000_000n)
    // No plan has Fusion: the first plan is the default.
    expect(config.defaultPlanId).toBe('starter')
    expect(config.auth).toEqual({ cacheTtlMs: 1500, cacheMaxEntries: 100_000 })
    expect(config.bootstrap).toEqual({ enabled: true, orgName: 'default', ownerEmail: 'owner@localhost' })
  })

  test('omitted optional sections take their defaults', () => {
    const { config } = fromFile(MINIMAL)
    expect(config.auth).toEqual({ cacheTtlMs: 2000, cacheMaxEntries: 100_000 })
    expect(config.bootstrap.orgName).toBe('default')
    expect(config.defaultPlanId).toBe('basic')
  })

  test('a real file on disk is read by the default reader', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-config-'))
    try {
      const path = join(dir, 'svc.yaml')
      writeFileSync(path, MINIMAL)
      const config = loadConfig({ SVC_CONFIG: path })
      expect(config.source).toBe(path)
      expect([...config.plans.keys()]).toEqual(['basic'])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('an empty SVC_CONFIG means the embedded default', () => {
    const config = loadConfig({ SVC_CONFIG: '' }, noFile)
    expect(config.source).toBe('embedded default')
  })
})

describe('config file problems', () => {
  test('an unreadable file names SVC_CONFIG, the path and the cause', () => {
    const problems = problemsOf(() =>
      loadConfig({ SVC_CONFIG: '/missing/svc.yaml' }, () => {
        throw new Error("ENOENT: no such file or directory, open '/missing/svc.yaml'")
      }),
    )
    expect(problems).toEqual([`SVC_CONFIG: cannot read "/missing/svc.yaml": ENOENT: no such file or directory, open '/missing/svc.yaml'`])
  })

  test('an unreadable file through the default reader', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-config-'))
    try {
      const path = join(dir, 'does-not-exist.yaml')
      const problems = problemsOf(() => loadConfig({ SVC_CONFIG: path }))
      expect(problems).toHaveLength(1)
      expect(problems[0]).toStartWith(`SVC_CONFIG: cannot read "${path}"`)
      // A directory is not a readable config file either.
      const directory = problemsOf(() => loadConfig({ SVC_CONFIG: dir }))
      expect(directory[0]).toStartWith(`SVC_CONFIG: cannot read "${dir}"`)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('env and file problems are reported together', () => {
    const problems = problemsOf(() =>
      loadConfig({ SVC_CONFIG: '/x.yaml', PORT: '70000' }, () => {
        throw new Error('EACCES')
      }),
    )
    expect(problems).toEqual(['PORT: must be an integer from 0 to 65535, got "70000"', 'SVC_CONFIG: cannot read "/x.yaml": EACCES'])
  })

  test('syntax errors name the file', () => {
    const problems = fileProblems('plans: [\n')
    expect(problems).toHaveLength(1)
    expect(problems[0]).toStartWith('/etc/svc/config.yaml: not valid YAML or JSON')
  })

  test('an empty file, a scalar and a list are not configurations', () => {
    for (const text of ['', '"just a string"', '- plans\n', 'null', '42']) {
      const problems = fileProblems(text)
      expect(problems.some(problem => problem.startsWith('(root): '))).toBe(true)
    }
  })

  test('unknown keys are rejected by their full path', () => {
    const problems = fileProblems(`plans:
  pro: { monthly_allowance: "20", fusion: true, allowance: "5" }
providers: []
auth: { cache_ttl_ms: 100, cache_ttl: 5 }
bootstrap: { org: x }
`)
    expect(problems).toContain('plans.pro.allowance: Unexpected property')
    expect(problems).toContain('providers: Unexpected property')
    expect(problems).toContain('auth.cache_ttl: Unexpected property')
    expect(problems).toContain('bootstrap.org: Unexpected property')
  })

  test('plan ids outside the id pattern are rejected, whatever their value', () => {
    for (const id of ['Pro', 'pro!', '-pro', '"with space"', '""', 'a'.repeat(65)]) {
      const problems = fileProblems(`plans:\n  ok: { monthly_allowance: "1", fusion: true }\n  ${id}: { monthly_allowance: "1", fusion: true }\n`)
      const name = id.startsWith('"') ? JSON.parse(id) : id
      expect(problems).toEqual([`plans.${name}: Unexpected property`])
    }
    expect(fileProblems('plans:\n  Pro: garbage\n')).toEqual(['plans.Pro: Unexpected property'])
  })

  test('money written as a YAML number is rejected with a hint', () => {
    for (const value of ['20', '0.40', '1e3', '0x10', '.inf', '-5']) {
      const problems = fileProblems(`plans:\n  pro: { monthly_allowance: ${value}, fusion: true }\n`)
      expect(problems).toEqual(['plans.pro.monthly_allowance: Expected string (write money as a quoted decimal string)'])
    }
  })

  test('money strings must be non-negative decimals with at most 9 places', () => {
    for (const value of ['"-5"', '"1.0000000001"', '"1e3"', '"$20"', '"20 "', '"20.00 USD"', '""', '"0.4.0"']) {
      const problems = fileProblems(`plans:\n  pro: { monthly_allowance: ${value}, fusion: true }\n`)
      expect(problems).toHaveLength(1)
      expect(problems[0]).toStartWith('plans.pro.monthly_allowance: Expected string to match')
      expect(problems[0]).not.toContain('quoted decimal string')
    }
  })

  test('ledger money follows the same rules', () => {
    expect(fileProblems(`${MINIMAL}ledger: { bootstrap_credit: 5 }\n`)).toEqual([
      'ledger.bootstrap_credit: Expected string (write money as a quoted decimal string)',
    ])
    expect(fileProblems(`${MINIMAL}ledger: { bootstrap_credit: "9223372037" }\n`)).toEqual(['ledger.bootstrap_credit: amount too large'])
    expect(fromFile(`${MINIMAL}ledger: { bootstrap_credit: "0.5" }\n`).config.ledger.bootstrapCreditNanos).toBe(500_000_000n)
  })

  test('money past int64 nanos is rejected by name', () => {
    expect(fileProblems('plans:\n  pro: { monthly_allowance: "9223372036.854775808", fusion: true }\n')).toEqual(['plans.pro.monthly_allowance: amount too large'])
    // The largest representable amount is fine.
    const { config } = fromFile('plans:\n  pro: { monthly_allowance: "9223372036.854775807", fusion: true }\n')
    expect(config.plans.get('pro')!.monthlyAllowanceNanos).toBe(9223372036854775807n)
  })

  test('wrong types and out-of-range numbers name the field', () => {
    const problems = fileProblems(`plans:
  pro: { monthly_allowance: "1", fusion: "yes" }
auth: { cache_ttl_ms: 5000, cache_max_entries: 0 }
bootstrap: { org_name: "", owner_email: 42 }
`)
    const fields = new Set(problems.map(problem => problem.split(': ')[0]))
    expect(fields).toEqual(new Set(['plans.pro.fusion', 'auth.cache_ttl_ms', 'auth.cache_max_entries', 'bootstrap.org_name', 'bootstrap.owner_email']))
  })

  test('missing required fields and an empty plan set are named', () => {
    expect(fileProblems('plans:\n  pro: { fusion: true }\n')).toContain('plans.pro.monthly_allowance: Expected required property')
    expect(fileProblems('plans: {}\n').some(problem => problem.startsWith('plans: '))).toBe(true)
    expect(fileProblems('auth: { cache_ttl_ms: 1 }\n').some(problem => problem.startsWith('plans: ') || problem.startsWith('(root): '))).toBe(true)
  })

  test('a fractional cache TTL is not an integer', () => {
    const problems = fileProblems(`${MINIMAL}auth: { cache_ttl_ms: 1.5 }\n`)
    expect(problems.map(problem => problem.split(': ')[0])).toEqual(['auth.cache_ttl_ms'])
  })
})
