import { afterEach, beforeEach, expect, test } from 'bun:test'
import { createLogger } from '../../src/observability/logger'
import { openAIWire } from '../providers/openai-wire'
import { FakeUpstream, type FakeResponse } from '../support/fake-upstream'
import { paygConfig, startServedGateway, upstreamProvider } from '../support/gateway'
import { type TestApp } from '../support/harness'
import { poll } from '../support/poll'

// A non-streamed chat whose client disconnects before the answer: the gateway must log it as a
// call its client left (outcome `cancelled`, status 499 "client closed request"), not as an
// upstream failure (502), charge nothing, and count no upstream error in the metrics. Over a
// real socket, so the client really leaves.

const CREDIT = 10_000_000_000n
let t: TestApp
let upstream: FakeUpstream
let lines: string[]
let gates: Array<() => void>
let base: string
let key: string
let orgId: string

beforeEach(async () => {
  upstream = await FakeUpstream.start()
  lines = []
  gates = []
  const yaml = paygConfig(
    [upstreamProvider('slow', 'openai-compatible', `${upstream.url}/v1`, 'SLOW_KEY')],
    ['  - { id: solo, backends: [{ provider: slow, model: model-a }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 16384, max_output_tokens: 2048 }'],
  )
  ;({ t, baseUrl: base, orgId, key } = await startServedGateway(yaml, { SLOW_KEY: 'sk-slow' }, { credit: CREDIT, overrides: { logger: createLogger('info', line => lines.push(line)) } }))
})

afterEach(async () => {
  for (const open of gates) open()
  await upstream.close()
  await t.close()
})

/** The request log line of `requestId`, once written. */
function requestLine(requestId: string): Promise<Record<string, unknown>> {
  return poll('the request log line', 500, 5, () => lines.map(line => JSON.parse(line)).find(line => line.msg === 'request' && line.request_id === requestId))
}

async function leaveBeforeTheAnswer(requestId: string, answer: FakeResponse, stream = false) {
  upstream.enqueue(answer)
  const client = new AbortController()
  const pending = fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    signal: client.signal,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model: 'solo', messages: [{ role: 'user', content: 'Answer in one piece' }], stream }),
  }).catch(error => error)
  const received = await upstream.request(0)
  client.abort()
  expect(await pending).toBeInstanceOf(Error)
  await received.disconnected
  return requestLine(requestId)
}

async function expectLeftNotFailed(line: Record<string, unknown>, stream = false) {
  expect(line).toMatchObject({ route: '/v1/chat/completions', status: 499, outcome: 'cancelled', model: 'solo', stream })
  expect(line.charged_nanos).toBeUndefined()
  expect((await t.deps.balance(orgId)).prepaidNanos).toBe(CREDIT)
  expect(t.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)).toBe(0n)
  expect(t.deps.limits.concurrency.inUse(orgId)).toBe(0)
  const metrics = t.deps.metrics.registry.render()
  expect(metrics).not.toContain('svc_upstream_errors_total{')
  expect(metrics).not.toContain('status="502"')
  expect(metrics).toContain('svc_http_requests_total{route="/v1/chat/completions",method="POST",status="499"} 1')
}

test('left while the answer is read: cancelled, 499, nothing charged, no upstream error', async () => {
  let open!: () => void
  gates.push(() => open())
  const held = new Promise<void>(resolve => (open = resolve))
  const line = await leaveBeforeTheAnswer('left-mid-answer', { kind: 'sse', body: [openAIWire.partial('Collected words that nobody will read'), held] })
  await expectLeftNotFailed(line)
})

test('left before the upstream answered at all: cancelled, 499, nothing charged, no upstream error', async () => {
  const line = await leaveBeforeTheAnswer('left-before-headers', { kind: 'stall' })
  await expectLeftNotFailed(line)
})

test('a streamed request left before the upstream answered: the same (no 200 was sent either)', async () => {
  const line = await leaveBeforeTheAnswer('stream-left-before-headers', { kind: 'stall' }, true)
  await expectLeftNotFailed(line, true)
})
