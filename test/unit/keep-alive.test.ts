import { describe, expect, test } from 'bun:test'
import { KeepAlive, type TickerTimers } from '../../src/http/keep-alive'
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
  const meta = { id: 'chatcmpl-test', model: 'm', createdAt: 1, includeUsage: false, estimatedInputTokens: 1 }

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
    const outcomes: StreamOutcome[] = []
    const response = await streamResponse({
      events,
      encoder: new ChatCompletionsStreamEncoder(meta),
      observe: () => {},
      complete: async outcome => {
        outcomes.push(outcome)
        return undefined
      },
      keepAlive: ticker,
    })
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
