import { declaresAtMost } from '../declared-length'
import { drainRest } from '../drain-rest'
import type { AbortCause } from './errors'

/**
 * One upstream call's cancellation: a single AbortController fired by the caller's signal
 * (client gone, pipeline deadline), by the connect deadline (no response headers in time), or
 * by the idle deadline (no body bytes in time while we wait for them). `cause` says which fired
 * first, because the resulting AbortError does not say.
 *
 * The controller is the call's own when the router lends it (ProviderCall.abortable, its last
 * attempt): the deadlines then abort the caller's signal itself, and nothing listens to it. A
 * listener on a server request's signal and a second controller cost ~4% of a collected call's
 * CPU (bench/README.md, "The client's signal read on a tick"). Otherwise the controller is this
 * call's, tied to the caller's signal, so a deadline ends this attempt only and the router may
 * try the next backend.
 *
 * The idle deadline counts only time spent waiting on the upstream: while the consumer holds a
 * chunk (a slow client), the clock is paused. One timer is re-armed with `refresh()` per read,
 * so a long stream allocates no timer per chunk.
 */
export class CallControl {
  private readonly controller: AbortController
  /** The deadline (or, with a controller of its own, the caller's signal) that aborted first. */
  private firstCause: AbortCause | undefined
  private readonly connectTimer: ReturnType<typeof setTimeout>
  private idleTimer: ReturnType<typeof setTimeout> | undefined
  private reading = false
  private reader: ReadableStreamDefaultReader<Uint8Array> | undefined
  /** The body was read to its end: nothing to abort. */
  private completed = false
  /** The protocol's end was seen (see protocolEnded). */
  private ended = false
  private disposed = false
  private readonly onCallerAbort: (() => void) | undefined

  constructor(
    private readonly callerSignal: AbortSignal,
    private readonly timeouts: { readonly connectMs: number; readonly idleMs: number },
    lent?: AbortController,
  ) {
    if (lent !== undefined) {
      this.controller = lent
    } else {
      this.controller = new AbortController()
      this.onCallerAbort = () => this.abort('client')
      callerSignal.addEventListener('abort', this.onCallerAbort, { once: true })
    }
    this.connectTimer = setTimeout(() => this.abort('connect-timeout'), timeouts.connectMs)
  }

  /**
   * Which deadline or signal aborted the call, if any did. A lent controller aborted by no
   * deadline was aborted by its owner: the caller (the client left, a drain).
   */
  get cause(): AbortCause | undefined {
    return this.firstCause ?? (this.callerSignal.aborted ? 'client' : undefined)
  }

  /** The signal for fetch and the body. */
  get signal(): AbortSignal {
    return this.controller.signal
  }

  /** Response headers arrived: the connect deadline is over, the idle deadline takes over. */
  headersReceived(): void {
    clearTimeout(this.connectTimer)
  }

  /** The next body chunk, read under the idle deadline; undefined at the body's end. */
  async read(body: ReadableStream<Uint8Array>): Promise<Uint8Array | undefined> {
    let reader = this.reader
    if (reader === undefined) {
      reader = this.reader = body.getReader() as ReadableStreamDefaultReader<Uint8Array>
      this.armIdle()
    }
    return this.next(reader)
  }

  /** The idle deadline's one timer, made on the first read. */
  private armIdle(): ReturnType<typeof setTimeout> {
    return (this.idleTimer ??= setTimeout(() => {
      if (!this.reading) return
      // After dispose only a drain reads (see dispose): its stall just closes the connection.
      if (this.disposed) this.controller.abort()
      else this.abort('idle-timeout')
    }, this.timeouts.idleMs))
  }

  /** One chunk under the idle deadline (for `read`, and for dispose's drain after the protocol's end). */
  private async next(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<Uint8Array | undefined> {
    this.reading = true
    this.idleTimer!.refresh()
    try {
      const { done, value } = await reader.read()
      if (!done) return value
      this.completed = true
      return undefined
    } finally {
      this.reading = false
    }
  }

  /**
   * A body whose length the upstream declared, at most `limit` bytes, read whole under the idle
   * deadline (a declared body that stalls is cut as silence); undefined when it declared none
   * or more, and nothing is read.
   */
  async wholeText(response: Response, limit: number): Promise<string | undefined> {
    if (this.reader !== undefined || response.body === null || !declaresAtMost(response.headers, limit)) return undefined
    this.reading = true
    this.armIdle().refresh()
    try {
      const text = await response.text()
      this.completed = true
      return text
    } finally {
      this.reading = false
    }
  }

  /** The body's chunks, each read under the idle deadline. */
  async *chunks(body: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array, void, undefined> {
    for (let chunk = await this.read(body); chunk !== undefined; chunk = await this.read(body)) yield chunk
  }

  /**
   * The protocol's end was seen (message_stop): only the body's last bytes can follow, so
   * dispose() reads them instead of aborting, and the connection goes back to the pool (an
   * abort tears it down, and the next call pays a new TCP and TLS handshake).
   */
  protocolEnded(): void {
    this.ended = true
  }

  /**
   * Ends the call: the caller's listener removed, and, unless the body was read to its end, the
   * connection aborted (cancelling the upstream request), or after the protocol's end its last
   * bytes read first (at most a few chunks, under the idle deadline). Idempotent.
   */
  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    clearTimeout(this.connectTimer)
    if (this.onCallerAbort !== undefined) this.callerSignal.removeEventListener('abort', this.onCallerAbort)
    if (this.completed) return this.stopIdleTimer()
    const reader = this.reader
    if (this.ended && reader !== undefined) {
      drainRest(async () => (await this.next(reader)) === undefined).then(
        () => this.stopIdleTimer(),
        () => {
          this.stopIdleTimer()
          this.controller.abort()
        },
      )
      return
    }
    this.stopIdleTimer()
    this.controller.abort()
  }

  private stopIdleTimer(): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer)
  }

  private abort(cause: AbortCause): void {
    if (this.disposed || this.controller.signal.aborted) return
    this.firstCause = cause
    this.controller.abort()
  }
}
