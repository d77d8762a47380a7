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
// The multipart route (POST /api/v1/attachments/parse) is fuzzed from a valid multipart seed:
// byte flips, truncations, insertions, structural changes (extra fields, a second file, the
// wrong field name, lying part headers, a mismatched or missing boundary) and random files.

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
  'POST /v1/responses': { model: 'demo-anonymous', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }], max_output_tokens: 8, stream: false, instructions: 'be brief' },
  'POST /v1/messages': { model: 'demo-anonymous', max_tokens: 8, system: 'be brief', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], stream: false },
  'POST /v1/messages/count_tokens': { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] },
}

/** The multipart route and its seed: one `file` field holding a small UTF-8 text file. */
const MULTIPART_ROUTE = 'POST /api/v1/attachments/parse'
const BOUNDARY = '----fuzz7MA4YWxkTrZu0gW'
const MULTIPART_TYPE = `multipart/form-data; boundary=${BOUNDARY}`
const utf8 = new TextEncoder()

interface FormPart {
  name: string
  filename?: string
  type?: string
  content: Uint8Array
}

function multipart(parts: FormPart[], boundary = BOUNDARY): Uint8Array {
  const chunks: Uint8Array[] = []
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename === undefined ? '' : `; filename="${part.filename}"`}`
    chunks.push(utf8.encode(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${part.type === undefined ? '' : `Content-Type: ${part.type}\r\n`}\r\n`), part.content, utf8.encode('\r\n'))
  }
  chunks.push(utf8.encode(`--${boundary}--\r\n`))
  // A plain Uint8Array, not a Buffer: Buffer#slice is a view, and mutations must never touch the seed.
  return new Uint8Array(Buffer.concat(chunks))
}

const SEED_FILE: FormPart = { name: 'file', filename: 'notes.txt', type: 'text/plain', content: utf8.encode('Grüße aus Zürich.\nA second line.\n') }
const SEED = multipart([SEED_FILE])

/** A request body and, when it decides one, the content type it goes with. */
interface Payload {
  body: string | Uint8Array | undefined
  contentType?: string
}

/** Mutations of the valid multipart seed, mostly sent with the seed's content type. */
function multipartPayloads(): fc.Arbitrary<Payload> {
  const anyText = fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom(...HOSTILE.slice(0, 8)), fc.constant('a'.repeat(300)))
  const bytes = fc.oneof(
    { weight: 3, arbitrary: fc.uint8Array({ maxLength: 2048 }) },
    // Files that start like real containers: PDF, zip (docx/xlsx/pptx), OLE (xls), PNG.
    fc.tuple(fc.constantFrom('%PDF-1.7\n', 'PK\u0003\u0004', '\u00d0\u00cf\u0011\u00e0\u00a1\u00b1\u001a\u00e1', '\u0089PNG\r\n\u001a\n'), fc.uint8Array({ maxLength: 1024 }))
      .map(([head, rest]) => new Uint8Array(Buffer.concat([Buffer.from(head, 'latin1'), rest]))),
  )
  const byteEdits = fc.array(fc.tuple(fc.nat({ max: SEED.length - 1 }), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 8 }).map(edits => {
    const copy = SEED.slice()
    for (const [index, value] of edits) copy[index] = value
    return copy
  })
  const truncated = fc.nat({ max: SEED.length - 1 }).map(end => SEED.slice(0, end))
  const inserted = fc.tuple(fc.nat({ max: SEED.length }), fc.uint8Array({ minLength: 1, maxLength: 64 })).map(([at, extra]) => new Uint8Array(Buffer.concat([SEED.subarray(0, at), extra, SEED.subarray(at)])))
  const structural = fc.oneof(
    fc.constant(multipart([SEED_FILE, { name: 'model', content: utf8.encode('demo-anonymous') }])),
    fc.constant(multipart([SEED_FILE, { ...SEED_FILE, filename: 'second.txt' }])),
    fc.constant(multipart([{ ...SEED_FILE, name: 'upload' }])),
    fc.constant(multipart([{ name: 'file', content: SEED_FILE.content }])), // a field, not a file
    fc.constant(multipart([])),
    fc.record({ name: anyText, filename: fc.option(anyText, { nil: undefined }), type: fc.option(anyText, { nil: undefined }), content: bytes }).map(part => multipart([part])),
    fc.record({ filename: anyText, type: fc.option(anyText, { nil: undefined }), content: bytes }).map(part => multipart([{ name: 'file', ...part }])),
    fc.array(fc.constantFrom('trust_tier', 'parse_mode', 'model', 'file'), { minLength: 1, maxLength: 4 }).map(names => multipart(names.map(name => ({ ...SEED_FILE, name })))),
  )
  const body = fc.oneof({ weight: 2, arbitrary: fc.constant(SEED) }, { weight: 3, arbitrary: byteEdits }, { weight: 2, arbitrary: truncated }, { weight: 2, arbitrary: inserted }, { weight: 4, arbitrary: structural }, bytes)
  const contentType = fc.oneof(
    { weight: 8, arbitrary: fc.constant(MULTIPART_TYPE) },
    fc.constantFrom('multipart/form-data; boundary=other', 'multipart/form-data', `multipart/mixed; boundary=${BOUNDARY}`, `multipart/form-data; boundary="${BOUNDARY}"; charset=utf-8`, 'application/json', 'text/plain', ''),
    fc.string({ maxLength: 60 }).map(text => `multipart/form-data; boundary=${text}`),
  )
  return fc.record({ body: body as fc.Arbitrary<string | Uint8Array | undefined>, contentType })
}

const HOSTILE = [
  '', 'null', '[]', '{}', '{"model":', '\u0000', '{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{"x":1}}}',
  `${'['.repeat(5000)}${']'.repeat(5000)}`, '{"spend_cap_nanos":1e999}',
  // Objects with their own toString/valueOf keys (fast-check's keys include them): a 500 once.
  '{"model":[{"toString":""}],"messages":[{"role":"user","content":"hi"}],"name":{"valueOf":1},"urls":[{"toString":""}]}',
  // Strings naming Object.prototype's members where a lookup table is read (expires_in: a 500 once).
  '{"name":"k","expires_in":"toString","spend_cap_period":"constructor","spend_cap_nanos":"1"}', '{"messages":[{"role":"user","content":"\\ud800"}]}', '"\u202e"',
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
    // The multipart route sends the right X-Org-ID (or none) more often, so that bodies reach the parser.
    const headersFor = (orgWeight: number) => fc.record(
      {
        'content-type': fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', ''),
        'x-request-id': fc.string({ maxLength: 140 }),
        'x-org-id': fc.oneof({ weight: orgWeight, arbitrary: fc.constant(org.orgId) }, fc.string({ maxLength: 40 })),
        'idempotency-key': fc.string({ maxLength: 80 }),
        accept: fc.constantFrom('text/event-stream', 'application/json', '*/*'),
      },
      { requiredKeys: [] },
    )
    let requests = 0
    let refused = 0
    let billedOk = 0
    const parses = { ok: 0, refused: 0 }
    for (const name of routes) {
      const [method, pattern] = name.split(' ') as [string, string]
      const isMultipart = name === MULTIPART_ROUTE
      const valid = isMultipart ? SEED : VALID_BODIES[name]
      const jsonBody: fc.Arbitrary<string | undefined> =
        method === 'GET' || method === 'DELETE'
          ? fc.constant(undefined)
          : fc.oneof(
              { weight: 4, arbitrary: mutated(valid).map(value => JSON.stringify(value)) },
              { weight: 2, arbitrary: fc.jsonValue().map(value => JSON.stringify(value)) },
              { weight: 1, arbitrary: fc.constantFrom(...HOSTILE) },
              { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
              ...(valid === undefined ? [] : [{ weight: 3, arbitrary: fc.constant(JSON.stringify(valid)) }]),
            )
      // The multipart route also gets JSON and junk bodies (with the random content types), but mostly multipart.
      const body: fc.Arbitrary<Payload> = isMultipart
        ? fc.oneof({ weight: 6, arbitrary: multipartPayloads() }, { weight: 1, arbitrary: jsonBody.map(text => ({ body: text })) })
        : jsonBody.map(text => ({ body: text }))
      // Earlier routes may have revoked the member key (DELETE /api/v1/api-keys/:id is fuzzed too):
      // the multipart route gets a fresh key of its own, so that most bodies reach the parser.
      const routeCredential = isMultipart ? fc.oneof({ weight: 6, arbitrary: fc.constant<string | undefined>((await t.createMember(org, 'member')).key) }, credential) : credential
      const pathParam = fc.oneof(fc.uuid(), fc.string({ maxLength: 50 }).map(encodeURIComponent), fc.constant(org.adminKeyId))
      await fc.assert(
        fc.asyncProperty(body, headersFor(isMultipart ? 6 : 1), routeCredential, pathParam, async (payload, extraHeaders, key, param) => {
          const path = pattern.replace(/:[a-z_]+/g, param)
          const sent: Record<string, string> = {}
          for (const [header, value] of Object.entries(extraHeaders)) if (/^[\t\x20-\x7e]*$/.test(value)) sent[header] = value
          if (payload.contentType !== undefined && /^[\t\x20-\x7e]*$/.test(payload.contentType)) sent['content-type'] = payload.contentType
          if (key !== undefined && /^[\t\x20-\x7e]*$/.test(key)) sent.authorization = `Bearer ${key}`
          let request: Request
          try {
            request = new Request(`http://localhost${path}`, { method, headers: sent, body: payload.body })
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
          if (isMultipart) parses[response.status === 200 ? 'ok' : 'refused'] += 1
          if (response.status >= 400) {
            refused += 1
            expect(await ledgerState()).toBe(before)
          }
        }),
        { numRuns: isMultipart ? 400 : valid === undefined ? 60 : 250 },
      )
    }
    expect(requests).toBeGreaterThan(500)
    expect(refused).toBeGreaterThan(100)
    // Valid chats ran too, and their charges are allowed. How many is random (the property is not
    // seeded): 7-24 in 24 local runs, and 5 once in CI, which the earlier `> 5` failed on.
    expect(billedOk).toBeGreaterThan(0)
    // The multipart route was reached with real multipart: some bodies parsed (and were billed), many were refused.
    expect(routes).toContain(MULTIPART_ROUTE)
    expect(parses.ok).toBeGreaterThan(10)
    expect(parses.refused).toBeGreaterThan(50)
    // After all of it: nothing held, no slot taken.
    expect(t.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)).toBe(0n)
    expect(t.deps.limits.concurrency.size).toBe(0)
  }, 120_000)
})
