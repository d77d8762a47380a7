import { ApiError } from '../http/errors'
import { keepAlive, type KeepAliveStream, MAX_UNREAD_FRAMES, queuedIn } from '../http/keep-alive'
import { SSE_PING, sseFrame } from '../http/sse'
import { executeFusion, type FusionDeps, type FusionPlan, type FusionProgress } from './service'

/**
 * The opt-in progress stream of `stream: true` (issue 9 point 6): one SSE event per progress
 * step, named by its type (`participant.started`, `participant.finished`, `participant.failed`,
 * `synthesis.started`, `synthesis.delta`), then `fusion.completion` with the result object,
 * or `error` with the /api/v1 error envelope. A refused request keeps its HTTP status: the
 * checks before the run (planFusion), and a run refused as a whole (no participant admitted:
 * funds, cap, concurrency), reject instead of resolving to a stream; the reply starts once a
 * participant is admitted, with the events so far. `error` only reports a failure found during
 * the run. `: ping` comments keep proxies from closing a quiet stream. `abort` is called when
 * the client leaves, which cancels every part still running; `ended` once the run is over and
 * its last event written (or, the client gone, dropped), or it was refused.
 */
export function fusionEventStream(
  deps: FusionDeps,
  plan: Omit<FusionPlan, 'input'> & { input: Omit<FusionPlan['input'], 'onProgress' | 'onSynthesisDelta' | 'synthesisReady' | 'onAdmitted'> },
  abort: () => void,
  ended?: () => void,
): Promise<Response> {
  // Events before the reply starts wait here; then they go to the stream's controller.
  const early: Uint8Array[] = []
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined
  /** Frames written and not yet taken by the client's connection (queuedIn), once the reply started. */
  let queued: (() => number | null) | undefined
  let watched: KeepAliveStream | undefined
  let closed = false
  // The synthesis waits while the client has more than MAX_UNREAD_FRAMES unread, until the
  // stream asks for more (pull) or ends: the judge's upstream is read no faster than the client
  // reads (README, Memory), where its deltas were queued here whatever the client's pace.
  let resume: (() => void) | undefined
  const wake = () => {
    const waiting = resume
    resume = undefined
    waiting?.()
  }
  const synthesisReady = (): Promise<void> | undefined => {
    const unread = closed ? null : queued?.()
    if (unread === undefined || unread === null || unread <= MAX_UNREAD_FRAMES) return undefined
    return new Promise<void>(resolve => (resume = resolve))
  }
  const write = (event: string, data: unknown): boolean => {
    if (closed) return false
    const frame = sseFrame(JSON.stringify(data), event)
    if (controller === undefined) {
      early.push(frame)
      return true
    }
    controller.enqueue(frame)
    watched!.wrote = true
    watched!.enqueued += 1
    return true
  }
  const reply = (): Response => {
    const body = new ReadableStream<Uint8Array>({
      start(stream) {
        controller = stream
        queued = queuedIn(stream)
        // Pinged by the shared ticker after 15 s of silence, and cut when the client stops
        // reading (src/http/keep-alive.ts): the run is aborted and the connection dropped. The
        // watch outlives the run (its last events may still wait unread); once they are read, the
        // closed stream looks stalled and its cut does nothing (error() on a closed stream is a no-op).
        const watch = keepAlive.watch(
          () => {
            if (closed) return
            stream.enqueue(SSE_PING)
            watch.enqueued += 1
          },
          {
            queued,
            cut: () => {
              closed = true
              stream.error(undefined)
              abort()
              wake()
            },
          },
        )
        watched = watch
        for (const frame of early.splice(0)) {
          stream.enqueue(frame)
          watch.enqueued += 1
        }
      },
      pull() {
        wake()
      },
      cancel() {
        closed = true
        if (watched !== undefined) keepAlive.stop(watched)
        abort()
        wake()
      },
    })
    return new Response(body, {
      headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' },
    })
  }
  const metrics = deps.pipeline.metrics
  return new Promise<Response>((resolve, reject) => {
    let started = false
    const start = () => {
      if (started) return
      started = true
      // In svc_open_streams from its start to the run's end (a client's cancel ends the run too).
      if (metrics) metrics.openStreams += 1
      resolve(reply())
    }
    const onProgress = ({ type, ...data }: FusionProgress) => write(type, data)
    const onSynthesisDelta = (delta: string) => write('synthesis.delta', { delta })
    executeFusion(deps, { ...plan, input: { ...plan.input, onProgress, onSynthesisDelta, synthesisReady, onAdmitted: start } })
      .then(
        result => {
          start()
          write('fusion.completion', result)
        },
        error => {
          // Refused as a whole before any participant was admitted: the HTTP error, as without `stream`.
          if (!started && error instanceof ApiError) {
            closed = true
            reject(error)
            return
          }
          start()
          if (!(error instanceof ApiError)) deps.pipeline.logger.error('fusion failed', { request_id: plan.input.requestId, error: String(error), stack: (error as Error)?.stack })
          const apiError = error instanceof ApiError ? error : new ApiError('internal_error', 'internal error')
          write('error', { error: { code: apiError.code, message: apiError.message, request_id: plan.input.requestId } })
        },
      )
      .finally(() => {
        // (The reply has started by now, unless the run was refused: `start` precedes every ending.)
        if (controller !== undefined && !closed) {
          closed = true
          controller.close()
        }
        if (started && metrics) metrics.openStreams -= 1
        ended?.()
      })
  })
}
