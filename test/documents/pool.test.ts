import { afterEach, describe, expect, test } from 'bun:test'
import { WorkerExtractorPool, type PoolTimers } from '../../src/documents/pool'
import { ExtractionError } from '../../src/documents/types'
import { poll } from '../support/poll'

// Pool behaviour with a scripted worker and hand-driven timers: timeouts and the memory
// watchdog fire when the test says so, never after a sleep.

class ManualTimers implements PoolTimers {
  private next = 1
  readonly timeouts = new Map<number, () => void>()
  readonly intervals = new Map<number, () => void>()
  setTimeout(callback: () => void): unknown {
    const handle = this.next++
    this.timeouts.set(handle, callback)
    return handle
  }
  clearTimeout(handle: unknown): void {
    this.timeouts.delete(handle as number)
  }
  setInterval(callback: () => void): unknown {
    const handle = this.next++
    this.intervals.set(handle, callback)
    return handle
  }
  clearInterval(handle: unknown): void {
    this.intervals.delete(handle as number)
  }
  /** Fires every pending timeout (each job's deadline). */
  expireAll(): void {
    const due = [...this.timeouts.values()]
    this.timeouts.clear()
    for (const callback of due) callback()
  }
  tick(): void {
    for (const callback of [...this.intervals.values()]) callback()
  }
}

const WORKER = new URL('./scripted.worker.ts', import.meta.url).href
const LIMITS = { maxTextBytes: 1024, zip: { maxEntries: 10, maxInflatedBytes: 1024, maxRatio: 10 }, pdf: { maxPages: 1, maxObjects: 10, maxNesting: 10 } }
const pools: WorkerExtractorPool[] = []

function makePool(options: { size: number; queueSize?: number; rss?: () => number }) {
  const timers = new ManualTimers()
  const pool = new WorkerExtractorPool({ size: options.size, queueSize: options.queueSize ?? 16, timeoutMs: 10_000, memoryBudgetBytes: 1000, limits: LIMITS, workerUrl: WORKER, timers, rss: options.rss ?? (() => 0) })
  pools.push(pool)
  return { pool, timers }
}

const job = (command: string) => ({ bytes: new TextEncoder().encode(command) })
const failure = (promise: Promise<unknown>) => promise.then(() => { throw new Error('expected a failure') }, (error: unknown) => error as ExtractionError)
/** Waits (polling real I/O, not a timer) until the pool reports `busy` running jobs. */
const busy = (pool: WorkerExtractorPool, count: number) => poll(`${count} busy`, 400, 10, () => (pool.stats().busy === count ? true : undefined))

afterEach(async () => {
  for (const pool of pools.splice(0)) await pool.close()
})

describe('WorkerExtractorPool', () => {
  test('runs concurrent jobs on at most `size` workers, each answer to its own caller', async () => {
    const { pool } = makePool({ size: 2 })
    const results = await Promise.all(Array.from({ length: 6 }, (_, index) => pool.extract(job(`echo:doc ${index}`))))
    expect(results.map(result => result.text)).toEqual(['doc 0', 'doc 1', 'doc 2', 'doc 3', 'doc 4', 'doc 5'])
    expect(pool.stats()).toEqual({ workers: 2, busy: 0, queued: 0 })
  })

  test('a job past its deadline fails with `timeout`; its worker is replaced and the pool keeps serving', async () => {
    const { pool, timers } = makePool({ size: 1 })
    const stuck = failure(pool.extract(job('hang')))
    const waiting = pool.extract(job('echo:after the hang'))
    expect(pool.stats()).toEqual({ workers: 1, busy: 1, queued: 1 })
    timers.expireAll()
    expect((await stuck).reason).toBe('timeout')
    expect((await waiting).text).toBe('after the hang')
    expect(pool.stats().workers).toBe(1)
  })

  test('a crashing worker fails only its own job; the job beside it keeps running', async () => {
    const { pool, timers } = makePool({ size: 2 })
    const stuck = failure(pool.extract(job('hang')))
    const crash = await failure(pool.extract(job('crash')))
    expect(crash.reason).toBe('invalid')
    expect(crash.message).toContain('crashed')
    const exit = await failure(pool.extract(job('exit')))
    expect(exit.reason).toBe('invalid')
    // The replacement serves, while the hung job is still in its own worker.
    expect((await pool.extract(job('echo:still here'))).text).toBe('still here')
    expect(pool.stats()).toEqual({ workers: 2, busy: 1, queued: 0 })
    timers.expireAll()
    expect((await stuck).reason).toBe('timeout')
  })

  test('a full queue refuses at once with `busy` (never unbounded memory)', async () => {
    const { pool, timers } = makePool({ size: 1, queueSize: 2 })
    const running = failure(pool.extract(job('hang')))
    const queued = [pool.extract(job('echo:one')), pool.extract(job('echo:two'))]
    const refused = await failure(pool.extract(job('echo:three')))
    expect(refused.reason).toBe('busy')
    expect(pool.stats()).toEqual({ workers: 1, busy: 1, queued: 2 })
    timers.expireAll()
    expect((await running).reason).toBe('timeout')
    expect((await Promise.all(queued)).map(result => result.text)).toEqual(['one', 'two'])
  })

  test('past the memory budget the watchdog kills the longest-running job, not the newer one', async () => {
    let rss = 0
    const { pool, timers } = makePool({ size: 2, rss: () => rss })
    const older = failure(pool.extract(job('hang')))
    await busy(pool, 1)
    const newer = failure(pool.extract(job('hang')))
    await busy(pool, 2)
    timers.tick()
    expect(pool.stats().busy).toBe(2) // under budget: nothing happens
    rss = 5000
    timers.tick()
    const killed = await older
    expect(killed.reason).toBe('invalid')
    expect(killed.message).toContain('more memory')
    expect(pool.stats()).toEqual({ workers: 2, busy: 1, queued: 0 })
    timers.expireAll()
    expect((await newer).reason).toBe('timeout')
  })

  test('the upload buffer is transferred, not copied; a view into a larger buffer is copied instead', async () => {
    const { pool } = makePool({ size: 1 })
    const owned = new TextEncoder().encode('echo:owned')
    const pending = pool.extract({ bytes: owned })
    expect(owned.byteLength).toBe(0) // detached: the worker owns it now
    expect((await pending).text).toBe('owned')
    const shared = new TextEncoder().encode('xxxxecho:view')
    const view = shared.subarray(4)
    expect((await pool.extract({ bytes: view })).text).toBe('view')
    expect(shared.byteLength).toBe(13)
  })

  test('a queued job whose caller left is dropped; close() fails what is left', async () => {
    const { pool } = makePool({ size: 1 })
    const running = failure(pool.extract(job('hang')))
    const controller = new AbortController()
    const leaving = failure(pool.extract({ ...job('echo:never'), signal: controller.signal }))
    controller.abort(new Error('client left'))
    expect((await leaving).message).toBe('client left')
    expect(pool.stats().queued).toBe(0)
    await pool.close()
    expect((await running).reason).toBe('closed')
    expect((await failure(pool.extract(job('echo:late')))).reason).toBe('closed')
  })
})
