import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { contextFor, decryptChatResponse, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { startSimTeeBackend, type SimTeeBackend } from '../../src/tee/sim/server'
import type { TestApp } from '../support/harness'
import { buildEncryptedProxyApp } from '../support/tee'

// An aggregator in front of several attested instances of one model (NEAR-gw's shape: one report
// per instance in `model_attestations`, a chat routed by the key in X-Model-Pub-Key). A client
// picks an instance by its signing address (README, Attested backends) and encrypts to its key;
// the gateway's pre-chat evidence fetch must pin that instance's report, not the list's first.

let a: SimTeeBackend
let b: SimTeeBackend
let aggregator: ReturnType<typeof Bun.serve>
let t: TestApp
let key: string
/** The order the aggregator lists its instances in (it may change between calls). */
let order: SimTeeBackend[]

const simAuth = (sim: SimTeeBackend) => ({ authorization: `Bearer ${sim.token}` })

beforeAll(async () => {
  a = startSimTeeBackend({ family: 'nearai' })
  b = startSimTeeBackend({ family: 'nearai' })
  order = [a, b]
  aggregator = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const url = new URL(request.url)
      if (url.pathname === '/v1/attestation/report') {
        const reports: unknown[] = []
        for (const sim of order) {
          const response = await fetch(`${sim.url}/attestation/report?${url.searchParams}`, { headers: simAuth(sim) })
          if (response.ok) reports.push(((await response.json()) as { all_attestations: unknown[] }).all_attestations[0])
        }
        if (reports.length === 0) return Response.json({ error: { message: 'no such signing address' } }, { status: 404 })
        return Response.json({ gateway_attestation: { signing_address: `0x${'0'.repeat(40)}` }, model_attestations: reports })
      }
      if (url.pathname === '/v1/chat/completions') {
        const modelKey = (request.headers.get('x-model-pub-key') ?? '').toLowerCase().replace(/^04/, '')
        const sim = order.find(candidate => [candidate.keys().ecdsa, candidate.keys().ed25519].some(pair => Buffer.from(pair.publicKey).toString('hex').endsWith(modelKey)))
        if (sim === undefined) return Response.json({ error: { message: 'no instance holds that key', type: 'bad_request' } }, { status: 400 })
        const headers = new Headers(request.headers)
        headers.set('authorization', simAuth(sim).authorization)
        headers.delete('host')
        headers.delete('content-length')
        const response = await fetch(`${sim.url}/chat/completions`, { method: 'POST', headers, body: await request.arrayBuffer() })
        return new Response(response.body, { status: response.status, headers: { 'content-type': response.headers.get('content-type') ?? 'application/json' } })
      }
      return new Response('not found', { status: 404 })
    },
  })
  t = await buildEncryptedProxyApp(a, `http://127.0.0.1:${aggregator.port}/v1`)
  key = (await t.createOrg()).adminKey
})

afterAll(async () => {
  await t.close()
  aggregator.stop(true)
  await a.stop()
  await b.stop()
})

async function addressOf(sim: SimTeeBackend, algo: 'ecdsa' | 'ed25519'): Promise<string> {
  const response = await fetch(`${sim.url}/attestation/report?signing_algo=${algo}&nonce=${'11'.repeat(32)}`, { headers: simAuth(sim) })
  return ((await response.json()) as { signing_address: string }).signing_address
}

async function chatThrough(sim: SimTeeBackend, algo: 'ecdsa' | 'ed25519', reorder: SimTeeBackend[]) {
  const address = await addressOf(sim, algo)
  const attested = await t.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=${algo}&signing_address=${address}`, { key })
  expect(attested.status).toBe(200)
  const attestation = (await attested.json()) as Attestation
  const ctx = contextFor(attestation, generateClientKeys(algo))
  const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages: [{ role: 'user', content: `to ${address.slice(0, 10)}` }] }, ctx)
  order = reorder
  try {
    const response = await t.request('POST', '/v1/chat/completions', { key, body, headers })
    return { response, ctx, address }
  } finally {
    order = [a, b]
  }
}

describe('Encrypted chat through an aggregator of several instances', () => {
  for (const algo of ['ecdsa', 'ed25519'] as const) {
    test(`${algo}: each instance's key works, whatever order the aggregator lists them in`, async () => {
      for (const [sim, reorder] of [[a, [a, b]], [b, [a, b]], [a, [b, a]], [b, [b, a]]] as const) {
        const { response, ctx, address } = await chatThrough(sim, algo, [...reorder])
        const text = await response.text()
        expect({ status: response.status, text: response.status === 200 ? '' : text }).toEqual({ status: 200, text: '' })
        expect(decryptChatResponse(JSON.parse(text), ctx).choices[0].message.content).toBe(`echo: to ${address.slice(0, 10)}`)
        expect(sim.state.seen.at(-1)!.headers['x-model-pub-key']).toBeDefined()
      }
    })
  }

  test('a key no instance attests is still the 400 that asks the client to re-attest', async () => {
    const { response } = await chatThrough(b, 'ecdsa', [a])
    expect(response.status).toBe(400)
    expect(((await response.json()) as { error: { message: string } }).error.message).toContain('model key mismatch')
  })
})
