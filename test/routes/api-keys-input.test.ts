import { describe, expect, test } from 'bun:test'
import { keysApi } from '../support/api-keys'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'

// Hostile input to key creation (spec §4.1, §7): wrong types, names, bodies that are not a JSON
// object, content types and unknown fields, each refused naming the problem with nothing written.
// Oversized bodies are in api-keys-body-limit.test.ts.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))
const { create, createOk, listed, expectCreateRejected, createRejected } = keysApi(() => ({ t, org }))

describe('hostile input', () => {
  test.each([
    [{ name: 1 }, 'name'],
    [{ name: null }, 'name'],
    [{ name: true }, 'name'],
    [{ name: ['a'] }, 'name'],
    [{ name: { value: 'a' } }, 'name'],
    [{}, 'name'],
    [{ admin: true }, 'name'],
    [{ name: 'x', admin: 'yes' }, 'admin'],
    [{ name: 'x', admin: 'true' }, 'admin'],
    [{ name: 'x', admin: 1 }, 'admin'],
    [{ name: 'x', admin: null }, 'admin'],
  ])('wrong type %j → 400 naming %s', async (body, param) => {
    await createRejected(body, param)
  })

  // JSON.parse keeps the last of two members silently: a proxy reading the first `admin` would
  // disagree with the gateway about the authority asked for (QA).
  test.each([
    ['{"name":"dup","admin":false,"admin":true}', 'admin'],
    ['{"name":"dup","spend_cap_period":"daily","spend_cap_nanos":"100","spend_cap_nanos":"999999999999"}', 'spend_cap_nanos'],
    ['{"name":"a","\\u006eame":"b"}', 'name'],
    ['{"name":"a","name":"a"}', 'name'],
  ])('a member given twice %s → 400 naming it, nothing written', async (body, param) => {
    const error = await expectCreateRejected(() => create(body), 400, 'invalid_request', param)
    expect(error.message).toContain(`"${param}" twice`)
  })

  test('names: 200 characters are fine, 201 are not', async () => {
    const key = await createOk({ name: 'n'.repeat(200) })
    expect(key.name).toBe('n'.repeat(200))
    await createRejected({ name: 'n'.repeat(201) }, 'name')
    await createRejected({ name: '名'.repeat(201) }, 'name')
    expect((await createOk({ name: '名'.repeat(200) })).name).toBe('名'.repeat(200))
  })

  test('the 200-character limit applies to the trimmed name', async () => {
    expect((await createOk({ name: ` ${'n'.repeat(200)} ` })).name).toBe('n'.repeat(200))
    expect((await createOk({ name: `\t${'m'.repeat(200)}${' '.repeat(300)}\n` })).name).toBe('m'.repeat(200))
    const error = await createRejected({ name: ` ${'n'.repeat(201)} ` }, 'name')
    expect(error.message).toBe('name must be at most 200 characters')
  })

  test('characters are code points: 200 emoji (400 UTF-16 units) are fine, 201 are not', async () => {
    expect((await createOk({ name: '🔑'.repeat(200) })).name).toBe('🔑'.repeat(200))
    expect((await createOk({ name: `${'𝒦'.repeat(199)}a` })).name).toBe(`${'𝒦'.repeat(199)}a`)
    const error = await createRejected({ name: '🔑'.repeat(201) }, 'name')
    expect(error.message).toBe('name must be at most 200 characters')
  })

  test('a raw name past the schema bound (1000 UTF-16 units) is refused by the schema, whatever trimming would leave', async () => {
    const error = await createRejected({ name: `a${' '.repeat(1000)}` }, 'name')
    expect(error.message).toBe('name must be a nonblank string of at most 200 characters')
  })

  test('a 1 MB name is refused before it is buffered (413), never a 500', async () => {
    await expectCreateRejected(() => create({ name: 'n'.repeat(1 << 20) }), 413, 'payload_too_large')
    await expectCreateRejected(() => create(`{"name":"${'\u00e9'.repeat(1 << 19)}"}`), 413, 'payload_too_large')
  })

  test.each([
    ['emoji', '🔑 deploy key 🚀'],
    ['CJK', '生产环境密钥'],
    ['ZWJ sequence and skin tone', '👩‍👩‍👧‍👦 family 👍🏽'],
    ['combining (NFD, not normalized)', 'Cafe\u0301'],
    ['precomposed (NFC)', 'Café'],
    ['right-to-left', 'مفتاح الإنتاج'],
    ['astral math', '𝒦𝑒𝓎 ∑'],
    ['quotes and markup', `"it's" <b>&amp;</b> \\ /`],
  ])('%s name round-trips exactly', async (_label, name) => {
    const key = await createOk({ name })
    expect(key.name).toBe(name)
    expect((await listed(key.id))!.name).toBe(name)
  })

  test('JSON \\u escapes decode to the same name', async () => {
    const key = await createOk({ name: '🔑' })
    const response = await create('{"name":"\\ud83d\\udd11"}')
    expect(response.status).toBe(201)
    expect((await json(response)).key.name).toBe(key.name)
  })

  test.each([
    ['NUL', 'a\u0000b'],
    ['bell', 'a\u0007b'],
    ['tab', 'a\tb'],
    ['newline', 'first\nsecond'],
    ['carriage return', 'a\rb'],
    ['ANSI escape', 'key \u001b[31mred\u001b[0m'],
    ['DEL', 'a\u007fb'],
    ['C1 NEL', 'a\u0085b'],
    ['C1 CSI', 'a\u009b31mb'],
  ])('%s in a name → 400 name', async (_label, name) => {
    const error = await createRejected({ name }, 'name')
    expect(error.message).toContain('control')
  })

  test('an unpaired surrogate cannot round-trip through storage → 400 name', async () => {
    await expectCreateRejected(() => create('{"name":"a\\ud800b"}'), 400, 'invalid_request', 'name')
    await expectCreateRejected(() => create('{"name":"\\udfff"}'), 400, 'invalid_request', 'name')
  })

  test.each(['', ' ', '   ', '\t', '\n\n', ' \t\r\n ', '\u00a0', '\u3000', '\u2028'])('blank name %p → 400 name', async name => {
    await createRejected({ name }, 'name')
  })

  test('surrounding whitespace is trimmed', async () => {
    const key = await createOk({ name: '  padded\n' })
    expect(key.name).toBe('padded')
    expect((await listed(key.id))!.name).toBe('padded')
  })

  // A JSON value that is not an object is refused as the body's type ("body: Expected object"). (It
  // was refused at its first required field while the schema had a default: Elysia merged the
  // value into an object of the defaults first.)
  test.each([
    ['null', 'null', undefined],
    ['an array', '[]', undefined],
    ['an array of the right object', '[{"name":"x"}]', undefined],
    ['a string', '"name"', undefined],
    ['a number', '42', undefined],
    ['false', 'false', undefined],
    ['deeply nested arrays', `${'['.repeat(4000)}${']'.repeat(4000)}`, undefined],
    ['an empty body', '', undefined],
  ])('a body that is %s → 400', async (_label, body, param) => {
    await expectCreateRejected(() => create(body), 400, 'invalid_request', param)
  })

  test.each([
    ['malformed', '{"name":'],
    ['trailing comma', '{"name":"x",}'],
    ['single quotes', "{'name':'x'}"],
    ['a comment', '{"name":"x" /* admin */}'],
    ['two documents', '{"name":"x"}{"name":"y"}'],
    ['NaN', '{"name":"x","admin":NaN}'],
  ])('%s JSON → 400 without param', async (_label, body) => {
    const error = await expectCreateRejected(() => create(body), 400, 'invalid_request')
    expect(error.message).toContain('JSON')
  })

  test.each(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonp', 'application/xml', 'text/json'])(
    'content-type %p → 400',
    async type => {
      const error = await expectCreateRejected(() => create('{"name":"x"}', org.adminKey, { 'content-type': type }), 400, 'invalid_request')
      expect(error.message).toContain('Content-Type')
    },
  )

  test.each(['application/json', 'application/json; charset=utf-8', 'Application/JSON', 'application/vnd.api+json', 'application/merge-patch+json'])(
    'content-type %p is JSON',
    async type => {
      const response = await create('{"name":"typed"}', org.adminKey, { 'content-type': type })
      expect(response.status).toBe(201)
    },
  )

  test.each([
    ['org_id', { name: 'x', org_id: '00000000-0000-7000-8000-000000000000' }],
    ['organization', { name: 'x', organization: 'other' }],
    ['scopes', { name: 'x', scopes: ['all'] }],
    ['user_id', { name: 'x', user_id: 'u' }],
    ['token', { name: 'x', token: 'z_sk_mine' }],
    ['status', { name: 'x', status: 'active' }],
    ['expires_at', { name: 'x', expires_at: '2027-01-01T00:00:00Z' }],
    ['constructor', { name: 'x', constructor: {} }],
    ['Name', { name: 'x', Name: 'y' }],
  ])('unknown field %s → 400 naming it', async (field, body) => {
    const error = await createRejected(body, field)
    expect(error.message).toContain(field)
  })

  test('a __proto__ field is unknown too, and nothing under it is read (QA: a schema default made Elysia copy the body, taking the key as its prototype)', async () => {
    for (const body of ['{"name":"p","__proto__":{"expires_in":"10m"}}', '{"name":"p","__proto__":null}', '{"name":"p","__proto__":{}}']) {
      const error = await createRejected(body, '__proto__')
      expect(error.message).toContain('unknown field "__proto__"')
    }
  })

})
