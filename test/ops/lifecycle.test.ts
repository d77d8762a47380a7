import { expect, test } from 'bun:test'
import { buildTestApp, json } from '../support/harness'

// Draining, in process: /readyz answers 503 `draining` at once, and a billed call arriving on a
// connection kept alive is refused with 503 before anything is reserved.
test('while draining: /readyz 503 draining, new chat 503 unavailable, nothing reserved or charged', async () => {
  const t = await buildTestApp()
  const org = await t.createOrg()
  expect(await json(await t.request('GET', '/readyz'))).toEqual({ status: 'ready', database: 'ok' })
  t.deps.lifecycle.drain()
  const ready = await t.request('GET', '/readyz')
  expect(ready.status).toBe(503)
  expect(await json(ready)).toEqual({ status: 'draining', database: 'ok' })
  const before = await t.deps.balance(org.orgId)
  const chat = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] } })
  expect(chat.status).toBe(503)
  expect((await json(chat)).error.code).toBe('unavailable')
  expect(t.deps.limits.concurrency.size).toBe(0)
  expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(before.prepaidNanos)
  // Public routes still answer.
  expect((await t.request('GET', '/v1/models')).status).toBe(200)
  await t.close()
})
