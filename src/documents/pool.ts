import type { ResultMessage } from './extract.worker'
import { ExtractionError, type DocumentType, type Extraction, type ExtractionLimits, type ExtractorPool } from './types'

/** Timer functions the pool uses; tests pass hand-driven ones instead of sleeping. */
export interface PoolTimers {
  setTimeout(callback: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
  setInterval(callback: () => void, ms: number): unknown
  clearInterval(handle: unknown): void
}

const realTimers: PoolTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: handle => clearTimeout(handle as ReturnType<typeof setTimeout>),
  setInterval: (callback, ms) => setInterval(callback, ms),
  clearInterval: handle => clearInterval(handle as ReturnType<typeof setInterval>),
}

export interface WorkerPoolOptions {
  /** Worker count (config `documents.workers`; default CPU cores). */
  size: number
  /** Jobs that may wait for a worker; one more is refused with ExtractionError('busy'). */
  queueSize: number
  timeoutMs: number
  /** Process RSS past which the watchdog kills a job's worker (checkMemory says which). */
  memoryBudgetBytes: number
  limits: ExtractionLimits
  /** The worker script (tests swap in a scripted one). */
  workerUrl?: string
  timers?: PoolTimers
  /** The process's resident memory (the main thread's RSS includes its workers'). */
  rss?: () => number
  watchdogIntervalMs?: number
  /** Told why a worker died (for the log; never document content). */
  onWorkerError?: (message: string) => void
}

interface Job {
  id: number
  buffer: ArrayBuffer
  resolve(result: Extraction): void
  reject(error: Error): void
  timer?: unknown
  signal?: AbortSignal
  onAbort?: () => void
}

interface Slot {
  worker: Worker
  job: Job | undefined
  startedSeq: number
}

/**
 * The worker script. From source it sits beside this file. In the compiled binary every module is
 * bundled into the root entry (`/$bunfs/root/svc`) and the worker, its own entrypoint in
 * build.ts, is embedded as `documents/extract.worker.js` under the common source root (src/).
 */
function defaultWorkerUrl(): string {
  if (import.meta.url.includes('$bunfs')) return new URL('./documents/extract.worker.js', import.meta.url).href
  return new URL('./extract.worker.ts', import.meta.url).href
}
// After a watchdog kill, RSS takes a while to fall: wait this many ticks before judging again,
// unless it climbs this far past where it stood at the kill (a kill never makes it climb).
const WATCHDOG_COOLDOWN_TICKS = 40
const WATCHDOG_CLIMB_BYTES = 32 * 1024 * 1024

/**
 * The extractor pool (ARCHITECTURE.md §6): Bun Workers started on demand up to `size`, fed by
 * transferring each upload's ArrayBuffer, with a bounded queue. Bun ignores Worker
 * `resourceLimits`, so each job has a deadline and an RSS watchdog watches memory; a worker
 * that crashes, times out or passes the budget is terminated and replaced, and its job fails
 * while the others keep running. Extraction never runs on the server's event loop.
 */
export class WorkerExtractorPool implements ExtractorPool {
  private readonly slots: Slot[] = []
  private readonly queue: Job[] = []
  private readonly timers: PoolTimers
  private readonly workerUrl: string
  private nextId = 1
  private sequence = 0
  private watchdog: unknown
  private cooldown = 0
  private rssAtKill = 0
  private closed = false

  constructor(private readonly options: WorkerPoolOptions) {
    this.timers = options.timers ?? realTimers
    this.workerUrl = options.workerUrl ?? defaultWorkerUrl()
  }

  extract(input: { bytes: Uint8Array; filename?: string; signal?: AbortSignal }): Promise<Extraction> {
    if (this.closed) return Promise.reject(new ExtractionError('closed', 'the document extractor is shutting down'))
    if (input.signal?.aborted) return Promise.reject(input.signal.reason ?? new DOMException('aborted', 'AbortError'))
    // No job starts while the watchdog cools down: it judges only the jobs that ran at the kill.
    const idle = this.cooldown > 0 ? undefined : this.idleSlot()
    if (!idle && this.queue.length >= this.options.queueSize) {
      return Promise.reject(new ExtractionError('busy', 'the document extractor is at capacity; retry shortly'))
    }
    // Transfer only a buffer the bytes own whole: a view into a shared one (Buffer's pool, a
    // larger body) is copied, so transferring never detaches memory anyone else reads.
    const { bytes } = input
    const owned = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer
    const buffer = owned ? (bytes.buffer as ArrayBuffer) : bytes.slice().buffer
    return new Promise<Extraction>((resolve, reject) => {
      const job: Job = { id: this.nextId++, buffer, resolve, reject, signal: input.signal }
      if (idle) return this.dispatch(idle, job)
      this.queue.push(job)
      if (job.signal) {
        job.onAbort = () => {
          const at = this.queue.indexOf(job)
          if (at >= 0) this.queue.splice(at, 1)
          job.reject(job.signal!.reason ?? new DOMException('aborted', 'AbortError'))
        }
        job.signal.addEventListener('abort', job.onAbort, { once: true })
      }
    })
  }

  stats(): { workers: number; busy: number; queued: number } {
    return { workers: this.slots.length, busy: this.slots.filter(slot => slot.job).length, queued: this.queue.length }
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    const closing = new ExtractionError('closed', 'the document extractor is shutting down')
    for (const job of this.queue.splice(0)) this.finish(job, undefined, closing)
    for (const slot of this.slots.splice(0)) {
      const job = slot.job
      slot.job = undefined
      slot.worker.terminate()
      if (job) this.finish(job, undefined, closing)
    }
    this.stopWatchdog()
  }

  /** An idle worker, starting a new one while the pool is below its size. */
  private idleSlot(): Slot | undefined {
    const idle = this.slots.find(slot => !slot.job)
    if (idle || this.slots.length >= this.options.size) return idle
    const slot: Slot = { worker: undefined as unknown as Worker, job: undefined, startedSeq: 0 }
    this.spawn(slot)
    this.slots.push(slot)
    return slot
  }

  private spawn(slot: Slot): void {
    const worker = new Worker(this.workerUrl)
    slot.worker = worker
    // Idle workers never keep the process alive; a busy one does (ref'd in dispatch).
    worker.unref()
    worker.addEventListener('message', (event: MessageEvent<ResultMessage>) => {
      if (slot.worker !== worker || !slot.job || slot.job.id !== event.data.id) return
      const job = slot.job
      const data = event.data
      slot.job = undefined
      worker.unref()
      if (data.ok) this.finish(job, { text: data.text, documentType: data.documentType as DocumentType })
      else this.finish(job, undefined, new ExtractionError(data.reason, data.message))
      this.next(slot)
    })
    // An uncaught exception or an exit inside the worker: it is not trusted again.
    const crashed = (event: Event) => {
      if (slot.worker !== worker) return
      const detail = event.type === 'error' ? (event as ErrorEvent).message : `exit code ${(event as unknown as { code?: number }).code}`
      this.options.onWorkerError?.(`extraction worker ${event.type}: ${detail}`)
      if (slot.worker === worker) this.replace(slot, new ExtractionError('invalid', 'the document could not be read (the extractor crashed on it)'))
    }
    worker.addEventListener('error', crashed)
    worker.addEventListener('close', crashed)
  }

  private dispatch(slot: Slot, job: Job): void {
    if (job.signal && job.onAbort) job.signal.removeEventListener('abort', job.onAbort)
    slot.job = job
    slot.startedSeq = ++this.sequence
    slot.worker.ref()
    job.timer = this.timers.setTimeout(() => {
      if (slot.job === job) this.replace(slot, new ExtractionError('timeout', `document extraction took longer than ${this.options.timeoutMs} ms`))
    }, this.options.timeoutMs)
    this.startWatchdog()
    slot.worker.postMessage({ id: job.id, buffer: job.buffer, limits: this.options.limits }, [job.buffer])
  }

  /** Terminates the slot's worker, fails its job, starts a fresh worker and feeds it. */
  private replace(slot: Slot, error: ExtractionError): void {
    const job = slot.job
    slot.job = undefined
    slot.worker.terminate()
    if (job) this.finish(job, undefined, error)
    if (this.closed) return
    this.spawn(slot)
    this.next(slot)
  }

  private next(slot: Slot): void {
    // During a cooldown the queue waits (the watchdog keeps ticking to end it).
    const job = this.cooldown > 0 ? undefined : this.queue.shift()
    if (job) this.dispatch(slot, job)
    else if (this.cooldown === 0 && !this.slots.some(other => other.job)) this.stopWatchdog()
  }

  private finish(job: Job, result: Extraction | undefined, error?: Error): void {
    if (job.timer !== undefined) this.timers.clearTimeout(job.timer)
    if (job.signal && job.onAbort) job.signal.removeEventListener('abort', job.onAbort)
    if (error) job.reject(error)
    else job.resolve(result!)
  }

  private startWatchdog(): void {
    if (this.watchdog !== undefined) return
    this.watchdog = this.timers.setInterval(() => this.checkMemory(), this.options.watchdogIntervalMs ?? 25)
    // A real interval must not keep the process alive on its own.
    ;(this.watchdog as { unref?: () => void }).unref?.()
  }

  private stopWatchdog(): void {
    if (this.watchdog === undefined) return
    this.timers.clearInterval(this.watchdog)
    this.watchdog = undefined
  }

  /**
   * One watchdog tick. Past the budget, RSS (the process's; a worker's own heap is readable only
   * from inside it, and not while a parser runs without yielding, as a bomb's inflate does) does
   * not say which job is growing. With one job running, that job is: its worker is killed and its
   * document refused. With several, the most recently started is killed (it has done the least
   * work) and told to retry, never blamed: a 503, since its document may well be the victim of
   * another's. Until the cooldown ends, no job starts, so a growing job left running ends up
   * alone and is refused at the next judgment; RSS climbing on past where it stood at the kill
   * means one is still growing, and cuts the cooldown short.
   */
  checkMemory(): void {
    const rss = (this.options.rss ?? (() => process.memoryUsage.rss()))()
    const over = rss > this.options.memoryBudgetBytes
    const cooling = this.cooldown > 0
    if (cooling && over && --this.cooldown > 0 && rss <= this.rssAtKill + WATCHDOG_CLIMB_BYTES) return
    const running = this.slots.filter(slot => slot.job)
    if (over && running.length > 0) {
      const newest = running.reduce((latest, slot) => (slot.startedSeq > latest.startedSeq ? slot : latest))
      this.cooldown = WATCHDOG_COOLDOWN_TICKS
      this.rssAtKill = rss
      this.replace(
        newest,
        running.length === 1
          ? new ExtractionError('invalid', 'the document needs more memory to read than this gateway allows')
          : new ExtractionError('overloaded', 'document extraction ran short of memory while reading several documents at once; retry shortly'),
      )
      return
    }
    if (cooling && (!over || this.cooldown === 0)) this.endCooldown()
  }

  /** Lets the queue run again after a cooldown. */
  private endCooldown(): void {
    this.cooldown = 0
    while (this.queue.length > 0) {
      const idle = this.idleSlot()
      if (!idle) break
      this.next(idle)
    }
    if (!this.slots.some(slot => slot.job)) this.stopWatchdog()
  }
}
