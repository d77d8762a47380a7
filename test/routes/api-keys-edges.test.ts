import { expect, test } from 'bun:test'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'

// Edges of key creation and listing found by exploratory QA (spec §2.1, §4.1), each kept with
// the test that showed it; the main suites are test/routes/api-keys*.test.ts.

const KEYS = '/api/v1/api-keys'

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

const create = (body: unknown) => t.request('POST', KEYS, { key: org.adminKey, body })
const listedNames = async () => ((await json(await t.request('GET', KEYS, { key: org.adminKey }))).keys as Array<{ name: string }>).map(key => key.name)

test.each([
  ['zero-width space', '\u200b'],
  ['word joiner and BOM', '\u2060\ufeff'],
  ['soft hyphen', '\u00ad'],
  ['Hangul filler', '\u3164'],
  ['zero-width joiner between spaces', ' \u200d '],
])('a name of only invisible characters (%s) is blank: 400 naming name, nothing written', async (_label, name) => {
  const before = await listedNames()
  const response = await create({ name })
  expect(response.status).toBe(400)
  const { error } = await json(response)
  expect(error).toMatchObject({ code: 'invalid_request', param: 'name' })
  expect(error.message).toContain('blank')
  expect(await listedNames()).toEqual(before)
})

test('visible text with invisible characters inside is a name, kept as sent', async () => {
  for (const name of ['a\u200bb', '👩\u200d💻 laptop', 'x\u00ad']) {
    const response = await create({ name })
    expect(response.status).toBe(201)
    expect((await json(response)).key.name).toBe(name)
  }
})

test('a spend cap past what the ledger holds is refused naming the limit, not the shape', async () => {
  const response = await create({ name: 'huge cap', spend_cap_period: 'daily', spend_cap_nanos: '9223372036854775808' })
  expect(response.status).toBe(400)
  const { error } = await json(response)
  expect(error).toMatchObject({ code: 'invalid_request', param: 'spend_cap_nanos', message: 'spend_cap_nanos must be at most 9223372036854775807 (the most the ledger can hold)' })
  expect(await listedNames()).not.toContain('huge cap')
  // The largest cap the ledger holds is accepted.
  expect((await create({ name: 'max cap', spend_cap_period: 'daily', spend_cap_nanos: '9223372036854775807' })).status).toBe(201)
})
