// Encrypted streaming passthrough (TEE-PROTOCOL.md B3 row 9): the backend's SSE bytes go to the
// client unchanged (no re-framing, no keep-alive comments), cut only at event boundaries so
// the final `data: [DONE]` event can be held back until the settlement has committed. Usage is
// read from a side view of each event; nothing is decrypted or logged.

import { ApiError } from '../http/errors'
import { keepAlive, type KeepAliveStream, queuedIn } from '../http/keep-alive'
import { MAX_SSE_EVENT_CHARS } from '../http/sse'
import type { UpstreamStream } from '../providers/openai-compatible/open-upstream-stream'
import type { StreamOutcome } from './stream-response'
import { toApiError } from './upstream-errors'

const decoder = new TextDecoder()
const encoder = new TextEncoder()
const LF = 10
const CR = 13

/** End of the first event in `bytes` from `from` (index after its blank line), or -1. */
function eventEnd(bytes: Uint8Array, from: number): number {
  for (let index = from; index < bytes.length; index++) {
    if (bytes[index] !== LF) continue
    if (bytes[index + 1] === LF) return index + 2
    if (bytes[index + 1] === CR && bytes[index + 2] === LF) return index + 3
  }
  return -1
}

/** The data of one SSE event (data lines joined), from its raw text. */
function eventData(text: string): string {
  let data = ''
  for (const line of text.split(/\r?\n/)) {
    if (!line.startsWith('data:')) continue
    const value = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5)
    data = data === '' ? value : `${data}\n${value}`
  }
  return data
}

function errorEvent(error: ApiError): Uint8Array {
  const type = error.code === 'provider_error' || error.code === 'unavailable' ? 'server_error' : 'invalid_request_error'
  return encoder.encode(`data: ${JSON.stringify({ error: { message: error.message, type, param: null, code: error.code } })}\n\n`)
}

export function passthroughStream(options: {
  upstream: UpstreamStream
  /** Sees each event's data (not [DONE]) before its bytes are written. */
  observe: (data: string) => void
  /**
   * Settles; the held [DONE] is written only after it resolves without an error. `error`: why a
   * `failed` stream failed (a read that threw, an event too long); none when the bytes ended before [DONE].
   */
  complete: (outcome: StreamOutcome, error?: unknown) => Promise<ApiError | undefined>
  /** Why the gateway cut the call (the drain's deadline), if it did: the client's error event. */
  failure?: () => ApiError | undefined
  headers: Record<string, string>
}): Response {
  const iterator = options.upstream.bytes[Symbol.asyncIterator]()
  // The bytes of the unfinished event, at the start of a buffer that grows by doubling: joined
  // anew with each chunk, an event arriving in n chunks cost O(n²) copies.
  let held = new Uint8Array(0)
  let heldLength = 0
  let completed = false
  let watched: KeepAliveStream | undefined
  const finish = async (outcome: StreamOutcome, error?: unknown) => {
    if (completed) return undefined
    completed = true
    if (watched !== undefined) keepAlive.stop(watched)
    return options.complete(outcome, error)
  }

  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      // No pings (the bytes are the backend's), but a client that stops reading is cut as on
      // every stream (http/keep-alive.ts, STALL_TICKS): the connection dropped, the call a cancel.
      watched = keepAlive.watch(undefined, {
        queued: queuedIn(controller),
        cut: () => {
          controller.error(undefined)
          void finish('cancelled').then(() => options.upstream.close())
        },
      })
    },
    async pull(controller) {
      for (;;) {
        let step: IteratorResult<Uint8Array>
        try {
          step = await iterator.next()
        } catch (error) {
          if (heldLength > 0) controller.enqueue(held.slice(0, heldLength))
          const failure = await finish('failed', error)
          controller.enqueue(errorEvent(failure ?? options.failure?.() ?? toApiError(error)))
          controller.close()
          return
        }
        if (step.done) {
          // Ended without [DONE]: pass on what came, settle what was used, no terminator.
          if (heldLength > 0) controller.enqueue(held.slice(0, heldLength))
          const failure = await finish('failed')
          if (failure) controller.enqueue(errorEvent(failure))
          controller.close()
          return
        }
        const chunk = step.value
        if (heldLength + chunk.length > held.length) {
          const grown = new Uint8Array(Math.max(held.length * 2, heldLength + chunk.length))
          grown.set(held.subarray(0, heldLength))
          held = grown
        }
        held.set(chunk, heldLength)
        // The held bytes have no event end: only their last two can begin one with the new chunk.
        const scanFrom = Math.max(0, heldLength - 2)
        heldLength += chunk.length
        const joined = held.subarray(0, heldLength)
        let start = 0
        let wrote = false
        for (let end = eventEnd(joined, scanFrom); end !== -1; end = eventEnd(joined, start)) {
          const data = eventData(decoder.decode(joined.subarray(start, end)))
          if (data === '[DONE]') {
            const terminator = joined.slice(start)
            if (start > 0) controller.enqueue(joined.slice(0, start))
            options.upstream.close()
            const failure = await finish('finished')
            controller.enqueue(failure ? errorEvent(failure) : terminator)
            controller.close()
            return
          }
          if (data !== '') options.observe(data)
          start = end
          wrote = true
        }
        if (wrote) {
          controller.enqueue(joined.slice(0, start))
          watched!.enqueued += 1
          held.copyWithin(0, start, heldLength)
          heldLength -= start
        }
        if (heldLength > MAX_SSE_EVENT_CHARS) {
          // An event that never ends (the decoder's cap, http/sse.ts): held, it would fill the memory.
          options.upstream.close()
          const tooLong = new ApiError('provider_error', `the backend sent an event longer than ${MAX_SSE_EVENT_CHARS} bytes; the stream was cut`)
          const failure = await finish('failed', tooLong)
          controller.enqueue(errorEvent(failure ?? tooLong))
          controller.close()
          return
        }
        if (wrote) return
      }
    },
    async cancel() {
      await finish('cancelled')
      options.upstream.close()
    },
  })
  return new Response(body, { headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no', ...options.headers } })
}
