import { afterEach, beforeEach, expect, test } from 'bun:test'
import { createLogger } from '../../src/observability/logger'
import { poll } from '../support/poll'
import { answer, buildFusionHarness, fusionEntries, USER_MESSAGES, type FusionHarness } from './support'

// A client that leaves ends every part still running: the upstream calls are cancelled, the
// reservations released (nothing charged), the concurrency slots freed, and no judge is called.
// The run is logged as a chat the client left is (README, Metrics and logs): the request line
// `cancelled` (499 before the response; a stream with the 200 it sent), each part the leaving
// ended `cancelled` too, never an upstream failure. Before: a 200 with no outcome, and the cut
// participant and the judge that never ran logged `failed` with `provider_error`.

let h: FusionHarness
let lines: Array<Record<string, unknown>>
beforeEach(async () => {
  lines = []
  h = await buildFusionHarness({ logger: createLogger('info', line => lines.push(JSON.parse(line))) })
})
afterEach(async () => {
  await h.close()
})

function request(body: Record<string, unknown>, signal?: AbortSignal): Request {
  return new Request('http://localhost/api/v1/chat/fusion', {
    method: 'POST', signal, headers: { authorization: `Bearer ${h.org.adminKey}`, 'content-type': 'application/json', 'x-request-id': 'req-fusion-left' }, body: JSON.stringify(body),
  })
}

const partLine = (model: string) => lines.find(line => line.msg === 'chat' && line.purpose === 'fusion' && line.model === model)
const requestLine = () => lines.find(line => line.msg === 'request' && line.request_id === 'req-fusion-left')

/** Participant a answers, b stalls until the client leaves: a is charged, b cancelled, and no judge starts. */
async function expectLeftAfterOneAnswer(status: number) {
  const line = await poll('the request line', 200, 10, requestLine)
  expect(line).toMatchObject({ route: '/api/v1/chat/fusion', status, outcome: 'cancelled' })
  expect(partLine('a')).toMatchObject({ role: 'participant', outcome: 'ok' })
  expect(partLine('b')).toMatchObject({ outcome: 'cancelled', charged_nanos: '0' })
  expect(partLine('b')).not.toHaveProperty('error_code')
  // No judge starts once the client has left (QA: one was announced and logged, never called).
  expect(partLine('judge')).toBeUndefined()
  expect(h.judge.requests.length).toBe(0)
  // Only a's answer was charged, as before.
  expect((await fusionEntries(h.t)).length).toBe(1)
  const series = h.t.deps.metrics.registry.render()
  expect(series).toContain(`svc_http_requests_total{route="/api/v1/chat/fusion",method="POST",status="${status}"} 1`)
  expect(series).not.toContain('svc_refusals_total{')
}

async function expectEverythingEnded() {
  await Promise.all([h.a.requests[0]!.disconnected, h.b.requests[0]!.disconnected])
  // The parts end on the gateway's side once their upstream calls have unwound.
  await poll('the parts to release their slots', 100, 10, () => (h.t.deps.limits.concurrency.inUse(h.org.orgId) === 0 ? true : undefined))
  expect(h.judge.requests.length).toBe(0)
  expect(await fusionEntries(h.t)).toEqual([])
  expect(h.t.deps.limits.concurrency.inUse(h.org.orgId)).toBe(0)
  // Every part's deadline was cleared (no timer left behind).
  expect(h.deadlines.started.every(deadline => deadline.cleared)).toBe(true)
}

test('without stream: the request signal aborts every participant', async () => {
  h.a.enqueue({ kind: 'stall' })
  h.b.enqueue({ kind: 'stall' })
  const controller = new AbortController()
  const pending = h.t.app.handle(request({ models: ['a', 'b'], messages: USER_MESSAGES }, controller.signal))
  await Promise.all([h.a.request(0), h.b.request(0)])
  controller.abort()
  await pending.catch(() => undefined)
  await expectEverythingEnded()
})

test('with stream: cancelling the event stream aborts every participant', async () => {
  h.a.enqueue({ kind: 'stall' })
  h.b.enqueue({ kind: 'stall' })
  const response = await h.t.app.handle(request({ models: ['a', 'b'], messages: USER_MESSAGES, stream: true }))
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  const first = new TextDecoder().decode((await reader.read()).value)
  expect(first).toContain('event: participant.started')
  await Promise.all([h.a.request(0), h.b.request(0)])
  // QA: svc_open_streams counted chat streams only, not Fusion's.
  expect(h.t.deps.metrics.openStreams).toBe(1)
  await reader.cancel()
  await expectEverythingEnded()
  await poll('the stream to be counted out', 100, 10, () => (h.t.deps.metrics.openStreams === 0 ? true : undefined))
})

test('with stream: a run that ends leaves no open stream counted', async () => {
  h.a.enqueue(answer('A.'))
  h.b.enqueue(answer('B.'))
  h.judge.enqueue(answer('Both.'))
  const response = await h.t.app.handle(request({ models: ['a', 'b'], messages: USER_MESSAGES, stream: true }))
  expect(await response.text()).toContain('event: fusion.completion')
  await poll('the request line', 200, 10, requestLine)
  expect(h.t.deps.metrics.openStreams).toBe(0)
})

test('without stream: a client that leaves after one answer is logged 499 cancelled, its cut parts cancelled', async () => {
  h.a.enqueue(answer('A.'))
  h.b.enqueue({ kind: 'stall' })
  const controller = new AbortController()
  const pending = h.t.app.handle(request({ models: ['a', 'b'], messages: USER_MESSAGES }, controller.signal))
  await h.b.request(0)
  await poll("a's answer", 200, 10, () => partLine('a'))
  controller.abort()
  await pending.catch(() => undefined)
  await expectLeftAfterOneAnswer(499)
})

test('with stream: a client that leaves after one answer is logged cancelled with the 200 it was sent', async () => {
  h.a.enqueue(answer('A.'))
  h.b.enqueue({ kind: 'stall' })
  const response = await h.t.app.handle(request({ models: ['a', 'b'], messages: USER_MESSAGES, stream: true }))
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  let seen = ''
  while (!seen.includes('event: participant.finished')) seen += new TextDecoder().decode((await reader.read()).value)
  // The headers are out, the run is not: no line yet.
  expect(requestLine()).toBeUndefined()
  await reader.cancel()
  await expectLeftAfterOneAnswer(200)
})
