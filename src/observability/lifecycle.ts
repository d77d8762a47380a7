import { ApiError } from '../http/errors'
import { realTimers, type TickerTimers } from '../http/keep-alive'

/** A call in flight as the drain sees it: an AbortController fits. */
export interface Abortable {
  abort(reason: ApiError): void
  /**
   * Called on every tick while the call is tracked: a call serving a client checks here whether
   * its client has left, and cuts itself if so (see CLIENT_CHECK_MS).
   */
  checkClient?(): void
}

/**
 * How often calls in flight check whether their client left. A read of the request's signal on a
 * shared tick instead of an `abort` listener per call: a listener on a server request's signal
 * cost 4–8% of a non-streamed chat request's CPU (bench/README.md, "The client's signal read on
 * a tick"). A call whose client left is cut within this long; a stream's reply is cancelled at once
 * by the client's disconnect anyway.
 */
export const CLIENT_CHECK_MS = 50

/**
 * The process's serving state, for graceful shutdown (ARCHITECTURE.md §7.5): whether it is
 * draining (then /readyz answers 503 and new billed calls are refused with 503), and the billed
 * calls in flight, each with a way to cut it short. main.ts drains on SIGTERM/SIGINT: it waits
 * for `idle()` up to its deadline, then `abortAll()` ends the rest with an in-band error. While
 * calls are in flight, one timer ticks every CLIENT_CHECK_MS for their client checks.
 */
export class Lifecycle {
  /** True from the moment shutdown starts. */
  draining = false
  /** True once the drain's deadline has cut the calls in flight: nothing starts after that. */
  cut = false
  private readonly calls = new Set<Abortable>()
  private waiters: Array<() => void> = []
  private timer: unknown

  constructor(private readonly timers: TickerTimers = realTimers) {}

  /**
   * Registers a call in flight (its AbortController, say): `untrack` it when it ends. An object,
   * not a closure over the call: the closure version cost 9–14% of a chat request's CPU, for
   * reasons not pinned down (bench/README.md, "The drain's registry of calls in flight").
   */
  track(call: Abortable): void {
    this.calls.add(call)
    if (this.timer === undefined) this.timer = this.timers.setInterval(() => this.tick(), CLIENT_CHECK_MS)
  }

  /** One tick (the timer calls it; tests call it by hand): the calls' client checks. */
  tick(): void {
    if (this.calls.size === 0) {
      // Stopped here rather than at the last untrack: at one call at a time that would create
      // and clear a timer per call.
      this.timers.clearInterval(this.timer)
      this.timer = undefined
      return
    }
    for (const call of this.calls) call.checkClient?.()
  }

  /** The call ended (idempotent). */
  untrack(call: Abortable): void {
    if (!this.calls.delete(call) || this.calls.size > 0) return
    const waiters = this.waiters
    this.waiters = []
    for (const wake of waiters) wake()
  }

  /** Billed calls in flight now (chat streams and collections, document parses, web calls). */
  get inFlight(): number {
    return this.calls.size
  }

  /** Resolves once no call is in flight. */
  idle(): Promise<void> {
    if (this.calls.size === 0) return Promise.resolve()
    return new Promise(resolve => this.waiters.push(resolve))
  }

  /** Starts draining. */
  drain(): void {
    this.draining = true
  }

  /** Cuts every call still in flight, and lets nothing start after that (the drain's deadline). */
  abortAll(reason = new ApiError('unavailable', 'the gateway is shutting down; retry the request')): void {
    this.cut = true
    this.abortInFlight(reason)
  }

  /** Cuts every call in flight now: each ends with `reason` (an in-band error on a stream) and settles what it produced. */
  abortInFlight(reason: ApiError): void {
    for (const call of [...this.calls]) call.abort(reason)
  }

  /** The refusal for a call that arrives while draining (on a connection kept alive). */
  static refusal(): ApiError {
    return new ApiError('unavailable', 'this gateway instance is shutting down; retry the request')
  }
}

/**
 * A billed call's own controller, tracked by the lifecycle: aborted when the caller's signal has
 * aborted (the client left, or a caller's deadline passed), read on the lifecycle's ticks rather
 * than listened to (CLIENT_CHECK_MS says why), or by the drain's deadline, whose ApiError is then
 * the reason and what the client is told.
 */
export class CallAbort extends AbortController implements Abortable {
  constructor(private readonly caller: AbortSignal) {
    super()
  }

  checkClient(): void {
    if (this.caller.aborted) this.cut()
  }

  cut(): void {
    if (!this.signal.aborted) this.abort(new DOMException('client disconnected', 'AbortError'))
  }

  /** The ApiError the drain's deadline cut the call with, if it did. */
  shutdownReason(): ApiError | undefined {
    return this.signal.reason instanceof ApiError ? this.signal.reason : undefined
  }

  /**
   * Why the call's result reaches no one, if it does not: the drain's deadline cut it (`aborted`),
   * or its caller has left (`cancelled`, read now rather than at the last tick, so a result that
   * arrives between a disconnect and the next tick is not charged either). The request log writes
   * `cancelled` as 499.
   */
  unread(): 'aborted' | 'cancelled' | undefined {
    if (this.shutdownReason()) return 'aborted'
    return this.caller.aborted ? 'cancelled' : undefined
  }
}
