import { expect, test } from 'bun:test'
import { MAX_UNREAD_FRAMES } from '../../src/http/keep-alive'
import { ProgressFlow } from '../../src/mcp/progress-flow'

// One POST's SSE answer is read at the client's pace, and every tools/call of it that reports
// progress waits while the client is behind. A batch holds several such calls on one flow.

/** An SDK response of `frames` messages, and the flow's view of it as the client reads it. */
function served(flow: ProgressFlow, frames: number) {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let index = 0; index < frames; index++) controller.enqueue(new TextEncoder().encode(`data: ${index}\n\n`))
      controller.close()
    },
  })
  for (let index = 0; index < frames; index++) flow.notified()
  return flow.wrap(new Response(body, { headers: { 'content-type': 'text/event-stream' } })).body!.getReader()
}

test('every call waiting for a slow client is woken once it reads, not only the last one to wait', async () => {
  // Before: one waiter slot, so the second call of a batch to wait replaced the first, which then
  // waited for ever (QA: its upstream, its hold and its slot stayed taken after the client left).
  const flow = new ProgressFlow()
  const reader = served(flow, MAX_UNREAD_FRAMES + 2)
  const first = flow.ready()
  const second = flow.ready()
  expect(first).toBeInstanceOf(Promise)
  expect(second).toBeInstanceOf(Promise)
  for (let read = 0; read < 2; read++) await reader.read()
  expect(await Promise.all([first, second])).toEqual([true, true])
  expect(flow.ready()).toBeUndefined()
})

test('every waiting call learns that the client left', async () => {
  const flow = new ProgressFlow()
  const reader = served(flow, MAX_UNREAD_FRAMES + 2)
  const waiting = [flow.ready(), flow.ready(), flow.ready()]
  await reader.cancel()
  expect(await Promise.all(waiting)).toEqual([false, false, false])
  expect(await flow.ready()).toBe(false)
})
