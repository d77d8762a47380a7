import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config/load'
import { fileProblems, fromFile, MINIMAL, noFile, problemsOf } from '../support/config'

// The config file named by SVC_CONFIG: read, validated strictly, every problem named by its path.

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
