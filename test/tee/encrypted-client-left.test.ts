import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { contextFor, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { createLogger } from '../../src/observability/logger'
import { startSimTeeBackend, type SimTeeBackend } from '../../src/tee/sim/server'
import type { TestApp } from '../support/harness'
import { buildEncryptedProxyApp } from '../support/tee'

// An Encrypted chat whose client leaves before its answer: nothing is charged and the request is
// logged 499 `cancelled`, as a plain chat's is. Before, a client that left during the pre-chat
// evidence fetch was still relayed and charged (its abort listener was added after the abort),
// and one that left during the backend call was logged as the backend's failure (502).

let sim: SimTeeBackend
let gatewayPath: ReturnType<typeof Bun.serve>
let t: TestApp
let key: string
const lines: string[] = []
/** The path to hold next (`/attestation/report` or `/chat/completions`): reached, then released. */
let hold: { path: string; reached: () => void; released: Promise<void> } | undefined
const chats: string[] = []

beforeAll(async () => {
  sim = startSimTeeBackend({ family: 'nearai' })
  // In front of the simulated backend: holds one request of a path until the test releases it.
  gatewayPath = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const url = new URL(request.url)
      const path = url.pathname.replace(/^\/v1/, '')
      if (path === '/chat/completions') chats.push(request.headers.get('x-request-id') ?? '')
      const held = hold?.path === path ? hold : undefined
      if (held !== undefined) {
        hold = undefined
        held.reached()
        await held.released
      }
      const headers = new Headers(request.headers)
      headers.delete('host')
      headers.delete('content-length')
      const response = await fetch(`${sim.url}${path}${url.search}`, { method: request.method, headers, body: request.method === 'POST' ? await request.arrayBuffer() : undefined })
      return new Response(response.body, { status: response.status, headers: { 'content-type': response.headers.get('content-type') ?? 'application/json' } })
    },
  })
  t = await buildEncryptedProxyApp(sim, `http://127.0.0.1:${gatewayPath.port}/v1`, 'tee', { logger: createLogger('info', line => lines.push(line)) })
  key = (await t.createOrg()).adminKey
})

afterAll(async () => {
  await t.close()
  gatewayPath.stop(true)
  await sim.stop()
})

const settled = async () => BigInt((await t.deps.database.client.execute("SELECT COALESCE(SUM(amount_nanos), 0) AS s FROM ledger_entries WHERE kind = 'settle'")).rows[0]!.s as bigint)

/** Sends an Encrypted chat whose request to `path` the backend holds until `release`; resolves once it is held there. */
async function sendHeldAt(path: string, stream: boolean, requestId: string) {
  const attestation = (await (await t.request('GET', '/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa', { key })).json()) as Attestation
  const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', stream, messages: [{ role: 'user', content: 'relay me' }] }, contextFor(attestation, generateClientKeys('ecdsa')))
  let release!: () => void
  const reached = new Promise<void>(resolve => (hold = { path, reached: resolve, released: new Promise<void>(done => (release = done)) }))
  const client = new AbortController()
  const request = new Request('http://localhost/v1/chat/completions', {
    method: 'POST',
    signal: client.signal,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId, ...headers },
    body: JSON.stringify(body),
  })
  const answered = t.app.handle(request).catch(() => undefined)
  await reached
  return { leave: () => client.abort(), release, answered }
}

const requestLine = (requestId: string) => JSON.parse(lines.find(line => line.includes(`"request_id":"${requestId}"`) && line.includes('"msg":"request"'))!)

/** Sends an Encrypted chat, holds `path` at the backend, lets the client leave there, then releases it. */
async function leaveAt(path: string, stream: boolean, requestId: string) {
  const { leave, release, answered } = await sendHeldAt(path, stream, requestId)
  leave()
  release()
  await answered
  await t.deps.keys.idle()
  return requestLine(requestId)
}

describe('an Encrypted chat whose client leaves', () => {
  for (const stream of [false, true]) {
    test(`during the pre-chat evidence fetch${stream ? ' (streamed)' : ''}: no backend call, nothing charged, logged 499`, async () => {
      const before = await settled()
      const id = `left-evidence-${stream}`
      const line = await leaveAt('/attestation/report', stream, id)
      expect([line.status, line.outcome]).toEqual([499, 'cancelled'])
      expect(chats).not.toContain(id)
      expect(await settled()).toBe(before)
      expect(t.deps.limits.concurrency.totalInUse).toBe(0)
    })
  }

  test('during a held evidence fetch: its slot and reservation are free at once, the line names model and backend', async () => {
    const held = () => t.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)
    const { leave, release, answered } = await sendHeldAt('/attestation/report', false, 'left-held-evidence')
    // A watchdog, not a timing: the relay answers on the abort; before, only once the fetch ended.
    let fetchEndedFirst = false
    const watchdog = setTimeout(() => {
      fetchEndedFirst = true
      release()
    }, 3000)
    try {
      // Held meanwhile: the org's slot and the reservation.
      expect([t.deps.limits.concurrency.totalInUse, held() > 0n]).toEqual([1, true])
      leave()
      await answered
      expect(fetchEndedFirst).toBe(false)
      expect([t.deps.limits.concurrency.totalInUse, held()]).toEqual([0, 0n])
    } finally {
      clearTimeout(watchdog)
      release()
    }
    await t.deps.keys.idle()
    const line = requestLine('left-held-evidence')
    expect([line.status, line.outcome, line.model, line.backend]).toEqual([499, 'cancelled', 'sim:encrypted', 'attested:tee/sim/echo-1'])
    expect(chats).not.toContain('left-held-evidence')
  })

  test('during the backend call: nothing charged, logged 499 cancelled, not the backend failing', async () => {
    const before = await settled()
    const line = await leaveAt('/chat/completions', false, 'left-chat')
    expect([line.status, line.outcome]).toEqual([499, 'cancelled'])
    expect(await settled()).toBe(before)
    expect(t.deps.limits.concurrency.totalInUse).toBe(0)
    // Nobody was refused anything: no client-gone call counts as an `unavailable` refusal.
    expect(t.deps.metrics.registry.render()).not.toContain('svc_refusals_total{code="unavailable"}')
  })
})
