/**
 * Keep-alive pings for quiet streams: one shared timer ticks every third of the quiet period and
 * pings each stream that wrote nothing for three ticks, i.e. after 15–20 s of silence with the
 * default 15 s, then every 15 s while it stays quiet (the bounds the per-stream timers had).
 *
 * One timer for all open streams instead of a setInterval per stream: under load a stream lives
 * a few milliseconds, and creating and clearing its own timer cost more than its ping ever did.
 * A write marks the stream with a boolean instead of reading the clock.
 */

/** Timer functions the ticker uses; tests pass hand-driven ones instead of waiting. */
export interface TickerTimers {
  setInterval(callback: () => void, ms: number): unknown
  clearInterval(handle: unknown): void
}

/** Unref'd intervals (shared by the process's tickers). */
export const realTimers: TickerTimers = {
  // Unref'd: the streams' own sockets keep the process alive, and the timer may outlive the last
  // stream by one tick, which must not hold up an exit.
  setInterval: (callback, ms) => setInterval(callback, ms).unref(),
  clearInterval: handle => clearInterval(handle as ReturnType<typeof setInterval>),
}

/** Ticks of silence before a ping. */
const QUIET_TICKS = 3

/** One stream's registration: set `wrote` on every write; `ping` writes the keep-alive frame. */
export class KeepAliveStream {
  // Registration counts as a write: the stream has just sent its start frames.
  wrote = true
  quietTicks = 0
  constructor(readonly ping: () => void) {}
}

export class KeepAlive {
  private readonly streams = new Set<KeepAliveStream>()
  private timer: unknown

  constructor(
    readonly pingAfterMs = 15_000,
    private readonly timers: TickerTimers = realTimers,
  ) {}

  /** Starts pinging `ping` when the stream stays quiet; `stop` it when the stream ends. */
  watch(ping: () => void): KeepAliveStream {
    const stream = new KeepAliveStream(ping)
    this.streams.add(stream)
    if (this.timer === undefined) this.timer = this.timers.setInterval(() => this.tick(), this.pingAfterMs / QUIET_TICKS)
    return stream
  }

  stop(stream: KeepAliveStream): void {
    // The timer stops at its next tick with nothing to watch, not here: at one stream at a time
    // that would create and clear a timer per stream again.
    this.streams.delete(stream)
  }

  /** Streams being watched (for tests). */
  get size(): number {
    return this.streams.size
  }

  /** One tick (the timer calls it; tests call it by hand). */
  tick(): void {
    if (this.streams.size === 0) {
      this.timers.clearInterval(this.timer)
      this.timer = undefined
      return
    }
    for (const stream of this.streams) {
      if (stream.wrote) {
        stream.wrote = false
        stream.quietTicks = 0
        continue
      }
      if (++stream.quietTicks < QUIET_TICKS) continue
      stream.quietTicks = 0
      try {
        stream.ping()
      } catch {
        // The stream closed under us (its stop comes with its end): watch it no longer.
        this.streams.delete(stream)
      }
    }
  }
}

/** The process's ticker, shared by every streamed reply. */
export const keepAlive = new KeepAlive()
