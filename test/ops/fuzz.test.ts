import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { loadConfig } from '../../src/config/load'
import { buildTestApp, type TestApp, type TestOrg } from '../support/harness'

// Property-based fuzzing (issue 12 point 5) over every route the app serves, enumerated from
// the app itself like test/routes/no-500.test.ts: random JSON, mutations of a valid body, hostile
// strings and random headers (credentials, content types, request and org ids). Properties: the
// answer is never a 5xx and never a crash (app.handle always resolves), every answer carries a
// request id, and a refused request (any 4xx) changes nothing in the ledger: no entry, no
// balance, allowance or key-spend change, and no hold left in memory.
// Multipart routes (document parsing) join through VALID_BODIES when they exist.

const YAML = `
providers: [{ id: demo, type: demo, retention: none }]
models:
  - { id: demo-anonymous, level: anonymous, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "0.10", output_per_mtok: "0.40" }, context_length: 32768, max_output_tokens: 64, capabilities: { tools: true, reasoning: true } }
plans: { pro: { monthly_allowance: "1", fusion: true }, payg: { monthly_allowance: "0", fusion: false } }
limits:
  inference: { key: { burst: 1000000, per_second: 1000000 }, org: { burst: 1000000, per_second: 1000000 } }
  management: { key: { burst: 1000000, per_second: 1000000 }, org: { burst: 1000000, per_second: 1000000 } }
`

/** A valid body per route, the seed for mutations. */
const VALID_BODIES: Record<string, unknown> = {
  'POST /api/v1/api-keys': { name: 'fuzz', admin: false, expires_in: '7d', spend_cap_period: 'daily', spend_cap_nanos: '1000000000' },
  'POST /v1/chat/completions': { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8, stream: false, temperature: 0.5 },
}

const HOSTILE = [
  '', 'null', '[]', '{}', '{"model":', '\u0000', '{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{"x":1}}}',
  `${'['.repeat(5000)}${']'.repeat(5000)}`, '{"spend_cap_nanos":1e999}', '{"messages":[{"role":"user","content":"\\ud800"}]}', '"\u202e"',
]

/** A mutation of a valid body: a field replaced, deleted, retyped, or an unknown field added. */
function mutated(valid: unknown): fc.Arbitrary<unknown> {
  if (valid === null || typeof valid !== 'object') return fc.jsonValue()
  const keys = Object.keys(valid as object)
  return fc.oneof(
    fc.record({ key: fc.constantFrom(...keys), value: fc.jsonValue() }).map(({ key, value }) => ({ ...(valid as object), [key]: value })),
    fc.constantFrom(...keys).map(key => {
      const copy: Record<string, unknown> = { ...(valid as object) }
      delete copy[key]
      return copy
    }),
    fc.record({ key: fc.string({ maxLength: 12 }), value: fc.jsonValue() }).map(({ key, value }) => ({ ...(valid as object), [key]: value })),
    fc.record({ key: fc.constantFrom(...keys), value: fc.oneof(fc.string(), fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.jsonValue(), { maxLength: 3 })) })
      .map(({ key, value }) => ({ ...(valid as object), [key]: value })),
  )
}

describe('fuzzing every route', () => {
  let t: TestApp
  let org: TestOrg
  let memberKey: string

  beforeAll(async () => {
    const env = { SVC_CONFIG: '/virtual/fuzz.yaml' }
    t = await buildTestApp(env, loadConfig(env, () => YAML))
    org = await t.createOrg('fuzz', 50_000_000_000n)
    memberKey = (await t.createMember(org, 'member')).key
  })
  afterAll(() => t.close())

  /** Everything a refused request must leave as it was. */
  const ledgerState = async () => {
    const row = (
      await t.deps.database.client.execute(`SELECT
        (SELECT COUNT(*) FROM ledger_entries) AS entries,
        (SELECT COALESCE(SUM(prepaid_nanos), 0) FROM balances) AS prepaid,
        (SELECT COALESCE(SUM(used_nanos), 0) FROM allowances) AS used,
        (SELECT COALESCE(SUM(spent_nanos), 0) FROM key_spend) AS spent`)
    ).rows[0]!
    const held = t.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)
    return `${row.entries}/${row.prepaid}/${row.used}/${row.spent}/held ${held}/slots ${t.deps.limits.concurrency.size}`
  }

  test('never a 5xx, never a crash, never a ledger change on a refused request', async () => {
    const routes = [...new Set(t.app.routes.map(route => `${route.method} ${route.path}`))].filter(name => !name.startsWith('GET /docs'))
    expect(routes).toContain('POST /v1/chat/completions')
    // Valid credentials most of the time, so that bodies reach validation and billing.
    const credential = fc.oneof(
      { weight: 4, arbitrary: fc.constant<string | undefined>(org.adminKey) },
      { weight: 2, arbitrary: fc.constant<string | undefined>(memberKey) },
      fc.constant<string | undefined>(undefined),
      fc.string({ maxLength: 60 }).map(text => `z_sk_${text}`),
      fc.string({ maxLength: 80 }),
    )
    const headers = fc.record(
      {
        'content-type': fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', ''),
        'x-request-id': fc.string({ maxLength: 140 }),
        'x-org-id': fc.oneof(fc.constant(org.orgId), fc.string({ maxLength: 40 })),
        'idempotency-key': fc.string({ maxLength: 80 }),
        accept: fc.constantFrom('text/event-stream', 'application/json', '*/*'),
      },
      { requiredKeys: [] },
    )
    let requests = 0
    let refused = 0
    let billedOk = 0
    for (const name of routes) {
      const [method, pattern] = name.split(' ') as [string, string]
      const valid = VALID_BODIES[name]
      const body: fc.Arbitrary<string | undefined> =
        method === 'GET' || method === 'DELETE'
          ? fc.constant(undefined)
          : fc.oneof(
              { weight: 4, arbitrary: mutated(valid).map(value => JSON.stringify(value)) },
              { weight: 2, arbitrary: fc.jsonValue().map(value => JSON.stringify(value)) },
              { weight: 1, arbitrary: fc.constantFrom(...HOSTILE) },
              { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
              ...(valid === undefined ? [] : [{ weight: 3, arbitrary: fc.constant(JSON.stringify(valid)) }]),
            )
      const pathParam = fc.oneof(fc.uuid(), fc.string({ maxLength: 50 }).map(encodeURIComponent), fc.constant(org.adminKeyId))
      await fc.assert(
        fc.asyncProperty(body, headers, credential, pathParam, async (text, extraHeaders, key, param) => {
          const path = pattern.replace(/:[a-z_]+/g, param)
          const sent: Record<string, string> = {}
          for (const [header, value] of Object.entries(extraHeaders)) if (/^[\t\x20-\x7e]*$/.test(value)) sent[header] = value
          if (key !== undefined && /^[\t\x20-\x7e]*$/.test(key)) sent.authorization = `Bearer ${key}`
          let request: Request
          try {
            request = new Request(`http://localhost${path}`, { method, headers: sent, body: text })
          } catch {
            return // not representable as an HTTP request
          }
          const before = await ledgerState()
          const response = await t.app.handle(request)
          const answer = await response.text()
          requests += 1
          if (response.status >= 500) throw new Error(`${name} → ${response.status}: ${answer.slice(0, 300)}`)
          expect(response.headers.get('x-request-id')).toBeTruthy()
          if (name === 'POST /v1/chat/completions' && response.status === 200) billedOk += 1
          if (response.status >= 400) {
            refused += 1
            expect(await ledgerState()).toBe(before)
          }
        }),
        { numRuns: valid === undefined ? 60 : 250 },
      )
    }
    expect(requests).toBeGreaterThan(500)
    expect(refused).toBeGreaterThan(100)
    expect(billedOk).toBeGreaterThan(5) // valid chats ran too, and their charges are allowed
    // After all of it: nothing held, no slot taken.
    expect(t.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)).toBe(0n)
    expect(t.deps.limits.concurrency.size).toBe(0)
  }, 120_000)
})
