import { ApiError } from '../http/errors'
import { keepAlive, type KeepAliveStream, queuedIn } from '../http/keep-alive'
import { SSE_PING, sseFrame } from '../http/sse'
import { executeFusion, type FusionDeps, type FusionPlan, type FusionProgress } from './service'

/**
 * The opt-in progress stream of `stream: true` (issue 9 point 6): one SSE event per progress
 * step, named by its type (`participant.started`, `participant.finished`, `participant.failed`,
 * `synthesis.started`, `synthesis.delta`), then `fusion.completion` with the result object,
 * or `error` with the /api/v1 error envelope. Every request was checked before the stream
 * began (planFusion), so a refused request still gets its HTTP status; `error` only reports a
 * failure found during the run. `: ping` comments keep proxies from closing a quiet stream.
 * `abort` is called when the client leaves, which cancels every part still running; `ended` once
 * the run is over and its last event written (or, the client gone, dropped).
 */
export function fusionEventStream(deps: FusionDeps, plan: Omit<FusionPlan, 'input'> & { input: Omit<FusionPlan['input'], 'onProgress' | 'onSynthesisDelta'> }, abort: () => void, ended?: () => void): Response {
  let closed = false
  let quiet: KeepAliveStream | undefined
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      // Pinged by the shared ticker after 15 s of silence, and cut when the client stops
      // reading (src/http/keep-alive.ts): the run is aborted and the connection dropped. The
      // watch outlives the run (its last events may still wait unread); once they are read, the
      // closed stream looks stalled and its cut does nothing (error() on a closed stream is a no-op).
      const watched = keepAlive.watch(
        () => {
          if (closed) return
          controller.enqueue(SSE_PING)
          watched.enqueued += 1
        },
        {
          queued: queuedIn(controller),
          cut: () => {
            closed = true
            controller.error(undefined)
            abort()
          },
        },
      )
      quiet = watched
      const write = (event: string, data: unknown): boolean => {
        if (closed) return false
        controller.enqueue(sseFrame(JSON.stringify(data), event))
        watched.wrote = true
        watched.enqueued += 1
        return true
      }
      const onProgress = ({ type, ...data }: FusionProgress) => write(type, data)
      const onSynthesisDelta = (delta: string) => write('synthesis.delta', { delta })
      executeFusion(deps, { ...plan, input: { ...plan.input, onProgress, onSynthesisDelta } })
        .then(
          result => write('fusion.completion', result),
          error => {
            if (!(error instanceof ApiError)) deps.pipeline.logger.error('fusion failed', { request_id: plan.input.requestId, error: String(error), stack: (error as Error)?.stack })
            const apiError = error instanceof ApiError ? error : new ApiError('internal_error', 'internal error')
            write('error', { error: { code: apiError.code, message: apiError.message, request_id: plan.input.requestId } })
          },
        )
        .finally(() => {
          if (!closed) {
            closed = true
            controller.close()
          }
          ended?.()
        })
    },
    cancel() {
      closed = true
      if (quiet !== undefined) keepAlive.stop(quiet)
      abort()
    },
  })
  return new Response(body, {
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' },
  })
}
