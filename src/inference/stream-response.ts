import type { ApiError } from '../http/errors'
import { type KeepAlive, keepAlive, type KeepAliveStream } from '../http/keep-alive'
import { SSE_PING } from '../http/sse'
import type { ChatEvent, Usage } from './canonical'
import type { StreamEncoder } from './dialects/types'
import { toApiError } from './upstream-errors'

/** How a stream ended: the upstream finished, failed mid-stream, or the client left. */
export type StreamOutcome = 'finished' | 'failed' | 'cancelled'

const encoder = new TextEncoder()

/**
 * Pumps provider events to an SSE response (ARCHITECTURE.md §8 steps 7–9). Pull-based, so a
 * slow client applies backpressure to the upstream. Terminal frames wait for `complete`, which
 * settles the charge; if settlement fails, the stream ends with the dialect's error instead.
 * `complete` runs exactly once, whichever way the stream ends.
 */
export function streamResponse(options: {
  events: AsyncIterable<ChatEvent>
  encoder: StreamEncoder
  observe: (event: ChatEvent) => void
  /** Adjusts the usage the terminal frames report (hosted tool counts); called once, at finish. */
  finishUsage?: (usage: Usage) => Usage
  complete: (outcome: StreamOutcome) => Promise<ApiError | undefined>
  /** Why the stream was cut by the gateway (a drain), when it was: shown instead of the upstream's ending. */
  failure?: () => ApiError | undefined
  /** Pings the stream after 15 s of silence (default: the process's shared ticker; tests pass their own). */
  keepAlive?: KeepAlive
}): Response {
  const iterator = options.events[Symbol.asyncIterator]()
  let completed = false
  let quiet: KeepAliveStream | undefined
  const ticker = options.keepAlive ?? keepAlive
  const pingFrame = options.encoder.ping ?? SSE_PING

  const finish = async (outcome: StreamOutcome): Promise<ApiError | undefined> => {
    if (completed) return undefined
    completed = true
    if (quiet !== undefined) ticker.stop(quiet)
    return options.complete(outcome)
  }

  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      enqueue(controller, options.encoder.start())
      quiet = ticker.watch(() => controller.enqueue(pingFrame))
    },
    async pull(controller) {
      // One pull writes at least one frame (or ends the stream), so backpressure works per frame.
      for (;;) {
        let step: IteratorResult<ChatEvent>
        try {
          step = await iterator.next()
        } catch (error) {
          if (completed) return
          return end(controller, 'failed', options.encoder.fail(options.failure?.() ?? toApiError(error)))
        }
        // The client left while this pull waited (cancel settled the call and closed the
        // upstream, which ended this wait): nothing more is written.
        if (completed) return
        if (step.done) return end(controller, 'failed', options.encoder.fail(options.failure?.() ?? toApiError(new Error('stream ended early'))))
        const event = step.value
        options.observe(event)
        if (event.type === 'finish') return end(controller, 'finished', options.encoder.finish(event.reason, options.finishUsage ? options.finishUsage(event.usage) : event.usage, event.stopSequence))
        if (event.type === 'error') return end(controller, 'failed', options.encoder.fail(options.failure?.() ?? toApiError(event.error)))
        const frames = options.encoder.push(event)
        if (frames.length === 0) continue
        enqueue(controller, frames)
        quiet!.wrote = true
        return
      }
    },
    async cancel() {
      // The client left: stop the upstream, charge what was used, free the slot.
      await finish('cancelled')
      await iterator.return?.()
    },
  })

  async function end(controller: ReadableStreamDefaultController<Uint8Array>, outcome: StreamOutcome, frames: string[]): Promise<void> {
    // The events stop at their terminal event, but the provider's iterator is still open: end it
    // so it releases its upstream now. Left alone it held the response, its timers and buffers
    // until the upstream idle deadline (60 s): ~4 KiB of heap per stream, RSS past 800 MiB at 128 connections.
    iterator.return?.()?.catch(() => {})
    const failure = await finish(outcome)
    const closing = failure ? options.encoder.fail(failure) : frames
    enqueue(controller, closing)
    controller.close()
  }

  return new Response(body, {
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' },
  })
}

/** One event's frames in one write: each enqueue is a chunk the response stream handles on its own. */
function enqueue(controller: ReadableStreamDefaultController<Uint8Array>, frames: string[]): void {
  if (frames.length === 0) return
  controller.enqueue(encoder.encode(frames.length === 1 ? frames[0]! : frames.join('')))
}
