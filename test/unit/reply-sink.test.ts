import { afterEach, describe, expect, test } from 'bun:test'
import net from 'node:net'
import { KeepAlive, STALL_TICKS, type TickerTimers } from '../../src/http/keep-alive'
import type { ChatEvent } from '../../src/inference/canonical'
import { ChatCompletionsStreamEncoder } from '../../src/inference/dialects/chat-completions/encode-stream'
import { streamResponse, type StreamOutcome } from '../../src/inference/stream-response'
import { poll } from '../support/poll'

// A live reply sent by Bun's server is a direct stream (src/inference/reply-sink.ts): writes go
// to the socket as they are, and a write that finds the socket full returns a promise the pump
// waits for. These tests serve streamResponse over a real socket, to a raw client.

const meta = { id: 'chatcmpl-test', model: 'm', createdAt: 1, includeUsage: false, estimatedInputTokens: 1 }
const handTimers: TickerTimers = { setInterval: () => 0, clearInterval: () => {} }

/** An upstream with output for ever, one event per turn; `gate` holds the events from `gateAt` on. */
function endless(gateAt = Infinity) {
  const state = { produced: 0, returned: 0 }
  let open: () => void = () => {}
  const gate = new Promise<void>(resolve => (open = resolve))
  const events: AsyncIterable<ChatEvent> = {
    [Symbol.asyncIterator]: () => ({
      next: async () => {
        if (state.produced === gateAt) await gate
        await new Promise(resolve => setImmediate(resolve))
        state.produced += 1
        return { done: false, value: { type: 'text-delta', block: 0, delta: `${state.produced}:${'x'.repeat(4000)}` } }
      },
      return: async () => {
        state.returned += 1
        return { done: true, value: undefined }
      },
    }),
  }
  return { events, state, open }
}

let cleanup: Array<() => void> = []
afterEach(() => {
  for (const step of cleanup) step()
  cleanup = []
})

function serve(events: AsyncIterable<ChatEvent>, ticker: KeepAlive) {
  const outcomes: StreamOutcome[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 0,
    fetch: () =>
      streamResponse({
        events,
        encoder: new ChatCompletionsStreamEncoder(meta),
        observe: () => {},
        complete: async outcome => (outcomes.push(outcome), undefined),
        keepAlive: ticker,
      }),
  })
  cleanup.push(() => server.stop(true))
  return { server, outcomes }
}

/** A raw client that reads `stopAfter` bytes, then stops reading without closing. */
function client(port: number, stopAfter = Infinity) {
  const state = { received: '', paused: false, reset: false, closed: false }
  const socket = net.connect(port, '127.0.0.1')
  socket.on('data', data => {
    state.received += data.toString('latin1')
    if (state.received.length >= stopAfter && !state.paused) {
      state.paused = true
      socket.pause()
    }
  })
  socket.on('error', error => (state.reset = (error as NodeJS.ErrnoException).code === 'ECONNRESET'))
  socket.on('close', () => (state.closed = true))
  socket.write('GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n')
  cleanup.push(() => socket.destroy())
  return { state, socket }
}

describe('a live reply on a direct stream', () => {
  /** A stream whose first event is at the client while the next is held back; `open` lets the rest come. */
  async function firstEventOut(ticker: KeepAlive) {
    const { events, state, open } = endless(1)
    const { server } = serve(events, ticker)
    const reader = client(server.port!)
    await poll('the first event at the client', 2000, 5, () => (reader.state.received.includes('1:xxx') ? true : undefined))
    expect(state.produced).toBe(1)
    return {
      reader,
      async rest() {
        expect(state.produced).toBe(1)
        open()
        await poll('the next events at the client', 2000, 5, () => (reader.state.received.includes('3:xxx') ? true : undefined))
      },
    }
  }

  test('each event leaves as it comes: the first while the next is still held back', async () => {
    await (await firstEventOut(new KeepAlive(15_000, handTimers))).rest()
  })

  test('a client that stops reading holds the events back once the socket is full, and is cut after the stall ticks', async () => {
    const { events, state } = endless()
    const ticker = new KeepAlive(15_000, handTimers)
    const { server, outcomes } = serve(events, ticker)
    const reader = client(server.port!, 64 * 1024)
    // The events stop being read once the socket's buffers are full: the count settles.
    let last = -1
    await poll('the pump to wait on the full socket', 10_000, 50, () => {
      const settled = state.produced === last
      last = state.produced
      return settled && reader.state.paused ? true : undefined
    })
    expect(state.produced * 4000).toBeLessThan(64 * 1024 * 1024)
    // The first tick sees chunks taken since the stream began; the stall counts from there.
    ticker.tick()
    for (let tick = 1; tick < STALL_TICKS; tick++) ticker.tick()
    expect(outcomes).toEqual([])
    ticker.tick()
    await poll('the cut', 2000, 5, () => (outcomes.length > 0 && state.returned > 0 ? true : undefined))
    expect(outcomes).toEqual(['cancelled'])
    expect(ticker.size).toBe(0)
    reader.socket.resume()
    await poll('the connection to close', 2000, 5, () => (reader.state.closed ? true : undefined))
    expect(reader.state.reset).toBe(true)
    expect(reader.state.received).not.toContain('[DONE]')
  }, 20_000)

  test('a quiet stream is pinged over the socket, from the ticker, between events', async () => {
    const ticker = new KeepAlive(15_000, handTimers)
    const { reader, rest } = await firstEventOut(ticker)
    for (let tick = 0; tick < 4; tick++) ticker.tick()
    await poll('the ping at the client', 2000, 5, () => (reader.state.received.includes(': ping\n\n') ? true : undefined))
    await rest()
  })

  test('a client that leaves ends the call as a cancel, once, and the upstream iterator is returned', async () => {
    const { events, state } = endless()
    const { server, outcomes } = serve(events, new KeepAlive(15_000, handTimers))
    const reader = client(server.port!)
    await poll('some events at the client', 2000, 5, () => (reader.state.received.includes('5:xxx') ? true : undefined))
    reader.socket.destroy()
    await poll('the cancel', 2000, 5, () => (outcomes.length > 0 && state.returned > 0 ? true : undefined))
    expect(outcomes).toEqual(['cancelled'])
  })
})
