import { describe, expect, test } from 'bun:test'
import { KeepAlive, queuedIn, STALL_TICKS, type TickerTimers } from '../../src/http/keep-alive'
import type { ChatEvent } from '../../src/inference/canonical'
import { ChatCompletionsStreamEncoder } from '../../src/inference/dialects/chat-completions/encode-stream'
import { streamResponse, type StreamOutcome } from '../../src/inference/stream-response'

/** Timers driven by hand: the test calls the ticker's tick() itself. */
function handTimers() {
  const state = { started: 0, cleared: 0, running: false, everyMs: 0 }
  const timers: TickerTimers = {
    setInterval: (_callback, ms) => {
      state.started += 1
      state.running = true
      state.everyMs = ms
      return state.started
    },
    clearInterval: () => {
      state.cleared += 1
      state.running = false
    },
  }
  return { state, timers }
}

const meta = { id: 'chatcmpl-test', model: 'm', createdAt: 1, includeUsage: false, estimatedInputTokens: 1 }

/** A Chat Completions stream of `events` watched by `keepAlive`; `outcomes` records each settlement. */
async function settledStream(events: AsyncIterable<ChatEvent>, keepAlive: KeepAlive, readInProcess = false) {
  const outcomes: StreamOutcome[] = []
  const response = await streamResponse({
    events,
    encoder: new ChatCompletionsStreamEncoder(meta),
    observe: () => {},
    complete: async outcome => {
      outcomes.push(outcome)
      return undefined
    },
    keepAlive,
    readInProcess,
  })
  return { response, outcomes }
}

describe('KeepAlive: one shared ticker for every stream', () => {
  test('one timer for many streams, ticking every third of the quiet period; stopped at the first tick with nothing to watch', () => {
    const { state, timers } = handTimers()
    const ticker = new KeepAlive(15_000, timers)
    const a = ticker.watch(() => {})
    const b = ticker.watch(() => {})
    expect(state).toMatchObject({ started: 1, running: true, everyMs: 5_000 })
    ticker.stop(a)
    ticker.stop(b)
    expect(state.running).toBe(true) // not cleared per stream
    ticker.tick()
    expect(state).toMatchObject({ cleared: 1, running: false })
    ticker.watch(() => {})
    expect(state).toMatchObject({ started: 2, running: true })
  })

  test('a quiet stream is pinged after three silent ticks (15–20 s), then every three ticks; a writing one never', () => {
    const { timers } = handTimers()
    const ticker = new KeepAlive(15_000, timers)
    let quietPings = 0
    let busyPings = 0
    ticker.watch(() => (quietPings += 1))
    const busy = ticker.watch(() => (busyPings += 1))
    const pingsAfter: number[] = []
    for (let tick = 1; tick <= 10; tick++) {
      busy.wrote = true
      ticker.tick()
      pingsAfter.push(quietPings)
    }
    // Tick 1 sees the registration (a write); ticks 2, 3, 4 are silent: ping at 4, then 7, 10.
    expect(pingsAfter).toEqual([0, 0, 0, 1, 1, 1, 2, 2, 2, 3])
    expect(busyPings).toBe(0)
  })

  test('a write restarts the count; a stopped stream is not pinged; a ping that throws unregisters the stream', () => {
    const { timers } = handTimers()
    const ticker = new KeepAlive(15_000, timers)
    let pings = 0
    const stream = ticker.watch(() => (pings += 1))
    ticker.tick() // the registration
    ticker.tick()
    ticker.tick()
    stream.wrote = true
    ticker.tick()
    ticker.tick()
    ticker.tick()
    expect(pings).toBe(0)
    ticker.tick()
    expect(pings).toBe(1)
    ticker.stop(stream)
    for (let tick = 0; tick < 6; tick++) ticker.tick()
    expect(pings).toBe(1)

    ticker.watch(() => {
      throw new TypeError('controller closed')
    })
    expect(ticker.size).toBe(1)
    for (let tick = 0; tick < 4; tick++) ticker.tick()
    expect(ticker.size).toBe(0)
  })
})

describe('streamResponse keep-alive', () => {
  /** Events that never come until the stream is cancelled (a long time to first token). */
  function silentEvents() {
    const state = { returned: 0 }
    let release: (() => void) | undefined
    const events: AsyncIterable<ChatEvent> = {
      [Symbol.asyncIterator]: () => ({
        next: () => new Promise<IteratorResult<ChatEvent>>(resolve => (release = () => resolve({ done: true, value: undefined }))),
        return: async () => {
          state.returned += 1
          release?.()
          return { done: true, value: undefined }
        },
      }),
    }
    return { events, state }
  }

  test('a silent stream gets ": ping" from the shared ticker; cancelling settles once as cancelled and stops watching it', async () => {
    const { timers } = handTimers()
    const ticker = new KeepAlive(15_000, timers)
    const { events, state } = silentEvents()
    const { response, outcomes } = await settledStream(events, ticker)
    const reader = response.body!.getReader()
    const text = async () => new TextDecoder().decode((await reader.read()).value)
    expect(await text()).toContain('"role":"assistant"')
    expect(ticker.size).toBe(1)
    for (let tick = 0; tick < 4; tick++) ticker.tick()
    expect(await text()).toBe(': ping\n\n')
    await reader.cancel()
    expect(outcomes).toEqual(['cancelled'])
    // The upstream was closed once: the pull still waiting on it when the client left writes nothing more.
    await new Promise(resolve => setImmediate(resolve)) // let that pull run on
    expect(state.returned).toBe(1)
    expect(ticker.size).toBe(0)
  })

  test('a finished stream stops being watched before its terminal frames', async () => {
    const { timers } = handTimers()
    const ticker = new KeepAlive(15_000, timers)
    async function* events(): AsyncGenerator<ChatEvent> {
      yield { type: 'text-delta', block: 0, delta: 'hi' }
      yield { type: 'finish', reason: 'stop', usage: { inputTokens: 1, outputTokens: 1 } } as ChatEvent
    }
    let watchedAtSettlement = -1
    const response = await streamResponse({
      events: events(),
      encoder: new ChatCompletionsStreamEncoder(meta),
      observe: () => {},
      complete: async () => {
        watchedAtSettlement = ticker.size
        return undefined
      },
      keepAlive: ticker,
    })
    const body = await response.text()
    expect(body).toContain('"content":"hi"')
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true)
    expect(watchedAtSettlement).toBe(0)
  })
})

describe('KeepAlive: a reader that stops taking chunks', () => {
  /** A stream the test fills by hand, watched for stalls; `cuts` counts the ticker's cuts. */
  function watchedStream(ticker: KeepAlive) {
    let controller!: ReadableStreamDefaultController<Uint8Array>
    const stream = new ReadableStream<Uint8Array>({ start: c => void (controller = c) })
    const state = { cuts: 0 }
    const watched = ticker.watch(
      () => {
        controller.enqueue(new Uint8Array([58]))
        watched.enqueued += 1
      },
      { queued: queuedIn(controller), cut: () => (state.cuts += 1) },
    )
    const write = () => {
      controller.enqueue(new Uint8Array(16))
      watched.wrote = true
      watched.enqueued += 1
    }
    return { stream, state, write }
  }

  test(`cut at the ${STALL_TICKS}th tick in a row where chunks waited and none was taken, and not watched after`, () => {
    const ticker = new KeepAlive(15_000, handTimers().timers)
    const { state, write } = watchedStream(ticker)
    write()
    const cutsAfter: number[] = []
    for (let tick = 1; tick <= STALL_TICKS + 3; tick++) {
      ticker.tick()
      cutsAfter.push(state.cuts)
    }
    expect(cutsAfter).toEqual([0, 0, 0, 0, 0, 1, 1, 1, 1])
    expect(ticker.size).toBe(0)
  })

  test('a slow reader that takes a chunk now and then, or one waiting on an empty queue, is never cut', async () => {
    const ticker = new KeepAlive(15_000, handTimers().timers)
    const slow = watchedStream(ticker)
    const reader = slow.stream.getReader()
    const waiting = watchedStream(ticker)
    const waitingReader = waiting.stream.getReader()
    // Always waiting for a chunk (taking the pings): the source is silent, not the reader.
    void (async () => {
      while (!(await waitingReader.read()).done);
    })()
    for (let tick = 1; tick <= 40; tick++) {
      slow.write()
      slow.write()
      // The slow reader takes one chunk every fifth tick: its queue only grows, yet it reads.
      if (tick % STALL_TICKS === STALL_TICKS - 1) await reader.read()
      ticker.tick()
    }
    expect(slow.state.cuts).toBe(0)
    expect(waiting.state.cuts).toBe(0)
    expect(ticker.size).toBe(2)
  })
})

describe('streamResponse and a client that stops reading', () => {
  test('the stream is cut: settled once as cancelled, the upstream iterator ended, the body errored', async () => {
    const ticker = new KeepAlive(15_000, handTimers().timers)
    const state = { returned: 0, produced: 0 }
    // An upstream with output for ever.
    const events: AsyncIterable<ChatEvent> = {
      [Symbol.asyncIterator]: () => ({
        next: async () => {
          await new Promise(resolve => setImmediate(resolve))
          state.produced += 1
          return { done: false, value: { type: 'text-delta', block: 0, delta: 'x'.repeat(100) } }
        },
        return: async () => {
          state.returned += 1
          return { done: true, value: undefined }
        },
      }),
    }
    // Read in process (the reply-sink's reader stream): a socket's stall is in reply-sink.test.ts.
    const { response, outcomes } = await settledStream(events, ticker, true)
    const reader = response.body!.getReader()
    await reader.read() // the start frames; then the client reads nothing more
    await new Promise(resolve => setImmediate(resolve))
    await new Promise(resolve => setImmediate(resolve))
    // Backpressure: with the reader idle, the stream holds one chunk and pulls no more events.
    const produced = state.produced
    expect(produced).toBeLessThanOrEqual(2)
    for (let tick = 0; tick < STALL_TICKS; tick++) ticker.tick()
    await new Promise(resolve => setImmediate(resolve))
    expect(outcomes).toEqual(['cancelled'])
    expect(state.returned).toBe(1)
    expect(state.produced).toBe(produced)
    expect(ticker.size).toBe(0)
    await expect(reader.read()).rejects.toBeUndefined()
  })
})
