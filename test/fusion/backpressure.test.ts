import { afterEach, beforeEach, expect, test } from 'bun:test'
import { chunk, DONE, frame, openAIUsage } from '../providers/openai-wire'
import { poll } from '../support/poll'
import { answer, buildFusionHarness, USER_MESSAGES, type FusionHarness } from './support'

// A streamed Fusion run reads its judge's synthesis no faster than the client reads the events
// (README, Memory): the synthesis waits while 64 frames are unread. Before, every delta was
// queued in memory whatever the client's pace (QA: 117 MB pulled from a judge for a client that
// read nothing).

let h: FusionHarness
beforeEach(async () => {
  h = await buildFusionHarness()
})
afterEach(async () => {
  await h.close()
})

const DELTAS = 10_000
const PIECE = 'x'.repeat(8192)

test('a client that reads nothing holds the judge back; once it reads, the whole synthesis arrives', async () => {
  // 80 MB of synthesis, past what the sockets between the judge and the gateway can hold (at most
  // ~36 MB here: tcp_rmem 32 MiB + tcp_wmem 4 MiB).
  // A thenable every 50 deltas tells how far the judge's stream was read.
  let reached = 0
  const marker = (count: number) => ({ then: (resolve: () => void) => ((reached = count), resolve()) }) as unknown as Promise<unknown>
  const body: Array<string | Promise<unknown>> = [chunk({ role: 'assistant', content: '' })]
  for (let index = 1; index <= DELTAS; index++) {
    body.push(chunk({ content: PIECE }))
    if (index % 50 === 0) body.push(marker(index))
  }
  body.push(chunk({}, 'stop'), frame({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'j', choices: [], usage: openAIUsage({ inputTokens: 300, outputTokens: 2000 }) }), DONE)
  h.a.enqueue(answer('A.'))
  h.b.enqueue(answer('B.'))
  h.judge.enqueue({ kind: 'sse', body })
  const response = await h.fusion({ models: ['a', 'b'], messages: USER_MESSAGES, stream: true })
  expect(response.status).toBe(200)

  // Unread, the judge's stream stops being read well before its end (no progress for 10 polls).
  let seen = -1
  let still = 0
  await poll('the judge held back', 500, 20, () => {
    still = reached === seen && reached > 0 ? still + 1 : 0
    seen = reached
    return still >= 10 ? true : undefined
  })
  expect(reached).toBeLessThan(DELTAS / 2)

  // Read to the end: every delta, then the completion.
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let tail = ''
  let deltas = 0
  let last = ''
  for (let read = await reader.read(); !read.done; read = await reader.read()) {
    tail += decoder.decode(read.value, { stream: true })
    const blocks = tail.split('\n\n')
    tail = blocks.pop()!
    for (const block of blocks) if (block.startsWith('event: synthesis.delta')) deltas += 1
    last = blocks.findLast(block => block.startsWith('event: ')) ?? last
  }
  expect(deltas).toBe(DELTAS)
  expect(last).toStartWith('event: fusion.completion')
  expect(last).toContain('"status":"complete"')
  expect(reached).toBe(DELTAS)
}, 60_000)
