import { ApiError } from '../http/errors'

/**
 * The process's serving state, for graceful shutdown (ARCHITECTURE.md §7.5): whether it is
 * draining (then /readyz answers 503 and new billed calls are refused with 503), and the billed
 * calls in flight, each with a way to cut it short. main.ts drains on SIGTERM/SIGINT: it waits
 * for `idle()` up to its deadline, then `abortAll()` ends the rest with an in-band error.
 */
export class Lifecycle {
  /** True from the moment shutdown starts. */
  draining = false
  private readonly calls = new Set<(reason: ApiError) => void>()
  private waiters: Array<() => void> = []

  /** Registers a call in flight; returns its (idempotent) untrack, to call when it ends. */
  track(abort: (reason: ApiError) => void): () => void {
    this.calls.add(abort)
    return () => {
      if (!this.calls.delete(abort) || this.calls.size > 0) return
      const waiters = this.waiters
      this.waiters = []
      for (const wake of waiters) wake()
    }
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
    for (const abort of [...this.calls]) abort(reason)
  }

  /** The refusal for a call that arrives while draining (on a connection kept alive). */
  static refusal(): ApiError {
    return new ApiError('unavailable', 'this gateway instance is shutting down; retry the request')
  }
}
