import { describe, expect, test } from 'bun:test'
import { ApiError } from '../../src/http/errors'
import { Lifecycle } from '../../src/observability/lifecycle'

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
})
