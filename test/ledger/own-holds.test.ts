import { afterEach, expect, test } from 'bun:test'
import { buildTestApp, type TestApp } from '../support/harness'
import { USD, createCappedKey, verifyClean } from './fixtures'

// A refusal caused by the request's own held work (its files' parse units, held until its chat is
// admitted) is no reason to retry shortly: every retry holds them again (review of fdeab3e: the
// 429 said "calls in flight hold the rest; retry shortly", x-should-retry true, every time).

let t: TestApp
afterEach(async () => {
  await t?.close()
})

const attachment = { type: 'file', file: { filename: 'a.txt', file_data: `data:text/plain;base64,${btoa('some text here')}` } }

test('a chat whose own file units leave its cap too little: 429 not to be retried; the chat without the file fits', async () => {
  t = await buildTestApp()
  const org = await t.createOrg('acme', 10n * USD)
  // The parse unit (1,000,000) and the chat's estimate (~405,100) exceed the cap; the chat alone fits.
  const key = await createCappedKey(t, org, 'monthly', 1_200_000n)
  const body = { model: 'demo-anonymous', max_tokens: 1000, messages: [{ role: 'user', content: [attachment, { type: 'text', text: 'hi' }] }] }
  const refused = await t.request('POST', '/v1/chat/completions', { key: key.secret, body })
  expect(refused.status).toBe(429)
  expect(refused.headers.get('x-should-retry')).toBe('false')
  // With its file the request can never fit the cap: no reset is promised (before: Retry-After to the month's end).
  expect(refused.headers.get('retry-after')).toBeNull()
  expect(((await refused.json()) as { error: { message: string } }).error.message).toContain('cannot cover')
  const plain = await t.request('POST', '/v1/chat/completions', { key: key.secret, body: { ...body, messages: [{ role: 'user', content: 'hi' }] } })
  expect(plain.status).toBe(200)
  await verifyClean(t)
})

test('a Fusion run refused only by its own documents\' hold: not to be retried either', async () => {
  t = await buildTestApp()
  const org = await t.createOrg('acme', 10n * USD)
  const key = await createCappedKey(t, org, 'monthly', 1_200_000n)
  const body = { models: ['demo-anonymous', 'demo-alt'], max_tokens: 1000, messages: [{ role: 'user', content: [attachment, { type: 'text', text: 'hi' }] }] }
  const refused = await t.request('POST', '/api/v1/chat/fusion', { key: key.secret, body })
  expect(refused.status).toBe(429)
  expect(refused.headers.get('x-should-retry')).toBe('false')
  await verifyClean(t)
})
