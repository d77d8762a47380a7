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

  test('UTF-8 in any spelling, or no charset, is accepted', async () => {
    for (const type of ['application/json', 'application/json; charset=utf-8', 'application/json; charset=UTF-8', 'Application/JSON;charset="utf-8"', 'application/json; charset=utf8']) {
      const response = await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'x' }, headers: { 'content-type': type } })
      expect(response.status).toBe(201)
    }
  })
})
