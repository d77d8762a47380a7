/**
 * Keep-alive pings for quiet streams: one shared timer ticks every third of the quiet period and
 * pings each stream that wrote nothing for three ticks, i.e. after 15–20 s of silence with the
 * default 15 s, then every 15 s while it stays quiet (the bounds the per-stream timers had).
 *
 * One timer for all open streams instead of a setInterval per stream: under load a stream lives
 * a few milliseconds, and creating and clearing its own timer cost more than its ping ever did.
 * A write marks the stream with a boolean instead of reading the clock.
 *
 * The same ticks cut a stream whose client stopped reading without closing (STALL_TICKS).
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

/**
 * Ticks in a row that a stream's reader took nothing from a non-empty queue before the stream is
 * cut: 30 s, the idle timeout (Elysia's) that streaming routes lift so a silent upstream is not
 * cut. Without it a client that stops reading without closing held its connection, the upstream
 * call, the concurrency slot and the reservation for ever.
 */
export const STALL_TICKS = 6

/** A stream whose reader is watched: how many written chunks wait for it, and how to cut it. */
export interface StallWatch {
  /** Chunks written that the client's connection has not taken yet; null once the stream has closed. */
  queued(): number | null
  cut(): void
}

/**
 * Frames a paced stream may hold unread before its producer waits for the client (MCP progress
 * notifications, a Fusion stream's synthesis): the upstream is then read no faster than the
 * client reads.
 */
export const MAX_UNREAD_FRAMES = 64

/** What waits in a default-strategy stream's queue (high-water mark one chunk: 1 - desiredSize). */
export function queuedIn(controller: ReadableStreamDefaultController<Uint8Array>): () => number | null {
  return () => {
    const desired = controller.desiredSize
    return desired === null ? null : 1 - desired
  }
}

/**
 * One stream's registration: set `wrote` on every write, and count each chunk enqueued in
 * `enqueued` (pings included) when the stream's reader is watched; `ping` writes the keep-alive
 * frame (none for streams that must not carry comments).
 */
export class KeepAliveStream {
  // Registration counts as a write: the stream has just sent its start frames.
  wrote = true
  quietTicks = 0
  enqueued = 0
  /** Chunks the reader had taken at the last tick, and the ticks since it last took one while some waited. */
  private taken = 0
  private stalledTicks = 0
  constructor(
    readonly ping: (() => void) | undefined,
    readonly stall?: StallWatch,
  ) {}

  /**
   * Whether the reader has taken nothing for STALL_TICKS ticks while chunks waited in the queue.
   * A reader waiting for the source (an empty queue: a silent upstream) is not stalled, nor is a
   * slow one that took any chunk since the last tick.
   */
  stalled(): boolean {
    const queued = this.stall!.queued()
    if (queued === null) return false
    const taken = this.enqueued - queued
    if (queued <= 0 || taken !== this.taken) {
      this.taken = taken
      this.stalledTicks = 0
      return false
    }
    return ++this.stalledTicks >= STALL_TICKS
  }
}

export class KeepAlive {
  private readonly streams = new Set<KeepAliveStream>()
  private timer: unknown

  constructor(
    readonly pingAfterMs = 15_000,
    private readonly timers: TickerTimers = realTimers,
  ) {}

  /**
   * Starts pinging `ping` when the stream stays quiet, and with `stall`, cuts the stream when its
   * reader stops taking chunks (KeepAliveStream.stalled); `stop` it when the stream ends.
   */
  watch(ping: (() => void) | undefined, stall?: StallWatch): KeepAliveStream {
    const stream = new KeepAliveStream(ping, stall)
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
      if (stream.stall !== undefined && stream.stalled()) {
        this.streams.delete(stream)
        stream.stall.cut()
        continue
      }
      if (stream.wrote) {
        stream.wrote = false
        stream.quietTicks = 0
        continue
      }
      if (++stream.quietTicks < QUIET_TICKS) continue
      stream.quietTicks = 0
      if (stream.ping === undefined) continue
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
