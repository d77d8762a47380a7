import { afterEach, describe, expect, test } from 'bun:test'
import { extractionApiError } from '../../src/documents/errors'
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

  test('past the memory budget with one job running, that job is killed and its document refused', async () => {
    let rss = 0
    const { pool, timers } = makePool({ size: 2, rss: () => rss })
    const alone = failure(pool.extract(job('hang')))
    await busy(pool, 1)
    timers.tick()
    expect(pool.stats().busy).toBe(1) // under budget: nothing happens
    rss = 5000
    timers.tick()
    const killed = await alone
    expect(killed.reason).toBe('invalid')
    expect(killed.message).toBe('the document needs more memory to read than this gateway allows')
  })

  test('with several jobs running, the newest is killed and told to retry (503), never blamed; the older keeps running', async () => {
    // QA: a legit PDF parsing for 1.5 s and a bomb sent 200 ms later; the watchdog killed the
    // longest-running job, the legit one, with a 400 blaming its document, and the bomb got a 200.
    let rss = 0
    const { pool, timers } = makePool({ size: 2, rss: () => rss })
    const older = failure(pool.extract(job('hang')))
    await busy(pool, 1)
    const newer = failure(pool.extract(job('hang')))
    await busy(pool, 2)
    rss = 5000
    timers.tick()
    const killed = await newer
    expect(killed.reason).toBe('overloaded')
    expect(killed.message).not.toContain('the document needs')
    const answer = extractionApiError(killed, { queueSize: 16, nowMs: 0 })
    expect(answer.status).toBe(503)
    expect(answer.headers?.['Retry-After']).toBe('1')
    expect(pool.stats()).toEqual({ workers: 2, busy: 1, queued: 0 })
    timers.expireAll()
    expect((await older).reason).toBe('timeout')
  })

  test('after a kill, a job still growing is left alone and refused at once when RSS climbs on', async () => {
    let rss = 0
    const { pool, timers } = makePool({ size: 2, rss: () => rss })
    const grower = failure(pool.extract(job('hang')))
    await busy(pool, 1)
    const bystander = failure(pool.extract(job('hang')))
    await busy(pool, 2)
    rss = 5000
    timers.tick()
    expect((await bystander).reason).toBe('overloaded')
    // RSS falls slowly after a kill: as long as it does not climb, the cooldown holds.
    timers.tick()
    expect(pool.stats().busy).toBe(1)
    // Before: a fixed 1 s cooldown while the grower went on growing.
    rss = 5000 + 64 * 1024 * 1024
    timers.tick()
    const refused = await grower
    expect(refused.reason).toBe('invalid')
    expect(refused.message).toContain('more memory')
  })

  test('no queued job starts during the cooldown, so each kill is among the jobs that ran at the last one', async () => {
    let rss = 0
    const { pool, timers } = makePool({ size: 2, rss: () => rss })
    const grower = failure(pool.extract(job('hang')))
    await busy(pool, 1)
    const bystander = failure(pool.extract(job('hang')))
    await busy(pool, 2)
    const queued = pool.extract(job('echo:queued'))
    rss = 5000
    timers.tick()
    expect((await bystander).reason).toBe('overloaded')
    // Before: the queued job took the freed worker at once, became the newest, and was the next victim.
    expect(pool.stats()).toEqual({ workers: 2, busy: 1, queued: 1 })
    const arriving = pool.extract(job('echo:arriving'))
    expect(pool.stats().queued).toBe(2)
    // The cooldown runs out with RSS still over: the grower, now alone, is refused.
    for (let tick = 0; tick < 40; tick++) timers.tick()
    expect((await grower).reason).toBe('invalid')
    // Under the budget again, the queue runs.
    rss = 0
    timers.tick()
    expect((await queued).text).toBe('queued')
    expect((await arriving).text).toBe('arriving')
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
