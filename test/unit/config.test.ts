import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Value } from '@sinclair/typebox/value'
import { ENV_PROVIDERS, withEnvProviders } from '../../src/config/env-providers'
import { ConfigError, loadConfig } from '../../src/config/load'
import { FileConfigSchema } from '../../src/config/schema'

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

  test('a key given twice stops the boot, naming it and where, in YAML and in JSON', () => {
    // Before, the last one won silently: a second price of "0" made a model free.
    const twoPrices = `${MINIMAL}providers:\n  - { id: demo, type: demo, retention: none }\nmodels:\n  - { id: m, backends: [{ provider: demo, model: d }], price: { input_per_mtok: "5", output_per_mtok: "25" }, price: { input_per_mtok: "0", output_per_mtok: "0" }, context_length: 1000, max_output_tokens: 100 }\n`
    expect(fileProblems(twoPrices)).toEqual(['/etc/svc/config.yaml: line 6, column 111: the key price appears twice in one mapping (each key may be given once)'])
    const twoPlans = 'plans:\n  pro: { monthly_allowance: "20", fusion: true }\n  pro: { monthly_allowance: "0", fusion: false }\n'
    expect(fileProblems(twoPlans)).toEqual(['/etc/svc/config.yaml: line 3, column 3: the key pro appears twice in one mapping (each key may be given once)'])
    const json = '{ "plans": { "basic": { "monthly_allowance": "0", "fusion": false } }, "plans": {} }'
    expect(fileProblems(json)).toEqual(['/etc/svc/config.yaml: line 1, column 72: the key plans appears twice in one mapping (each key may be given once)'])
  })

  test('a scalar and a list are not configurations', () => {
    for (const text of ['"just a string"', '- plans\n', '42']) {
      const problems = fileProblems(text)
      expect(problems.some(problem => problem.startsWith('(root): '))).toBe(true)
    }
  })

  test('an empty file (or one of comments only) is named as such, with SVC_CONFIG and its path', () => {
    // Before: "(root): Expected object", naming neither the variable nor the file (an empty
    // mounted ConfigMap key, say).
    for (const text of ['', '  \n', '# plans:\n#   payg: {}\n', 'null', '~']) {
      expect(fileProblems(text)).toEqual(['SVC_CONFIG: "/etc/svc/config.yaml" holds no configuration (empty, or comments only); it needs at least a plans: section'])
    }
  })

  test('unknown keys are rejected by their full path', () => {
    const problems = fileProblems(`plans:
  pro: { monthly_allowance: "20", fusion: true, allowance: "5" }
provider: []
auth: { cache_ttl_ms: 100, cache_ttl: 5 }
bootstrap: { org: x }
`)
    expect(problems).toContain('plans.pro.allowance: Unexpected property')
    expect(problems).toContain('provider: Unexpected property')
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
      // Before: the regular expression, "Expected string to match '^(0|[1-9][0-9]*)…'".
      expect(problems[0]).toBe('plans.pro.monthly_allowance: must be a decimal USD amount with at most 9 decimals, e.g. "20" or "0.40"')
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

describe('providers and models: embedded default', () => {
  test('the demo provider, with no upstream and no key', () => {
    const config = loadConfig({}, noFile)
    expect(config.providers).toEqual([
      { id: 'demo', type: 'demo', baseUrl: undefined, apiKey: undefined, retention: 'none', connectTimeoutMs: 10_000, idleTimeoutMs: 60_000, responseTimeoutMs: 600_000 },
    ])
  })

  test('demo-anonymous, demo-private and demo-alt, with tools and reasoning, small prices; demo-private judges Fusion', () => {
    const config = loadConfig({}, noFile)
    expect(config.models.map(model => [model.id, model.level])).toEqual([
      ['demo-anonymous', 'anonymous'],
      ['demo-private', 'private'],
      ['demo-alt', 'anonymous'],
    ])
    expect(config.fusion).toEqual({ judge: 'demo-private', participantTimeoutMs: 120_000, judgeTimeoutMs: 120_000 })
    for (const model of config.models) {
      expect(model.backends).toEqual([{ provider: 'demo', model: 'demo', weight: 1, uncensored: false }])
      expect(model.routing).toBe('ordered')
      expect(model.price).toEqual({ inputPerMillion: 100_000_000n, outputPerMillion: 400_000_000n })
      expect(model.contextLength).toBe(32768)
      expect(model.maxOutputTokens).toBe(4096)
      expect(model.capabilities).toEqual({ tools: true, reasoning: true, vision: false, fileInput: false, supportsWebFetch: false, supportsWebSearch: false })
    }
  })

  test('providers and models are frozen all the way down', () => {
    const config = loadConfig({}, noFile)
    for (const value of [config.providers, config.providers[0], config.models, config.models[0], config.models[0]!.backends, config.models[0]!.backends[0], config.models[0]!.price, config.models[0]!.capabilities]) {
      expect(Object.isFrozen(value)).toBe(true)
    }
  })
})

describe('providers from the environment (no SVC_CONFIG)', () => {
  const ids = (env: Env) => {
    const config = loadConfig(env, noFile)
    return { providers: config.providers.map(provider => provider.id), models: config.models.map(model => model.id) }
  }

  test('OPENAI_API_KEY adds openai with its key and a short model list', () => {
    const config = loadConfig({ OPENAI_API_KEY: 'sk-test' }, noFile)
    expect(config.providers[1]).toEqual({
      id: 'openai',
      type: 'openai-compatible',
      baseUrl: 'https://api.openai.com/v1',
      apiKey: 'sk-test',
      retention: 'unknown',
      connectTimeoutMs: 10_000,
      idleTimeoutMs: 60_000,
      responseTimeoutMs: 600_000,
      chatCompletions: { maxTokensField: 'max_completion_tokens', reasoningHistory: 'drop' },
    })
    const mini = config.models.find(model => model.id === 'gpt-4o-mini')!
    expect(mini.level).toBe('anonymous')
    expect(mini.backends).toEqual([{ provider: 'openai', model: 'gpt-4o-mini', weight: 1, uncensored: false }])
    expect(mini.price).toEqual({ inputPerMillion: 150_000_000n, outputPerMillion: 600_000_000n, cachedInputPerMillion: 75_000_000n })
    expect(config.models.every(model => model.id.startsWith('demo-') || model.backends[0]!.provider === 'openai')).toBe(true)
  })

  test('ANTHROPIC_API_KEY adds anthropic', () => {
    const config = loadConfig({ ANTHROPIC_API_KEY: 'sk-ant' }, noFile)
    expect(config.providers.map(provider => [provider.id, provider.type, provider.baseUrl, provider.apiKey, provider.retention])).toEqual([
      ['demo', 'demo', undefined, undefined, 'none'],
      ['anthropic', 'anthropic', 'https://api.anthropic.com/v1', 'sk-ant', 'unknown'],
    ])
    const sonnet = config.models.find(model => model.id === 'claude-sonnet-4-5')!
    expect(sonnet.level).toBe('anonymous')
    expect(sonnet.capabilities.reasoning).toBe(true)
    expect(sonnet.backends[0]!.provider).toBe('anthropic')
  })

  test.each([
    ['http://localhost:11434', 'http://localhost:11434/v1'],
    ['http://localhost:11434/', 'http://localhost:11434/v1'],
    ['http://gpu-box:11434/v1', 'http://gpu-box:11434/v1'],
    ['https://ollama.internal/base', 'https://ollama.internal/base/v1'],
  ])('OLLAMA_BASE_URL %p adds ollama at %p, private, without a key', (raw, base) => {
    const config = loadConfig({ OLLAMA_BASE_URL: raw }, noFile)
    expect(config.providers[1]).toMatchObject({ id: 'ollama', type: 'openai-compatible', baseUrl: base, apiKey: undefined, retention: 'none' })
    const llama = config.models.find(model => model.id === 'llama3.2')!
    expect(llama.level).toBe('private')
    expect(llama.backends).toEqual([{ provider: 'ollama', model: 'llama3.2', weight: 1, uncensored: false }])
    expect(llama.price).toEqual({ inputPerMillion: 0n, outputPerMillion: 0n })
  })

  test.each(['localhost:11434', 'ftp://host', 'http://user:pass@host:11434', 'http://host:11434/?x=1', 'not a url'])('OLLAMA_BASE_URL %p is refused by name', raw => {
    const problems = problemsOf(() => loadConfig({ OLLAMA_BASE_URL: raw }, noFile))
    expect(problems).toHaveLength(1)
    expect(problems[0]).toStartWith('OLLAMA_BASE_URL: ')
    // A URL's credentials, query and fragment are cut from the echo (config-secrets.test.ts).
    expect(problems[0]).toContain(raw.replace('user:pass@', '[redacted]@').replace('?x=1', '?[redacted]'))
  })

  test('all three together, in table order; empty values add nothing', () => {
    expect(ids({ OPENAI_API_KEY: 'a', ANTHROPIC_API_KEY: 'b', OLLAMA_BASE_URL: 'http://127.0.0.1:11434' }).providers).toEqual(['demo', 'openai', 'anthropic', 'ollama'])
    expect(ids({ OPENAI_API_KEY: '', ANTHROPIC_API_KEY: '', OLLAMA_BASE_URL: '' })).toEqual({ providers: ['demo'], models: ['demo-anonymous', 'demo-private', 'demo-alt'] })
  })

  test('the table rows pass the config file schema, as if an operator had written them', () => {
    const problems: string[] = []
    const file = withEnvProviders({ plans: { p: { monthly_allowance: '0', fusion: false } } }, name => (name === 'OLLAMA_BASE_URL' ? 'http://h:1' : 'x'), problems)
    expect(problems).toEqual([])
    expect(file.providers).toHaveLength(ENV_PROVIDERS.length)
    expect([...Value.Errors(FileConfigSchema, file)].map(error => `${error.path}: ${error.message}`)).toEqual([])
  })

  test('a config file is not extended from the environment', () => {
    const { config } = fromFile(MINIMAL, { OPENAI_API_KEY: 'sk', ANTHROPIC_API_KEY: 'sk', OLLAMA_BASE_URL: 'http://x:1' })
    expect(config.providers).toEqual([])
    expect(config.models).toEqual([])
  })
})

describe('providers and models in a config file', () => {
  const EXAMPLE = `${MINIMAL}providers:
  - { id: vllm-a, type: openai-compatible, base_url: "http://vllm-a:8000/v1/", api_key_env: VLLM_A_KEY,
      retention: none, connect_timeout_ms: 2500, idle_timeout_ms: 90000, response_timeout_ms: 1200000 }
  - { id: claude, type: anthropic, api_key_env: ANTHROPIC_API_KEY }
  - { id: local, type: openai-compatible, base_url: "http://127.0.0.1:8080" }
models:
  - id: llama-3.3-70b
    level: private
    backends:
      - { provider: vllm-a, model: meta-llama/Llama-3.3-70B-Instruct, weight: 3 }
      - { provider: local, model: "llama3.3:70b", uncensored: true }
    routing: round-robin
    price: { input_per_mtok: "0.40", output_per_mtok: "0.80", cached_input_per_mtok: "0.1", reasoning_per_mtok: "1.000000001" }
    context_length: 131072
    max_output_tokens: 8192
    capabilities: { tools: true, reasoning: false, vision: false, file_input: true, supports_web_fetch: true, supports_web_search: true }
  - id: claude-sonnet
    backends: [{ provider: claude, model: claude-sonnet-4-5 }]
    price: { input_per_mtok: "3", output_per_mtok: "15" }
    context_length: 200000
    max_output_tokens: 64000
`
  // vllm-a is private-capable, local is not: make local retention none for the example to load.
  const LOADABLE = EXAMPLE.replace('base_url: "http://127.0.0.1:8080" }', 'base_url: "http://127.0.0.1:8080", retention: none }')
  const KEYS = { VLLM_A_KEY: 'vllm-secret', ANTHROPIC_API_KEY: 'ant-secret' }

  test('providers: keys read from the named variables, defaults filled, trailing slash dropped', () => {
    const { config } = fromFile(LOADABLE, KEYS)
    expect(config.providers).toEqual([
      { id: 'vllm-a', type: 'openai-compatible', baseUrl: 'http://vllm-a:8000/v1', apiKey: 'vllm-secret', retention: 'none', connectTimeoutMs: 2500, idleTimeoutMs: 90_000, responseTimeoutMs: 1_200_000, chatCompletions: { maxTokensField: 'max_tokens', reasoningHistory: 'drop' } },
      { id: 'claude', type: 'anthropic', baseUrl: 'https://api.anthropic.com/v1', apiKey: 'ant-secret', retention: 'unknown', connectTimeoutMs: 10_000, idleTimeoutMs: 60_000, responseTimeoutMs: 600_000 },
      { id: 'local', type: 'openai-compatible', baseUrl: 'http://127.0.0.1:8080', apiKey: undefined, retention: 'none', connectTimeoutMs: 10_000, idleTimeoutMs: 60_000, responseTimeoutMs: 600_000, chatCompletions: { maxTokensField: 'max_tokens', reasoningHistory: 'drop' } },
    ])
  })

  test('models: every field mapped, money exact, defaults for the omitted ones', () => {
    const { config } = fromFile(LOADABLE, KEYS)
    expect(config.models).toEqual([
      {
        id: 'llama-3.3-70b',
        level: 'private',
        backends: [
          { provider: 'vllm-a', model: 'meta-llama/Llama-3.3-70B-Instruct', weight: 3, uncensored: false },
          { provider: 'local', model: 'llama3.3:70b', weight: 1, uncensored: true },
        ],
        routing: 'round-robin',
        price: { inputPerMillion: 400_000_000n, outputPerMillion: 800_000_000n, cachedInputPerMillion: 100_000_000n, reasoningPerMillion: 1_000_000_001n },
        contextLength: 131072,
        maxOutputTokens: 8192,
        capabilities: { tools: true, reasoning: false, vision: false, fileInput: true, supportsWebFetch: true, supportsWebSearch: true },
      },
      {
        id: 'claude-sonnet',
        level: 'anonymous',
        backends: [{ provider: 'claude', model: 'claude-sonnet-4-5', weight: 1, uncensored: false }],
        routing: 'ordered',
        price: { inputPerMillion: 3_000_000_000n, outputPerMillion: 15_000_000_000n },
        contextLength: 200_000,
        maxOutputTokens: 64_000,
        capabilities: { tools: false, reasoning: false, vision: false, fileInput: false, supportsWebFetch: false, supportsWebSearch: false },
      },
    ])
    // Absent optional prices stay absent (pricing falls back to the input/output price).
    expect('cachedInputPerMillion' in config.models[1]!.price).toBe(false)
  })

  test('a private model whose backend provider keeps data is refused, naming the model and provider', () => {
    const problems = fileProblems(EXAMPLE, KEYS)
    expect(problems).toEqual(['models.0.level: model "llama-3.3-70b" is private but its backend 1 uses provider "local", which does not declare retention: none'])
    // The same model at the anonymous level is fine.
    expect(fromFile(EXAMPLE.replace('level: private', 'level: anonymous'), KEYS).config.models[0]!.level).toBe('anonymous')
  })

  test('a missing key variable is named, with the provider; an empty one counts as missing', () => {
    expect(fileProblems(LOADABLE, { ANTHROPIC_API_KEY: 'x' })).toEqual(['providers.0.api_key_env: provider "vllm-a": environment variable VLLM_A_KEY is not set'])
    expect(fileProblems(LOADABLE, { VLLM_A_KEY: '', ANTHROPIC_API_KEY: '' })).toEqual([
      'providers.0.api_key_env: provider "vllm-a": environment variable VLLM_A_KEY is not set',
      'providers.1.api_key_env: provider "claude": environment variable ANTHROPIC_API_KEY is not set',
    ])
  })

  test('the demo provider needs no key, even when it names a variable', () => {
    const { config } = fromFile(`${MINIMAL}providers:\n  - { id: demo, type: demo, api_key_env: NOT_SET_ANYWHERE }\n`)
    expect(config.providers[0]).toMatchObject({ id: 'demo', apiKey: undefined, retention: 'unknown' })
  })

  const providerProblems = (entry: string, env: Env = {}) => fileProblems(`${MINIMAL}providers:\n  - ${entry}\n`, env)

  test.each([
    ['{ id: a, type: openai-compatible }', 'providers.0.base_url: provider "a": type openai-compatible needs base_url'],
    ['{ id: a, type: demo, base_url: "http://x" }', 'providers.0.base_url: provider "a": the demo provider has no upstream, remove base_url'],
    ['{ id: a, type: anthropic }', 'providers.0.api_key_env: provider "a": type anthropic needs api_key_env (the Anthropic API always takes a key)'],
    ['{ id: a, type: openai-compatible, base_url: "ftp://x" }', 'providers.0.base_url: provider "a": must be an absolute http:// or https:// URL, got "ftp://x"'],
    ['{ id: a, type: openai-compatible, base_url: "vllm:8000" }', 'providers.0.base_url: provider "a": must be an absolute http:// or https:// URL, got "vllm:8000"'],
    ['{ id: a, type: openai-compatible, base_url: "https://u:p@x/v1" }', 'providers.0.base_url: provider "a": must not carry credentials (use api_key_env), got "https://[redacted]@x/v1"'],
    ['{ id: a, type: openai-compatible, base_url: "https://x/v1?key=1" }', 'providers.0.base_url: provider "a": must not have a query or fragment, got "https://x/v1?[redacted]"'],
    ['{ id: a, type: openai-compatible, base_url: "https://x/v1#f" }', 'providers.0.base_url: provider "a": must not have a query or fragment, got "https://x/v1#[redacted]"'],
    ['{ id: a, type: demo, proof_format: x }', 'providers.0.proof_format: provider "a": proof_format applies only to type attested'],
    ['{ id: a, type: demo, retention: never }', 'providers.0.retention: must be one of none, unknown'],
    ['{ id: a, type: ollama }', 'providers.0.type: must be one of openai-compatible, anthropic, demo, attested'],
    ['{ id: A, type: demo }', 'providers.0.id: must be 1 to 64 lower-case letters, digits, dots, underscores or dashes, starting with a letter or digit'],
    ['{ id: a, type: demo, api_key: sk-inline }', 'providers.0.api_key: Unexpected property'],
    ['{ id: a, type: demo, api_key_env: "has space" }', 'providers.0.api_key_env: must be an environment variable name: 1 to 128 letters, digits or underscores, not starting with a digit'],
    ['{ id: a, type: demo, connect_timeout_ms: 50 }', 'providers.0.connect_timeout_ms: Expected integer to be greater or equal to 100'],
    ['{ id: a, type: demo, idle_timeout_ms: 1.5 }', 'providers.0.idle_timeout_ms: Expected integer'],
    ['{ id: a, type: demo, response_timeout_ms: 999 }', 'providers.0.response_timeout_ms: Expected integer to be greater or equal to 1000'],
    ['{ id: a, type: demo, response_timeout_ms: 3600001 }', 'providers.0.response_timeout_ms: Expected integer to be less or equal to 3600000'],
    ['{ id: a, type: demo, response_timeout_ms: "600000" }', 'providers.0.response_timeout_ms: Expected integer'],
  ])('%s is refused', (entry, problem) => {
    expect(providerProblems(entry)).toEqual([problem])
  })

  test('an attested provider loads with its proof_format and signing algorithms', () => {
    const { config } = fromFile(`${MINIMAL}providers:\n  - { id: tee-1, type: attested, base_url: "https://tee-1.example.com/v1", api_key_env: TEE1_KEY, proof_format: dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2, signing_algos: [ecdsa] }\n`, { TEE1_KEY: 'k' })
    expect(config.providers[0]).toMatchObject({ id: 'tee-1', type: 'attested', attested: { proofFormat: { name: 'dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2', binding: 'addr', e2ee: { family: 'nearai', version: 2 } }, signingAlgos: ['ecdsa'] } })
  })

  test.each([
    ['{ id: t, type: attested, base_url: "https://t/v1" }', 'providers.0.proof_format: provider "t": type attested needs proof_format'],
    ['{ id: t, type: attested, base_url: "https://t/v1", proof_format: tdx.v9 }', 'providers.0.proof_format: provider "t": unknown proof_format "tdx.v9"'],
    ['{ id: t, type: attested, proof_format: dstack-tdx-nvgpu.addr-nonce.v1 }', 'providers.0.base_url: provider "t": type attested needs base_url'],
    ['{ id: a, type: demo, signing_algos: [ecdsa] }', 'providers.0.signing_algos: provider "a": signing_algos applies only to type attested'],
    ['{ id: a, type: demo, max_tokens_field: max_tokens }', 'providers.0.max_tokens_field: provider "a": max_tokens_field applies only to type openai-compatible'],
    ['{ id: a, type: demo, reasoning_history: reasoning_content }', 'providers.0.reasoning_history: provider "a": reasoning_history applies only to type openai-compatible'],
    ['{ id: a, type: openai-compatible, base_url: "http://x", reasoning_history: keep }', 'providers.0.reasoning_history: must be one of drop, reasoning_content'],
  ])('%s is refused', (entry, problem) => {
    const problems = providerProblems(entry)
    expect(problems).toHaveLength(1)
    expect(problems[0]).toStartWith(problem)
  })

  test('openai-compatible wire choices: max_completion_tokens by default on api.openai.com only; both can be set', () => {
    const load = (entry: string) => fromFile(`${MINIMAL}providers:\n  - ${entry}\n`, { K: 'k' }).config.providers[0]!.chatCompletions
    expect(load('{ id: a, type: openai-compatible, base_url: "https://api.openai.com/v1", api_key_env: K }')).toEqual({ maxTokensField: 'max_completion_tokens', reasoningHistory: 'drop' })
    expect(load('{ id: a, type: openai-compatible, base_url: "http://vllm:8000/v1" }')).toEqual({ maxTokensField: 'max_tokens', reasoningHistory: 'drop' })
    expect(load('{ id: a, type: openai-compatible, base_url: "https://api.deepseek.com/v1", max_tokens_field: max_completion_tokens, reasoning_history: reasoning_content }')).toEqual({
      maxTokensField: 'max_completion_tokens',
      reasoningHistory: 'reasoning_content',
    })
    expect(load('{ id: a, type: demo }')).toBeUndefined()
  })

  test('duplicate provider ids are refused', () => {
    const problems = fileProblems(`${MINIMAL}providers:\n  - { id: a, type: demo }\n  - { id: b, type: demo }\n  - { id: a, type: demo }\n`)
    expect(problems).toEqual(['providers.2.id: duplicate provider id "a"'])
  })

  const PROVIDERS = `providers:\n  - { id: demo, type: demo, retention: none }\n  - { id: open, type: openai-compatible, base_url: "http://x" }\n  - { id: tee, type: attested, base_url: "http://t/v1", proof_format: dstack-tdx-nvgpu.addr-nonce.e2ee-phala.v1 }\n  - { id: plain-tee, type: attested, base_url: "http://p/v1", proof_format: dstack-tdx-nvgpu.addr-nonce.v1 }\n`
  // A model entry: these defaults, each unless `fields` gives its own (a key may appear once).
  const MODEL_DEFAULTS = { id: 'm', backends: '[{ provider: demo, model: d }]', price: '{ input_per_mtok: "1", output_per_mtok: "2" }', context_length: '1000', max_output_tokens: '100' }
  const model = (fields: string) => {
    const defaults = Object.entries(MODEL_DEFAULTS).filter(([key]) => !fields.includes(`, ${key}:`))
    return `- { ${defaults.map(([key, value]) => `${key}: ${value}`).join(', ')}${fields} }`
  }
  const modelProblems = (...entries: string[]) => fileProblems(`${MINIMAL}${PROVIDERS}models:\n${entries.map(entry => `  ${entry}\n`).join('')}`)
  const loadModels = (...entries: string[]) => fromFile(`${MINIMAL}${PROVIDERS}models:\n${entries.map(entry => `  ${entry}\n`).join('')}`).config.models

  test('a minimal model loads with its defaults', () => {
    expect(loadModels(model(''))[0]).toMatchObject({ id: 'm', level: 'anonymous', routing: 'ordered', backends: [{ provider: 'demo', model: 'd', weight: 1, uncensored: false }] })
  })

  test.each([
    [', level: private', []],
    [', level: private, backends: [{ provider: demo, model: d }, { provider: open, model: o }]', ['models.0.level: model "m" is private but its backend 1 uses provider "open", which does not declare retention: none']],
    [', backends: [{ provider: nope, model: d }]', ['models.0.backends.0.provider: model "m" names unknown provider "nope" (known: demo, open, tee, plain-tee)']],
    [', backends: [{ provider: demo, model: d }, { provider: demo, model: d }]', ['models.0.backends.1: model "m" binds provider "demo" model "d" twice (use weight instead)']],
    [', confidential: [{ provider: tee, model: d }, { provider: tee, model: d }]', ['models.0.confidential.1: model "m" binds provider "tee" model "d" twice (use weight instead)']],
    [', encrypted: [{ provider: tee, model: d }, { provider: tee, model: e }, { provider: tee, model: d }]', ['models.0.encrypted.2: model "m" binds provider "tee" model "d" twice (use weight instead)']],
    [', max_output_tokens: 1001', ['models.0.max_output_tokens: model "m": 1001 exceeds context_length 1000']],
    [', confidential: [{ provider: demo, model: d }]', ['models.0.confidential.0.provider: model "m": the confidential level needs an attested provider, "demo" is demo']],
    [', encrypted: [{ provider: open, model: d }]', ['models.0.encrypted.0.provider: model "m": the encrypted level needs an attested provider, "open" is openai-compatible']],
    [', confidential: [{ provider: tee, model: d }], encrypted: [{ provider: tee, model: d }]', []],
    [', encrypted: [{ provider: plain-tee, model: d }]', ['models.0.encrypted.0.provider: model "m": the encrypted level needs a proof_format with an E2EE protocol, "plain-tee" has dstack-tdx-nvgpu.addr-nonce.v1']],
    [', backends: [{ provider: tee, model: d }]', ['models.0.backends.0.provider: model "m": attested provider "tee" serves only the :confidential and :encrypted levels']],
    [', level: confidential', ['models.0.level: must be one of anonymous, private']],
    [', routing: random', ['models.0.routing: must be one of ordered, round-robin']],
    [', id: "m:confidential"', ['models.0.id: must be 1 to 128 letters, digits, dots, underscores, slashes or dashes, starting with a letter or digit (a level suffix such as :confidential is not part of the id)']],
    [', backends: []', ['models.0.backends: Expected array length to be greater or equal to 1']],
    [', backends: [{ provider: demo, model: d, weight: 0 }]', ['models.0.backends.0.weight: Expected integer to be greater or equal to 1']],
    [', backends: [{ provider: demo, model: "has space" }]', ['models.0.backends.0.model: must be 1 to 256 characters without spaces']],
    [', backends: [{ provider: demo, model: 42 }]', ['models.0.backends.0.model: Expected string']],
    [', backends: [{ provider: demo, model: d, region: eu }]', ['models.0.backends.0.region: Unexpected property']],
    [', backends: [{ provider: demo, model: d, thinking: auto }]', ['models.0.backends.0.thinking: must be one of budget, adaptive']],
    [', backends: [{ provider: open, model: o, thinking: adaptive }]', ['models.0.backends.0.thinking: model "m": thinking applies to anthropic providers only, "open" is openai-compatible']],
    [', confidential: [{ provider: tee, model: d, thinking: budget }]', ['models.0.confidential.0.thinking: model "m": thinking applies to anthropic providers only, "tee" is attested']],
    [', price: { input_per_mtok: 1, output_per_mtok: "2" }', ['models.0.price.input_per_mtok: Expected string (write money as a quoted decimal string)']],
    [', price: { input_per_mtok: "1", output_per_mtok: "9223372037" }', ['models.0.price.output_per_mtok: amount too large']],
    [', price: { input_per_mtok: "1", output_per_mtok: "2", cache_write_per_mtok: "3" }', ['models.0.price.cache_write_per_mtok: Unexpected property']],
    [', capabilities: { tools: true, streaming: true }', ['models.0.capabilities.streaming: Unexpected property']],
    [', capabilities: { tools: "yes" }', ['models.0.capabilities.tools: Expected boolean']],
    [', context_length: 0', ['models.0.context_length: Expected integer to be greater or equal to 1']],
    [', pricing: {}', ['models.0.pricing: Unexpected property']],
  ])('model%s → %p', (fields, expected) => {
    if (expected.length === 0) expect(loadModels(model(fields))).toHaveLength(1)
    else expect(modelProblems(model(fields))).toEqual(expected)
  })

  test('an anthropic backend states its thinking form; unset, none (the client\'s form is sent)', () => {
    const providers = `providers:\n  - { id: claude, type: anthropic, api_key_env: ANTHROPIC_API_KEY }\n`
    const backends = '[{ provider: claude, model: claude-opus-4-7, thinking: adaptive }, { provider: claude, model: claude-sonnet-4-5 }]'
    const entry = `- { id: m, backends: ${backends}, price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 1000, max_output_tokens: 100 }`
    const { config } = fromFile(`${MINIMAL}${providers}models:\n  ${entry}\n`, { ANTHROPIC_API_KEY: 'ant-secret' })
    expect(config.models[0]!.backends.map(backend => [backend.model, backend.thinking])).toEqual([['claude-opus-4-7', 'adaptive'], ['claude-sonnet-4-5', undefined]])
  })

  test('a required model field missing is named', () => {
    expect(modelProblems('- { id: m, backends: [{ provider: demo, model: d }], context_length: 1, max_output_tokens: 1 }')).toContain(
      'models.0.price: Expected required property',
    )
  })

  test('duplicate model ids are refused', () => {
    expect(modelProblems(model(''), model(', level: private'))).toEqual(['models.1.id: duplicate model id "m"'])
  })

  test('every provider and model problem is reported at once', () => {
    const problems = fileProblems(
      `${MINIMAL}providers:\n  - { id: a, type: openai-compatible, api_key_env: MISSING_KEY }\n  - { id: a, type: demo }\nmodels:\n  ${model(', backends: [{ provider: zz, model: d }]')}\n  ${model(', max_output_tokens: 5000')}\n`,
    )
    expect(problems).toEqual([
      'providers.0.base_url: provider "a": type openai-compatible needs base_url',
      'providers.0.api_key_env: provider "a": environment variable MISSING_KEY is not set',
      'providers.1.id: duplicate provider id "a"',
      'models.0.backends.0.provider: model "m" names unknown provider "zz" (known: a)',
      'models.1.id: duplicate model id "m"',
      'models.1.backends.0.provider: model "m" names unknown provider "demo" (known: a)',
      'models.1.max_output_tokens: model "m": 5000 exceeds context_length 1000',
    ])
  })
})

test('a quoted number is not an integer setting', () => {
  expect(fileProblems(`${MINIMAL}auth: { cache_ttl_ms: "100" }\n`)).toEqual(['auth.cache_ttl_ms: Expected integer'])
  expect(fileProblems(`${MINIMAL}limits: { inference: { key: { burst: "5", per_second: 1 }, org: { burst: 5, per_second: 1 } } }\n`)).toEqual([
    'limits.inference.key.burst: Expected integer',
  ])
})

test('a refill rate below the buckets\' 1e-6 token/s step is refused, not silently run faster', () => {
  const limits = (perSecond: string) => `${MINIMAL}limits: { inference: { key: { burst: 5, per_second: ${perSecond} }, org: { burst: 5, per_second: 1 } } }\n`
  expect(fileProblems(limits('0.0000001'))).toEqual(['limits.inference.key.per_second: Expected number to be greater or equal to 0.000001'])
  expect(fileProblems(limits('0'))).toHaveLength(1)
  expect(fromFile(limits('0.000001')).config.limits.inference.key.perSecond).toBe(0.000001)
  // Between two steps it would be rounded to one: refused too.
  expect(fileProblems(limits('0.0000015'))).toEqual(['limits.inference.key.per_second: must be a multiple of 0.000001, got 0.0000015'])
  expect(fileProblems(limits('0.3333333'))).toEqual(['limits.inference.key.per_second: must be a multiple of 0.000001, got 0.3333333'])
  for (const rate of ['0.1', '0.3', '2.000001', '1000000', '540558.903276', '67277.351871', '999999.999999']) expect(fromFile(limits(rate)).config.limits.inference.key.perSecond).toBe(Number(rate))
})

describe('fusion', () => {
  const withModel = `${MINIMAL}providers:\n  - { id: d, type: demo }\nmodels:\n  - { id: m, backends: [{ provider: d, model: x }], price: { input_per_mtok: "0", output_per_mtok: "0" }, context_length: 1000, max_output_tokens: 100 }\n`
  const load = (text: string) => loadConfig({ SVC_CONFIG: 'fusion.yaml' }, () => text)

  test('judge and deadlines are read; without the section there is no default judge and 120 s deadlines', () => {
    expect(load(`${withModel}fusion: { judge: m, participant_timeout_ms: 5000, judge_timeout_ms: 9000 }\n`).fusion).toEqual({
      judge: 'm', participantTimeoutMs: 5000, judgeTimeoutMs: 9000,
    })
    expect(load(withModel).fusion).toEqual({ judge: undefined, participantTimeoutMs: 120_000, judgeTimeoutMs: 120_000 })
  })

  test('a judge that is not a configured model, or a deadline out of range, stops the boot by name', () => {
    expect(fileProblems(`${withModel}fusion: { judge: nope }\n`)).toEqual(['fusion.judge: "nope" is not a configured model (known: m)'])
    // A suffix the model does not offer, or an Encrypted judge, would refuse every Fusion request
    // that names no judge, with a 400 blaming the client: the boot names it instead.
    expect(fileProblems(`${withModel}fusion: { judge: "m:confidential" }\n`)).toEqual(['fusion.judge: model m is not offered at level confidential'])
    expect(fileProblems(`${withModel}fusion: { judge: "m:bogus" }\n`)).toEqual([expect.stringMatching(/^fusion\.judge: "m:bogus": unknown level suffix ":bogus"/)])
    const tee = `${MINIMAL}providers:\n  - { id: d, type: demo }\n  - { id: tee, type: attested, base_url: "https://tee.example/v1", proof_format: dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2 }\nmodels:\n  - { id: m, backends: [{ provider: d, model: x }], confidential: [{ provider: tee, model: y }], encrypted: [{ provider: tee, model: y }], price: { input_per_mtok: "0", output_per_mtok: "0" }, context_length: 1000, max_output_tokens: 100 }\n`
    expect(load(`${tee}fusion: { judge: "m:confidential" }\n`).fusion.judge).toBe('m:confidential')
    expect(fileProblems(`${tee}fusion: { judge: "m:encrypted" }\n`)).toEqual(['fusion.judge: "m:encrypted" is Encrypted: the judge must read the answers it synthesises'])
    expect(fileProblems(`${withModel}fusion: { participant_timeout_ms: 10 }\n`)).toEqual([expect.stringContaining('fusion.participant_timeout_ms')])
    expect(fileProblems(`${withModel}fusion: { judges: m }\n`)).toEqual([expect.stringContaining('fusion')])
  })
})

describe('documents', () => {
  test('defaults: one worker per core, guards and the parse price', () => {
    const { documents } = loadConfig({}, noFile)
    expect(documents).toEqual({
      workers: navigator.hardwareConcurrency,
      queueSize: 64,
      timeoutMs: 10_000,
      maxTextBytes: 4 * 1024 * 1024,
      memoryBudgetBytes: 2048 * 1024 * 1024,
      zip: { maxEntries: 5000, maxInflatedBytes: 64 * 1024 * 1024, maxRatio: 200 },
      pdf: { maxPages: 2000, maxObjects: 500_000, maxNesting: 256 },
      pricePerParseNanos: 1_000_000n,
    })
    expect(Object.isFrozen(documents) && Object.isFrozen(documents.zip) && Object.isFrozen(documents.pdf)).toBe(true)
    // A file without the section gets the same defaults.
    expect(fromFile(MINIMAL).config.documents).toEqual(documents)
  })

  test('a file sets every key; workers 0 means CPU cores', () => {
    const { config } = fromFile(`${MINIMAL}documents:
  workers: 3
  queue_size: 0
  timeout_ms: 2500
  max_text_bytes: 65536
  memory_budget_mb: 512
  zip_max_entries: 100
  zip_max_inflated_bytes: 1048576
  zip_max_ratio: 50
  pdf_max_pages: 10
  pdf_max_objects: 1000
  pdf_max_nesting: 32
  price_per_parse: "0.000000001"
`)
    expect(config.documents).toEqual({
      workers: 3, queueSize: 0, timeoutMs: 2500, maxTextBytes: 65536, memoryBudgetBytes: 512 * 1024 * 1024,
      zip: { maxEntries: 100, maxInflatedBytes: 1048576, maxRatio: 50 }, pdf: { maxPages: 10, maxObjects: 1000, maxNesting: 32 }, pricePerParseNanos: 1n,
    })
    expect(fromFile(`${MINIMAL}documents: { workers: 0 }\n`).config.documents.workers).toBe(navigator.hardwareConcurrency)
  })

  test('bad values and unknown keys are named', () => {
    const problems = fileProblems(`${MINIMAL}documents: { timeout_ms: 5, price_per_parse: 0.001, workers: -1, zip_bombs: true }\n`)
    expect(problems.some(problem => problem.startsWith('documents.timeout_ms:'))).toBe(true)
    expect(problems.some(problem => problem.startsWith('documents.workers:'))).toBe(true)
    expect(problems).toContain('documents.price_per_parse: Expected string (write money as a quoted decimal string)')
    expect(problems).toContain('documents.zip_bombs: Unexpected property')
  })
})
