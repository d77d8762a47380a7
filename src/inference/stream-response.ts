import type { ApiError } from '../http/errors'
import { type KeepAlive, keepAlive, type KeepAliveStream } from '../http/keep-alive'
import { SSE_PING } from '../http/sse'
import type { ChatEvent, Usage } from './canonical'
import type { StreamEncoder } from './dialects/types'
import { ReplayedEvents } from '../providers/replay'
import { replyBody, type ReplySink } from './reply-sink'
import { toApiError } from './upstream-errors'

/** How a stream ended: the upstream finished, failed mid-stream, or the client left. */
export type StreamOutcome = 'finished' | 'failed' | 'cancelled'

export interface StreamOptions {
  events: AsyncIterable<ChatEvent>
  encoder: StreamEncoder
  observe: (event: ChatEvent) => void
  /** The usage the terminal frames report, given the upstream's (default: that one); called once, at finish. */
  finishUsage?: (usage: Usage) => Usage
  complete: (outcome: StreamOutcome) => Promise<ApiError | undefined>
  /** Why the stream was cut by the gateway (a drain), when it was: shown instead of the upstream's ending. */
  failure?: () => ApiError | undefined
  /** Whether the client has left (its request's signal): events that stop then are a cancel, not a failure. */
  clientGone?: () => boolean
  /** Pings the stream after 15 s of silence (default: the process's shared ticker; tests pass their own). */
  keepAlive?: KeepAlive
  /**
   * Whether an answer that came whole goes out before its settlement (its terminal frames after
   * it) rather than as one body after it. Asked once, when the answer is at hand; default no.
   */
  sendBeforeSettling?: () => boolean
  /** The reply is read by JavaScript in this process (an MCP tool), not sent by Bun's server (reply-sink.ts). */
  readInProcess?: boolean
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' }
const TURN = Symbol('turn')

/**
 * Pumps provider events to an SSE response (ARCHITECTURE.md §8 steps 7–9). Terminal frames wait
 * for `complete`, which settles the charge; if settlement fails, the stream ends with the
 * dialect's error instead. `complete` runs exactly once, whichever way the stream ends.
 *
 * Events already at hand are encoded before the response is made: until the event loop's next
 * turn, or until the terminal event (all of them in one pass when the provider replays events it
 * read whole). An answer that came whole within that turn (an upstream that sent its stream in
 * one read) is sent as one body, settled first: one write to the client instead of three (the
 * start frames, the answer, the terminal frames after settlement), and no reply stream. Unless
 * `sendBeforeSettling` says otherwise (the gateway has nothing else in flight, so no write is
 * saved for anyone): then the answer leaves at once, and only the terminal frames wait for the
 * settlement, as a live stream's do.
 * Otherwise the reply is a pull-based stream that starts with what was encoded, so a slow client
 * applies backpressure to the upstream, and the first byte never waits for more than the
 * upstream's first events.
 */
export async function streamResponse(options: StreamOptions): Promise<Response> {
  const iterator = options.events[Symbol.asyncIterator]()
  const pump = new Pump(options, iterator)
  const frames = options.encoder.start()
  if (options.events instanceof ReplayedEvents) return pump.whole(frames, options.events)
  let immediate: ReturnType<typeof setImmediate> | undefined
  const turn = new Promise<typeof TURN>(resolve => (immediate = setImmediate(resolve, TURN)))
  let ending: Ending
  try {
    for (;;) {
      const next = iterator.next()
      // The next event if it is at hand before the loop's next turn; TURN otherwise.
      const step = await Promise.race([next, turn])
      if (step === TURN) return pump.stream(frames, next)
      const ended = pump.ended(step)
      if (ended !== undefined) {
        ending = ended
        break
      }
      for (const frame of options.encoder.push((step as IteratorYieldResult<ChatEvent>).value)) frames.push(frame)
    }
  } catch (error) {
    // The events failed (or handling one did): the stream ends as failed, settled once all the same.
    ending = pump.failed(error)
  }
  clearImmediate(immediate)
  return pump.reply(frames, ending)
}

/** A terminal event's outcome and frames (before settlement). */
type Ending = { outcome: StreamOutcome; frames: string[] }

/** One stream's state, shared by the eager part and the reply stream. */
class Pump {
  private completed = false
  private quiet: KeepAliveStream | undefined
  private readonly ticker: KeepAlive

  constructor(
    private readonly options: StreamOptions,
    private readonly iterator: AsyncIterator<ChatEvent>,
  ) {
    this.ticker = options.keepAlive ?? keepAlive
  }

  /** The ending a step means, if it ends the stream (observing the event on the way). */
  ended(step: IteratorResult<ChatEvent>): Ending | undefined {
    const { options } = this
    if (step.done) return this.failed(new Error('stream ended early'))
    const event = step.value
    options.observe(event)
    if (event.type === 'finish') {
      return { outcome: 'finished', frames: options.encoder.finish(event.reason, options.finishUsage ? options.finishUsage(event.usage) : event.usage, event) }
    }
    if (event.type === 'error') return this.failed(event.error)
    return undefined
  }

  /** The ending of events that failed or stopped early (a cancel when the client has left). */
  failed(error: unknown): Ending {
    const { options } = this
    const outcome = options.clientGone?.() ? 'cancelled' : 'failed'
    return { outcome, frames: options.encoder.fail(options.failure?.() ?? toApiError(error)) }
  }

  /**
   * Events that were all at hand before the call resolved (a stream read whole, a JSON answer):
   * encoded in one synchronous pass, without a promise per event, and replied as one body.
   * Stops where replaying would: at the terminal event, or when the call's signal aborted.
   */
  whole(frames: string[], replayed: ReplayedEvents): Promise<Response> {
    let ending: Ending | undefined
    try {
      for (const event of replayed.events) {
        if (replayed.signal.aborted) break
        ending = this.ended({ done: false, value: event })
        if (ending !== undefined) break
        for (const frame of this.options.encoder.push(event)) frames.push(frame)
      }
      ending ??= this.ended({ done: true, value: undefined })
    } catch (error) {
      ending = this.failed(error)
    }
    return this.reply(frames, ending!)
  }

  /** The whole stream, settled, as one body; or the answer now and the rest once settled (`sendBeforeSettling`). */
  async reply(frames: string[], ending: Ending): Promise<Response> {
    if (ending.outcome === 'finished' && this.options.sendBeforeSettling?.() === true) return this.before(frames, ending)
    for (const frame of await this.end(ending)) frames.push(frame)
    return new Response(joined(frames), { headers: SSE_HEADERS })
  }

  /**
   * The answer's frames at once, the terminal frames (or the settlement's error) once the call is
   * settled. The settlement starts once the answer is written, or on the next turn if the server
   * never asks for it, whatever the client does meanwhile: the upstream finished.
   */
  private before(frames: string[], ending: Ending): Response {
    // The settlement starts once the answer is flushed to the socket, not before: the ledger
    // writer commits on an immediate, and Bun wrote a reply stream's first chunk only at the end
    // of the turn, after the turn's immediates, so a settlement started with the reply held the
    // answer until its transaction had committed (bench/README.md, twenty-third session). If the
    // server never pulls (the client left first), it starts on the next turn all the same.
    let closing: Promise<string[]> | undefined
    const settle = (): Promise<string[]> => {
      if (closing === undefined) {
        closing = this.end(ending)
        // Handled here too: a client that leaves before the last write never awaits it, and an
        // unhandled rejection would end the process.
        closing.catch(() => {})
      }
      return closing
    }
    setImmediate(settle)
    // On Bun's server a direct stream (reply-sink.ts): ~35 µs less to the first byte at one
    // connection than a default stream's queue (bench/README.md, twenty-third session).
    const body = replyBody(
      this.options.readInProcess === true,
      async sink => {
        sink.write(joined(frames))
        sink.flush()
        const rest = await settle()
        await sink.write(joined(rest))
        sink.close()
      },
      // A client that leaves changes nothing: the upstream finished, and the settlement is on its way.
      async () => {},
    )
    return new Response(body, { headers: SSE_HEADERS })
  }

  /** Settles (once) and returns the frames that close the stream. */
  async end(ending: Ending): Promise<string[]> {
    // The events stop at their terminal event, but the provider's iterator is still open: end it
    // so it releases its upstream now. Left alone it held the response, its timers and buffers
    // until the upstream idle deadline (60 s): ~4 KiB of heap per stream, RSS past 800 MiB at 128 connections.
    this.iterator.return?.()?.catch(() => {})
    const failure = await this.complete(ending.outcome)
    return failure ? this.options.encoder.fail(failure) : ending.frames
  }

  private async complete(outcome: StreamOutcome): Promise<ApiError | undefined> {
    if (this.completed) return undefined
    this.completed = true
    if (this.quiet !== undefined) this.ticker.stop(this.quiet)
    return this.options.complete(outcome)
  }

  /**
   * The reply stream: `frames` first (flushed at once), then `pending` (the next event), then the
   * rest as they come, each event's frames in one write; those of one upstream read leave
   * together at the end of their turn. A write that finds the reader full is waited for before
   * the next event is read, so a slow client holds back the upstream.
   */
  stream(frames: string[], pending: Promise<IteratorResult<ChatEvent>>): Response {
    const body = replyBody(this.options.readInProcess === true, sink => this.run(sink, frames, pending), () => this.cancel())
    return new Response(body, { headers: SSE_HEADERS })
  }

  private async run(sink: ReplySink, frames: string[], pending: Promise<IteratorResult<ChatEvent>> | undefined): Promise<void> {
    const ping = this.options.encoder.ping ?? SSE_PING
    const quiet = (this.quiet = this.ticker.watch(
      () => {
        // Behind unread chunks a ping adds nothing; the stall watch counts that wait.
        if (sink.queued() !== 0) return
        sink.write(ping)
        quiet.enqueued += 1
      },
      {
        queued: () => sink.queued(),
        cut: () => {
          // The client stopped reading (KeepAlive's stall watch): the connection is dropped, then
          // the call ends as a cancel does, charged for the output written to the connection.
          sink.cut()
          void this.cancel()
        },
      },
    ))
    // The start frames count as the registration's write (KeepAliveStream.wrote), not as a chunk.
    if (frames.length > 0) {
      const written = sink.write(joined(frames))
      sink.flush()
      await written
    }
    for (;;) {
      let step: IteratorResult<ChatEvent>
      try {
        step = await (pending ?? this.iterator.next())
      } catch (error) {
        if (this.completed) return
        return this.close(sink, this.failed(error))
      } finally {
        pending = undefined
      }
      // The client left or the stream was cut while this waited (the cancel settled the call and
      // closed the upstream, which ended the wait): nothing more is written.
      if (this.completed) return
      let pushed: string[]
      try {
        const ended = this.ended(step)
        if (ended !== undefined) return this.close(sink, ended)
        pushed = this.options.encoder.push((step as IteratorYieldResult<ChatEvent>).value)
      } catch (error) {
        return this.close(sink, this.failed(error))
      }
      if (pushed.length === 0) continue
      await this.write(sink, pushed)
      if (this.completed) return
    }
  }

  /** One event's frames in one write; a promise while the reader is full. */
  private write(sink: ReplySink, frames: string[]): Promise<void> | undefined {
    this.quiet!.wrote = true
    this.quiet!.enqueued += 1
    return sink.write(joined(frames))
  }

  /** The client left or was cut: stop the upstream, charge what was used, free the slot. */
  private async cancel(): Promise<void> {
    await this.complete('cancelled')
    await this.iterator.return?.()
  }

  private async close(sink: ReplySink, ending: Ending): Promise<void> {
    const rest = await this.end(ending)
    if (rest.length > 0) await sink.write(joined(rest))
    sink.close()
  }
}

/** Frames as one write (one string, no copy for the common single frame). */
function joined(frames: string[]): string {
  return frames.length === 1 ? frames[0]! : frames.join('')
}
