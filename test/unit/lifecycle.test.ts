import { describe, expect, test } from 'bun:test'
import { ApiError } from '../../src/http/errors'
import type { TickerTimers } from '../../src/http/keep-alive'
import { CLIENT_CHECK_MS, Lifecycle } from '../../src/observability/lifecycle'

/** A call that records the reasons it was aborted with. */
function call() {
  const reasons: unknown[] = []
  return { reasons, abort: (reason: ApiError) => void reasons.push(reason) }
}

describe('Lifecycle: the calls in flight', () => {
  test('abortAll reaches every call still tracked, and only those', () => {
    const lifecycle = new Lifecycle()
    const [a, b, c, d] = [call(), call(), call(), call()]
    for (const each of [a, b, c, d]) lifecycle.track(each)
    lifecycle.untrack(b)
    lifecycle.untrack(d)
    expect(lifecycle.inFlight).toBe(2)
    const reason = new ApiError('unavailable', 'shutting down')
    lifecycle.abortAll(reason)
    expect(a.reasons).toEqual([reason])
    expect(c.reasons).toEqual([reason])
    expect(b.reasons).toEqual([])
    expect(d.reasons).toEqual([])
  })

  test('untrack is idempotent, and idle() resolves when the last call ends', async () => {
    const lifecycle = new Lifecycle()
    const first = call()
    const second = call()
    lifecycle.track(first)
    lifecycle.track(second)
    let idle = false
    const waiting = lifecycle.idle().then(() => (idle = true))
    lifecycle.untrack(first)
    lifecycle.untrack(first)
    expect(lifecycle.inFlight).toBe(1)
    await Promise.resolve()
    expect(idle).toBe(false)
    lifecycle.untrack(second)
    await waiting
    expect(idle).toBe(true)
    expect(lifecycle.inFlight).toBe(0)
    // Tracking again after the last call ended works as before.
    const again = call()
    lifecycle.track(again)
    lifecycle.abortAll()
    expect(again.reasons).toHaveLength(1)
  })

  test('calls that untrack themselves when aborted are all reached and leave nothing in flight', () => {
    const lifecycle = new Lifecycle()
    const seen: string[] = []
    for (const name of ['x', 'y', 'z']) {
      const tracked = { abort: () => (seen.push(name), lifecycle.untrack(tracked)) }
      lifecycle.track(tracked)
    }
    lifecycle.abortAll()
    expect(seen.sort()).toEqual(['x', 'y', 'z'])
    expect(lifecycle.inFlight).toBe(0)
  })

  test("calls check their client on one shared tick, every CLIENT_CHECK_MS; the timer stops at the first tick with nothing in flight", () => {
    const state = { started: 0, cleared: 0, everyMs: 0 }
    const timers: TickerTimers = {
      setInterval: (_callback, ms) => ((state.started += 1), (state.everyMs = ms), state.started),
      clearInterval: () => void (state.cleared += 1),
    }
    const lifecycle = new Lifecycle(timers)
    const checks: string[] = []
    const client = (name: string) => ({ abort: () => {}, checkClient: () => void checks.push(name) })
    const [a, b] = [client('a'), client('b')]
    lifecycle.track(a)
    lifecycle.track(b)
    const drainOnly = call() // a call without a client is only the drain's
    lifecycle.track(drainOnly)
    expect(state).toEqual({ started: 1, cleared: 0, everyMs: CLIENT_CHECK_MS })
    lifecycle.tick()
    expect(checks).toEqual(['a', 'b'])
    lifecycle.untrack(a)
    lifecycle.tick()
    expect(checks).toEqual(['a', 'b', 'b'])
    lifecycle.untrack(b)
    lifecycle.untrack(drainOnly)
    // Nothing in flight: the next tick stops the timer, and the next call starts it again.
    lifecycle.tick()
    expect(state.cleared).toBe(1)
    lifecycle.track(client('c'))
    expect(state.started).toBe(2)
  })
})

