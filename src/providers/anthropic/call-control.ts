import type { AbortCause } from './errors'

/**
 * One upstream call's cancellation: a single AbortController fired by the caller's signal
 * (client gone, pipeline deadline), by the connect deadline (no response headers in time), or
 * by the idle deadline (no body bytes in time while we wait for them). `cause` records which
 * fired first, because the resulting AbortError does not say.
 *
 * The idle deadline counts only time spent waiting on the upstream: while the consumer holds a
 * chunk (a slow client), the clock is paused. One timer is re-armed with `refresh()` per read,
 * so a long stream allocates no timer per chunk.
 */
export class CallControl {
  /** Which deadline or signal aborted the call, if any did. */
  cause: AbortCause | undefined
  private readonly controller = new AbortController()
  private readonly connectTimer: ReturnType<typeof setTimeout>
  private idleTimer: ReturnType<typeof setTimeout> | undefined
  private reading = false
  private completed = false
  private disposed = false
  private readonly onCallerAbort = () => this.abort('client')

  constructor(
    private readonly callerSignal: AbortSignal,
    private readonly timeouts: { readonly connectMs: number; readonly idleMs: number },
  ) {
    callerSignal.addEventListener('abort', this.onCallerAbort, { once: true })
    this.connectTimer = setTimeout(() => this.abort('connect-timeout'), timeouts.connectMs)
  }

  /** The signal for fetch and the body. */
  get signal(): AbortSignal {
    return this.controller.signal
  }

  /** Response headers arrived: the connect deadline is over, the idle deadline takes over. */
  headersReceived(): void {
    clearTimeout(this.connectTimer)
  }

  /** The body's chunks, each read under the idle deadline. */
  async *chunks(body: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array, void, undefined> {
    const reader = body.getReader()
    const idleTimer = setTimeout(() => {
      if (this.reading) this.abort('idle-timeout')
    }, this.timeouts.idleMs)
    this.idleTimer = idleTimer
    try {
      for (;;) {
        this.reading = true
        idleTimer.refresh()
        const { done, value } = await reader.read()
        this.reading = false
        if (done) {
          this.completed = true
          return
        }
        yield value
      }
    } finally {
      this.reading = false
      clearTimeout(idleTimer)
      reader.releaseLock()
    }
  }

  /**
   * Ends the call: timers off, the caller's listener removed, and, unless the body was read to
   * its end, the connection aborted (cancelling the upstream request). Idempotent.
   */
  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    clearTimeout(this.connectTimer)
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer)
    this.callerSignal.removeEventListener('abort', this.onCallerAbort)
    if (!this.completed) this.controller.abort()
  }

  private abort(cause: AbortCause): void {
    if (this.disposed || this.controller.signal.aborted) return
    this.cause = cause
    this.controller.abort()
  }
}
