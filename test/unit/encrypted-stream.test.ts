import { describe, expect, test } from 'bun:test'
import { keepAlive, STALL_TICKS } from '../../src/http/keep-alive'
import { passthroughStream } from '../../src/inference/encrypted-stream'
import type { StreamOutcome } from '../../src/inference/stream-response'
import type { UpstreamStream } from '../../src/providers/openai-compatible/open-upstream-stream'

/** An attested backend's stream that sends `prefix`, then one line that never ends, until it is closed. */
function endlessLine(prefix: string) {
  const state = { sent: 0, closed: false }
  const piece = new TextEncoder().encode('A'.repeat(64 * 1024))
  async function* bytes(): AsyncGenerator<Uint8Array> {
    yield new TextEncoder().encode(`${prefix}data: {"choices":[{"delta":{"content":"`)
    while (!state.closed) {
      state.sent += piece.length
      yield piece
    }
  }
  const upstream = { bytes: bytes(), close: () => void (state.closed = true) } as unknown as UpstreamStream
  return { upstream, state }
}

describe('the Encrypted stream passthrough', () => {
  test('an event that never ends is cut past 16 MiB: the events before it pass, then one error event, settled as failed', async () => {
    const first = 'data: {"choices":[{"delta":{"content":"c2VhbGVk"}}]}\n\n'
    const { upstream, state } = endlessLine(first)
    const outcomes: StreamOutcome[] = []
    const observed: string[] = []
    const response = passthroughStream({
      upstream,
      headers: {},
      observe: data => observed.push(data),
      complete: async outcome => {
        outcomes.push(outcome)
        return undefined
      },
    })
    const text = await response.text()
    expect(text.startsWith(first)).toBe(true)
    const rest = text.slice(first.length)
    expect(rest.length).toBeLessThan(1024)
    expect(JSON.parse(rest.slice('data: '.length))).toMatchObject({ error: { code: 'provider_error', type: 'server_error' } })
    expect(observed).toHaveLength(1)
    expect(outcomes).toEqual(['failed'])
    expect(state.closed).toBe(true)
    expect(state.sent).toBeGreaterThan(16 * 1024 * 1024 - 64 * 1024)
    expect(state.sent).toBeLessThan(17 * 1024 * 1024)
  }, 10_000)
})

describe('the Encrypted stream passthrough and a client that stops reading', () => {
  test(`cut after ${STALL_TICKS} ticks without a read: settled once as cancelled, the backend closed, nothing more read from it`, async () => {
    const state = { sent: 0, closed: false }
    const event = new TextEncoder().encode('data: {"choices":[{"delta":{"content":"c2VhbGVk"}}]}\n\n')
    async function* bytes(): AsyncGenerator<Uint8Array> {
      while (!state.closed) {
        state.sent += 1
        yield event
      }
    }
    const upstream = { bytes: bytes(), close: () => void (state.closed = true) } as unknown as UpstreamStream
    const outcomes: StreamOutcome[] = []
    const response = passthroughStream({
      upstream,
      headers: {},
      observe: () => {},
      complete: async outcome => {
        outcomes.push(outcome)
        return undefined
      },
    })
    const reader = response.body!.getReader()
    await reader.read() // one event; then the client reads nothing more
    await new Promise(resolve => setImmediate(resolve))
    const sent = state.sent
    expect(sent).toBeLessThanOrEqual(2) // backpressure: one event waits in the queue
    // The first tick sees the read of the first event; the next STALL_TICKS see none.
    for (let tick = 0; tick <= STALL_TICKS; tick++) keepAlive.tick()
    await new Promise(resolve => setImmediate(resolve))
    expect(outcomes).toEqual(['cancelled'])
    expect(state.closed).toBe(true)
    expect(state.sent).toBe(sent)
    await expect(reader.read()).rejects.toBeUndefined()
  })
})
