import { describe, expect, test } from 'bun:test'
import type { ChatEvent } from '../../src/inference/canonical'
import { collect } from '../../src/inference/collect'
import { ReplayedEvents } from '../../src/providers/replay'
import { UpstreamError } from '../../src/providers/types'

// A JSON answer's events (ReplayedEvents) are folded in one synchronous pass; a stream's through
// its iterator. Both must give the same result, and both stop at the call's abort.
const usage = { inputTokens: 9, outputTokens: 7, reasoningTokens: 2, webSearchRequests: 0, webFetchRequests: 0 }
const answer: ChatEvent[] = [
  { type: 'response-start', id: 'r', model: 'm', createdAt: 0 },
  { type: 'reasoning-start', block: 0 },
  { type: 'reasoning-delta', block: 0, delta: 'think' },
  { type: 'reasoning-end', block: 0, signature: 'sig' },
  { type: 'text-start', block: 1 },
  { type: 'text-delta', block: 1, delta: 'Hel' },
  { type: 'text-delta', block: 1, delta: 'lo' },
  { type: 'text-end', block: 1 },
  { type: 'tool-call-start', block: 2, callId: 'c1', name: 'time' },
  { type: 'tool-call-delta', block: 2, argumentsDelta: '{"tz":' },
  { type: 'tool-call-delta', block: 2, argumentsDelta: '"UTC"}' },
  { type: 'tool-call-end', block: 2 },
  { type: 'finish', reason: 'tool-calls', usage },
]

async function* streamed(events: ChatEvent[]): AsyncGenerator<ChatEvent> {
  for (const event of events) yield event
}

describe('collect', () => {
  test('a replayed JSON answer folds as the same events streamed, observing each once', async () => {
    const seen: ChatEvent[] = []
    const replayed = await collect(new ReplayedEvents(answer, new AbortController().signal), event => void seen.push(event))
    expect(replayed).toEqual(await collect(streamed(answer), () => {}))
    expect(seen).toEqual(answer)
    expect(replayed.text).toBe('Hello')
    expect(replayed.reasoning).toBe('think')
    expect(replayed.toolCalls).toEqual([{ type: 'tool-call', callId: 'c1', name: 'time', arguments: '{"tz":"UTC"}' }])
    expect(replayed.finishReason).toBe('tool-calls')
    expect(replayed.usage).toEqual(usage)
  })

  test('a replay whose call was aborted is cut, like an iterator that stopped', async () => {
    const aborted = new AbortController()
    aborted.abort()
    const seen: ChatEvent[] = []
    const result = await collect(new ReplayedEvents(answer, aborted.signal), event => void seen.push(event))
    expect(seen).toEqual([])
    expect(result.finishReason).toBe('error')
    expect(result.error?.message).toContain('ended before it finished')
  })

  test('an error event ends the fold with the error', async () => {
    const error = new UpstreamError('server', 'boom', 'p', 'm')
    const result = await collect(new ReplayedEvents([{ type: 'text-start', block: 0 }, { type: 'error', error }, { type: 'text-start', block: 1 }], new AbortController().signal), () => {})
    expect(result.error).toBe(error)
    expect(result.finishReason).toBe('error')
    expect(result.blocks).toHaveLength(1)
  })
})
