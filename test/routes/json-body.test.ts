import { describe, expect, test } from 'bun:test'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'
import { REDIRECT } from '../support/oauth'

// The shared JSON body reader (src/http/body-limit.ts): a leading UTF-8 byte-order mark is
// ignored (RFC 8259 §8.1 allows it), and a charset other than UTF-8 is refused, naming it.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

const BOM = '\uFEFF'
const chat = { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] }

describe('byte-order mark', () => {
  test('a BOM before the JSON is ignored on the JSON routes', async () => {
    const created = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: `${BOM}${JSON.stringify({ name: 'bom' })}` })
    expect(created.status).toBe(201)
    expect((await json(created)).key.name).toBe('bom')
    const answered = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: `${BOM}${JSON.stringify(chat)}` })
    expect(answered.status).toBe(200)
    const registered = await t.request('POST', '/oauth/register', { body: `${BOM}${JSON.stringify({ redirect_uris: [REDIRECT] })}` })
    expect(registered.status).toBe(201)
  })

  test('a BOM alone is still an empty body, and one inside the JSON is still invalid', async () => {
    const alone = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: BOM })
    expect(alone.status).toBe(400)
    expect((await json(alone)).error.message).toContain('empty')
    const inside = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: `{${BOM}"name":"x"}` })
    expect(inside.status).toBe(400)
  })
})

describe('charset', () => {
  test('a charset other than UTF-8 is 400 naming it (case-insensitive, quoted or not)', async () => {
    for (const type of ['application/json; charset=latin1', 'application/json;charset=ISO-8859-1', 'application/json; charset="utf-16"']) {
      const response = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'x' }, headers: { 'content-type': type } })
      expect(response.status).toBe(400)
      const body = await json(response)
      expect(body.error.code).toBe('invalid_request')
      expect(body.error.message).toContain(`charset "${/charset="?([^"]+)/.exec(type)![1]}"`)
    }
    const refused = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: chat, headers: { 'content-type': 'application/json; charset=latin1' } })
    expect(refused.status).toBe(400)
    const oauth = await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] }, headers: { 'content-type': 'application/json; charset=latin1' } })
    expect(oauth.status).toBe(400)
    expect((await json(oauth)).error_description).toContain('latin1')
  })

  test('bytes that are not UTF-8 are 400, nothing stored; U+FFFD sent as UTF-8 is text like any other', async () => {
    // "café" with its é as the Latin-1 byte 0xE9 (a lenient decode stored "caf\uFFFD").
    const latin1 = new Uint8Array([...new TextEncoder().encode('{"name":"caf'), 0xe9, ...new TextEncoder().encode('"}')])
    const send = (path: string, body: Uint8Array) =>
      t.app.handle(new Request(`http://localhost${path}`, { method: 'POST', headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' }, body }))
    const before = (await json(await t.request('GET', '/api/v1/api-keys', { key: org.adminKey }))).keys.length
    const refused = await send('/api/v1/api-keys', latin1)
    expect(refused.status).toBe(400)
    expect((await json(refused)).error).toMatchObject({ code: 'invalid_request', message: 'request body is not valid UTF-8 (RFC 8259 §8.1)' })
    expect((await json(await t.request('GET', '/api/v1/api-keys', { key: org.adminKey }))).keys.length).toBe(before)
    const chatBytes = new TextEncoder().encode(JSON.stringify(chat).replace('hi', 'h\u0000'))
    chatBytes[chatBytes.indexOf(0x5c)] = 0xff // a byte no UTF-8 text holds
    expect((await send('/v1/chat/completions', chatBytes)).status).toBe(400)
    // A client registration's error is RFC 7591's, as for a body that is no JSON.
    const registration = await t.app.handle(new Request('http://localhost/oauth/register', { method: 'POST', headers: { 'content-type': 'application/json' }, body: latin1 }))
    expect([registration.status, (await json(registration)).error]).toEqual([400, 'invalid_client_metadata'])
    const replacement = await send('/api/v1/api-keys', new TextEncoder().encode(JSON.stringify({ name: 'caf\uFFFD' })))
    expect(replacement.status).toBe(201)
    expect((await json(replacement)).key.name).toBe('caf\uFFFD')
  })

  test('UTF-8 in any spelling, or no charset, is accepted', async () => {
    for (const type of ['application/json', 'application/json; charset=utf-8', 'application/json; charset=UTF-8', 'Application/JSON;charset="utf-8"', 'application/json; charset=utf8']) {
      const response = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'x' }, headers: { 'content-type': type } })
      expect(response.status).toBe(201)
    }
  })
})

describe('content coding', () => {
  test('a body sent compressed is 400 naming its Content-Encoding on every body reader (JSON, form, multipart); identity passes', async () => {
    // QA: a gzip JSON body was "not valid UTF-8", and a br label on a plain body was ignored.
    const gzipped = Bun.gzipSync(new TextEncoder().encode(JSON.stringify(chat)))
    const compressed = { 'content-type': 'application/json', 'content-encoding': 'gzip' }
    const refusedChat = await t.app.handle(new Request('http://localhost/v1/chat/completions', { method: 'POST', body: gzipped, headers: { ...compressed, authorization: `Bearer ${org.adminKey}` } }))
    expect(refusedChat.status).toBe(400)
    expect((await json(refusedChat)).error.message).toBe('Content-Encoding "gzip" is not supported: send the body uncompressed')
    const labelled = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'x' }, headers: { 'content-encoding': 'br' } })
    expect(labelled.status).toBe(400)
    const oauth = await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] }, headers: { 'content-encoding': 'gzip' } })
    expect(oauth.status).toBe(400)
    const form = new FormData()
    form.set('file', new Blob(['hello']), 'a.txt')
    const parse = await t.app.handle(new Request('http://localhost/api/v1/attachments/parse', { method: 'POST', body: form, headers: { authorization: `Bearer ${org.adminKey}`, 'content-encoding': 'gzip' } }))
    expect(parse.status).toBe(400)
    expect((await json(parse)).error.message).toContain('Content-Encoding "gzip"')
    // A list of identities, empty elements among them (RFC 9110 §5.6.1), is identity; one coding in a list is named.
    for (const coding of ['identity', ' IDENTITY ', 'identity, ', 'identity,identity', '']) {
      const identity = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: chat, headers: { 'content-encoding': coding } })
      expect(`${JSON.stringify(coding)} ${identity.status}`).toBe(`${JSON.stringify(coding)} 200`)
    }
    const listed = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'x' }, headers: { 'content-encoding': 'identity, gzip' } })
    expect((await json(listed)).error.message).toBe('Content-Encoding "gzip" is not supported: send the body uncompressed')
  })
})
