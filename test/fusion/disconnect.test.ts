import { afterEach, beforeEach, expect, test } from 'bun:test'
import { poll } from '../support/poll'
import { buildFusionHarness, fusionEntries, USER_MESSAGES, type FusionHarness } from './support'

// A client that leaves ends every part still running: the upstream calls are cancelled, the
// reservations released (nothing charged), the concurrency slots freed, and no judge is called.

let h: FusionHarness
beforeEach(async () => {
  h = await buildFusionHarness()
})
afterEach(async () => {
  await h.close()
})

function request(body: Record<string, unknown>, signal?: AbortSignal): Request {
  return new Request('http://localhost/api/v1/chat/fusion', {
    method: 'POST', signal, headers: { authorization: `Bearer ${h.org.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
  })
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
  await reader.cancel()
  await expectEverythingEnded()
})
