import { afterEach, expect, test } from 'bun:test'
import { contextFor, decryptChatStream, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { startSimTeeBackend } from '../../src/tee/sim/server'
import { json, type TestApp } from '../support/harness'
import { poll } from '../support/poll'
import { buildEncryptedProxyApp } from '../support/tee'

// The drain's deadline (main.ts: lifecycle.abortAll) cuts every billed call still running. An
// Encrypted chat was not tracked by the lifecycle: the drain neither counted it nor cut it, so a
// collected answer ran on past the deadline (and was charged), and the exit did not wait for a
// stream's settlement. Here a proxy in front of the simulated TEE backend holds the chat
// (the whole answer, or after its first event) until the cut.

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A gateway whose `sim:encrypted` backend answers attestations at once and holds chats. */
async function stalledTeeGateway() {
  const sim = startSimTeeBackend({ family: 'nearai' })
  let chats = 0
  const held: Array<() => void> = []
  const proxy = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const url = new URL(request.url)
      const forwarded = await fetch(`${sim.url.replace(/\/v1$/, '')}${url.pathname}${url.search}`, {
        method: request.method, headers: request.headers, body: request.method === 'POST' ? await request.arrayBuffer() : undefined,
      })
      if (!url.pathname.endsWith('/chat/completions')) return forwarded
      chats += 1
      const hold = new Promise<void>(resolve => held.push(resolve))
      if (!(forwarded.headers.get('content-type') ?? '').includes('text/event-stream')) {
        await hold
        return forwarded
      }
      // A stream: its first two events (the role, then some content), then nothing until released.
      const reader = forwarded.body!.getReader()
      let text = ''
      while (text.split('\n\n').length < 3) text += new TextDecoder().decode((await reader.read()).value)
      const head = text.split('\n\n').slice(0, 2).join('\n\n') + '\n\n'
      return new Response(new ReadableStream({
        async start(controller) {
          controller.enqueue(new TextEncoder().encode(head))
          await hold
          controller.close()
        },
      }), { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  cleanups.push(async () => {
    for (const release of held) release()
    proxy.stop(true)
    await sim.stop()
  })
  const t = await buildEncryptedProxyApp(sim, `http://127.0.0.1:${proxy.port}/v1`, 'near')
  cleanups.push(() => t.close())
  return { t, chats: () => chats }
}

async function encrypted(t: TestApp, key: string, stream: boolean) {
  const nonce = (stream ? 'cd' : 'ab').repeat(32)
  const attestation: Attestation = await json(await t.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa&nonce=${nonce}`, { key }))
  const ctx = contextFor(attestation, generateClientKeys('ecdsa'))
  return { ctx, ...encryptChatRequest({ model: 'sim:encrypted', stream, messages: [{ role: 'user', content: 'hello there' }] }, ctx) }
}

test('the drain deadline cuts an Encrypted collected answer: 503 unavailable, nothing charged', async () => {
  const { t, chats } = await stalledTeeGateway()
  const org = await t.createOrg()
  const { body, headers } = await encrypted(t, org.adminKey, false)
  const before = await t.deps.balance(org.orgId)
  const answer = t.request('POST', '/v1/chat/completions', { key: org.adminKey, body, headers })
  await poll('the chat to reach the backend', 200, 10, () => (chats() === 1 ? true : undefined))
  expect(t.deps.lifecycle.inFlight).toBe(1)
  t.deps.lifecycle.drain()
  t.deps.lifecycle.abortAll()
  const response = await answer
  expect(response.status).toBe(503)
  expect((await json(response)).error.code).toBe('unavailable')
  expect(t.deps.lifecycle.inFlight).toBe(0)
  expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(before.prepaidNanos)
  expect(t.deps.limits.concurrency.size).toBe(0)
})

test('the drain deadline cuts an Encrypted stream: in-band unavailable error, its output settled once', async () => {
  const { t, chats } = await stalledTeeGateway()
  const org = await t.createOrg()
  const { body, headers, ctx } = await encrypted(t, org.adminKey, true)
  const before = await t.deps.balance(org.orgId)
  const response = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body, headers: { ...headers, 'x-request-id': 'req-cut-encrypted' } })
  expect(response.status).toBe(200)
  expect(chats()).toBe(1)
  expect(t.deps.lifecycle.inFlight).toBe(1)
  // svc_open_streams counts it too (before, Encrypted streams were not counted).
  expect(t.deps.metrics.openStreams).toBe(1)
  const [forDecrypt, forText] = response.body!.tee()
  const text = new Response(forText).text()
  const chunks: unknown[] = []
  const decrypted = (async () => {
    try {
      for await (const chunk of decryptChatStream(forDecrypt, ctx)) chunks.push(chunk)
    } catch {
      // The error event is not an encrypted chunk.
    }
  })()
  t.deps.lifecycle.drain()
  t.deps.lifecycle.abortAll()
  const raw = await text
  await decrypted
  expect(raw).toContain('"code":"unavailable"')
  expect(raw).not.toContain('[DONE]')
  expect(t.deps.lifecycle.inFlight).toBe(0)
  expect(t.deps.metrics.openStreams).toBe(0)
  await poll('the settlement', 100, 10, async () => ((await t.deps.balance(org.orgId)).prepaidNanos < before.prepaidNanos ? true : undefined))
  const settled = await t.deps.database.client.execute("SELECT COUNT(*) AS n FROM ledger_entries WHERE request_id = 'req-cut-encrypted'")
  expect(Number(settled.rows[0]!.n)).toBe(1)
})
