import { ApiError } from '../http/errors'

/** A call in flight as the drain sees it: an AbortController fits. */
export interface Abortable {
  abort(reason: ApiError): void
}

/**
 * The process's serving state, for graceful shutdown (ARCHITECTURE.md §7.5): whether it is
 * draining (then /readyz answers 503 and new billed calls are refused with 503), and the billed
 * calls in flight, each with a way to cut it short. main.ts drains on SIGTERM/SIGINT: it waits
 * for `idle()` up to its deadline, then `abortAll()` ends the rest with an in-band error.
 */
export class Lifecycle {
  /** True from the moment shutdown starts. */
  draining = false
  private readonly calls = new Set<Abortable>()
  private waiters: Array<() => void> = []

  /**
   * Registers a call in flight (its AbortController, say): `untrack` it when it ends. An object,
   * not a closure over the call: the closure version cost 9–14% of a chat request's CPU, for
   * reasons not pinned down (bench/README.md, "The drain's registry of calls in flight").
   */
  track(call: Abortable): void {
    this.calls.add(call)
  }

  /** The call ended (idempotent). */
  untrack(call: Abortable): void {
    if (!this.calls.delete(call) || this.calls.size > 0) return
    const waiters = this.waiters
    this.waiters = []
    for (const wake of waiters) wake()
  }

  /** Billed calls (chat streams and collections) in flight now. */
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

  /** Cuts every call still in flight: each ends with `reason` (an in-band error on a stream) and settles what it produced. */
  abortAll(reason = new ApiError('unavailable', 'the gateway is shutting down; retry the request')): void {
    for (const call of [...this.calls]) call.abort(reason)
  }

  /** The refusal for a call that arrives while draining (on a connection kept alive). */
  static refusal(): ApiError {
    return new ApiError('unavailable', 'this gateway instance is shutting down; retry the request')
  }
}
