import { expect, test } from 'bun:test'
import { contextFor, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { loadConfig } from '../../src/config/load'
import { silentLogger } from '../../src/observability/logger'
import { buildWebApp, pageServer } from '../support/fake-web'
import { buildTestApp, createPlanOrg, json } from '../support/harness'
import { NEAR_V2, startTeeGateway } from '../support/tee'

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

// Every billed route, not only the chat pipeline: before, a document parse, a web fetch and an
// Encrypted chat arriving during the drain ran and were charged (QA), and none of them was
// tracked for the drain's deadline.
test('while draining: a document parse, a web fetch and an Encrypted chat are refused with 503, nothing charged', async () => {
  const tee = await startTeeGateway([{ id: 'near', proofFormat: NEAR_V2 }], { logger: silentLogger })
  const web = await buildWebApp()
  const site = pageServer(() => new Response('<html><title>t</title><body>page</body></html>', { headers: { 'content-type': 'text/html' } }))
  try {
    const org = await tee.createOrg()
    const nonce = 'ab'.repeat(32)
    const attestation: Attestation = await json(await tee.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa&nonce=${nonce}`, { key: org.adminKey }))
    const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', stream: false, messages: [{ role: 'user', content: 'hi' }] }, contextFor(attestation, generateClientKeys('ecdsa')), { responseEvidence: true })
    const webOrg = await createPlanOrg(web.t, { name: 'web', keyName: 'web' })
    web.resolver.set('docs.example-web.com', ['127.0.0.1'])

    tee.deps.lifecycle.drain()
    web.t.deps.lifecycle.drain()
    const before = await tee.deps.balance(org.orgId)
    const webBefore = await web.t.deps.balance(webOrg.orgId)
    const form = new FormData()
    form.append('file', new File(['hello world'], 'a.txt', { type: 'text/plain' }))
    const refused = [
      await tee.request('POST', '/v1/chat/completions', { key: org.adminKey, body, headers }),
      await tee.request('POST', '/api/v1/attachments/parse', { key: org.adminKey, body: form }),
      await web.t.request('POST', '/api/v1/web/fetch', { key: webOrg.key, body: { urls: [`http://docs.example-web.com:${site.port}/`] } }),
    ]
    for (const response of refused) {
      expect(response.status).toBe(503)
      expect((await json(response)).error.code).toBe('unavailable')
    }
    expect(site.seen).toHaveLength(0)
    expect((await tee.deps.balance(org.orgId)).prepaidNanos).toBe(before.prepaidNanos)
    expect((await web.t.deps.balance(webOrg.orgId)).prepaidNanos).toBe(webBefore.prepaidNanos)
    expect(tee.deps.limits.concurrency.size).toBe(0)
  } finally {
    site.stop()
    await web.t.close()
    await tee.stopAll()
  }
})

test('while draining: a chat with a file part is refused before its document is parsed or billed', async () => {
  // Before: the file was parsed and its unit charged (enrichment bills before the chat's own
  // admission), and only then was the chat refused with 503.
  const env = { SVC_CONFIG: '/virtual/files.yaml' }
  const t = await buildTestApp(env, loadConfig(env, () => `
providers: [{ id: demo, type: demo, retention: none }]
models: [{ id: m, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 256, capabilities: { file_input: true } }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
`))
  try {
    const org = await t.createOrg()
    t.deps.lifecycle.drain()
    const before = await t.deps.balance(org.orgId)
    const notes = Buffer.from('meeting notes').toString('base64')
    const chat = await t.request('POST', '/v1/chat/completions', {
      key: org.adminKey,
      body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'summarize' }, { type: 'file', file: { file_data: `data:text/plain;base64,${notes}`, filename: 'notes.txt' } }] }] },
    })
    expect(chat.status).toBe(503)
    expect((await json(chat)).error.code).toBe('unavailable')
    expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(before.prepaidNanos)
    expect(t.deps.extractor.stats().workers).toBe(0)
  } finally {
    await t.close()
  }
})
