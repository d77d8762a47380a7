import { afterAll, beforeAll, expect, test } from 'bun:test'
import { contextFor, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { startSimTeeBackend } from '../../src/tee/sim/server'
import { json, type TestApp } from '../support/harness'
import { buildEncryptedProxyApp } from '../support/tee'

// An attested backend whose non-streamed Encrypted answer is valid JSON but no chat completion
// (a string, a number, an array): as malformed as bad JSON, so 502 and nothing billed.
// A proxy in front of the simulator serves the real evidence and the chosen chat body.

const sim = startSimTeeBackend({ family: 'nearai' })
let chatBody: string | undefined
let streamBody: (() => ReadableStream<Uint8Array>) | undefined
const proxy = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  async fetch(request) {
    const url = new URL(request.url)
    if (request.method === 'POST' && url.pathname === '/v1/chat/completions' && chatBody !== undefined) return new Response(chatBody, { headers: { 'content-type': 'application/json' } })
    if (request.method === 'POST' && url.pathname === '/v1/chat/completions' && streamBody !== undefined) return new Response(streamBody(), { headers: { 'content-type': 'text/event-stream' } })
    const body = request.method === 'POST' ? await request.arrayBuffer() : undefined
    return fetch(`${sim.url.replace(/\/v1$/, '')}${url.pathname}${url.search}`, { method: request.method, headers: request.headers, body })
  },
})
let t: TestApp
let key: string
let orgId: string
beforeAll(async () => {
  t = await buildEncryptedProxyApp(sim, `http://127.0.0.1:${proxy.port}/v1`)
  const org = await t.createOrg()
  key = org.adminKey
  orgId = org.orgId
})
afterAll(async () => {
  await t.close()
  proxy.stop(true)
  await sim.stop()
})

async function send(stream = false) {
  const attestation: Attestation = await json(await t.request('GET', '/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa', { key }))
  const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages: [{ role: 'user', content: 'hello' }], stream }, contextFor(attestation, generateClientKeys('ecdsa')))
  return t.request('POST', '/v1/chat/completions', { key, body, headers })
}

test.each(['"a string"', '5', '[]', '[{"choices":[]}]'])('a 2xx body of %s: 502 provider_error, nothing billed (QA: 200 and billed)', async chat => {
  chatBody = chat
  try {
    const before = (await t.deps.balance(orgId)).availableNanos
    const response = await send()
    expect(response.status).toBe(502)
    expect((await json(response)).error.code).toBe('provider_error')
    expect((await t.deps.balance(orgId)).availableNanos).toBe(before)
  } finally {
    chatBody = undefined
  }
})

test('control: the same path with the backend\'s own answer is 200 and billed', async () => {
  const before = (await t.deps.balance(orgId)).availableNanos
  expect((await send()).status).toBe(200)
  expect((await t.deps.balance(orgId)).availableNanos).toBeLessThan(before)
})

test('a streamed event that never ends is cut at 16 MiB with an error event, not buffered without bound', async () => {
  // The backend opens an event and then sends 1 MiB chunks with no blank line, for ever.
  let sent = 0
  streamBody = () => new ReadableStream({
    pull(controller) {
      if (sent === 0) controller.enqueue(new TextEncoder().encode('data: '))
      controller.enqueue(new Uint8Array(1024 * 1024).fill(0x61))
      sent += 1
    },
  })
  try {
    const before = (await t.deps.balance(orgId)).availableNanos
    const response = await send(true)
    expect(response.status).toBe(200)
    const text = await response.text()
    expect(text).toContain('the backend sent an event longer than 16777216 bytes')
    expect(text.length).toBeLessThan(1024)
    expect(sent).toBeLessThan(40)
    expect((await t.deps.balance(orgId)).availableNanos).toBe(before)
  } finally {
    streamBody = undefined
  }
})
