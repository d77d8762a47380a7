// Encrypted streaming passthrough (TEE-PROTOCOL.md B3 row 9): the backend's SSE bytes go to the
// client unchanged (no re-framing, no keep-alive comments), cut only at event boundaries so
// the final `data: [DONE]` event can be held back until the settlement has committed. Usage is
// read from a side view of each event; nothing is decrypted or logged.

import { ApiError } from '../http/errors'
import type { UpstreamStream } from '../providers/openai-compatible/open-upstream-stream'
import type { StreamOutcome } from './stream-response'
import { toApiError } from './upstream-errors'

const decoder = new TextDecoder()
const encoder = new TextEncoder()
const LF = 10
const CR = 13
/** The largest event held while waiting for its end (the non-streamed relay's body cap). */
const MAX_EVENT_BYTES = 16 * 1024 * 1024

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

/** The last `count` bytes of `parts` (fewer when they hold fewer). */
function lastBytes(parts: Uint8Array[], count: number): Uint8Array {
  const out: number[] = []
  for (let index = parts.length - 1; index >= 0 && out.length < count; index--) {
    const part = parts[index]!
    for (let at = part.length - 1; at >= 0 && out.length < count; at--) out.unshift(part[at]!)
  }
  return Uint8Array.from(out)
}

function errorEvent(error: ApiError): Uint8Array {
  const type = error.code === 'provider_error' || error.code === 'unavailable' ? 'server_error' : 'invalid_request_error'
  return encoder.encode(`data: ${JSON.stringify({ error: { message: error.message, type, param: null, code: error.code } })}\n\n`)
}

export function passthroughStream(options: {
  upstream: UpstreamStream
  /** Sees each event's data (not [DONE]) before its bytes are written. */
  observe: (data: string) => void
  /** Settles; the held [DONE] is written only after it resolves without an error. */
  complete: (outcome: StreamOutcome) => Promise<ApiError | undefined>
  /** Why the gateway cut the call (the drain's deadline), if it did: the client's error event. */
  failure?: () => ApiError | undefined
  headers: Record<string, string>
}): Response {
  const iterator = options.upstream.bytes[Symbol.asyncIterator]()
  // The bytes of an event not yet ended, kept as they came: joined only once its end arrives, so
  // a long event costs one copy, not one per network chunk.
  let pending: Uint8Array[] = []
  let held = 0
  let completed = false
  const finish = async (outcome: StreamOutcome) => {
    if (completed) return undefined
    completed = true
    return options.complete(outcome)
  }

  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        let step: IteratorResult<Uint8Array>
        try {
          step = await iterator.next()
        } catch (error) {
          for (const part of pending) controller.enqueue(part)
          const failure = await finish('failed')
          controller.enqueue(errorEvent(failure ?? options.failure?.() ?? toApiError(error)))
          controller.close()
          return
        }
        if (step.done) {
          // Ended without [DONE]: pass on what came, settle what was used, no terminator.
          for (const part of pending) controller.enqueue(part)
          const failure = await finish('failed')
          if (failure) controller.enqueue(errorEvent(failure))
          controller.close()
          return
        }
        const chunk = step.value
        // What is held has no event end in it, so one can only begin in its last two bytes.
        const edge = lastBytes(pending, 2)
        if (eventEnd(edge.length === 0 ? chunk : Buffer.concat([edge, chunk]), 0) === -1) {
          pending.push(chunk)
          held += chunk.length
          if (held <= MAX_EVENT_BYTES) continue
          // A backend that never ends its event would grow this buffer without bound: cut it.
          options.upstream.close()
          const failure = await finish('failed')
          controller.enqueue(errorEvent(failure ?? new ApiError('provider_error', `the backend sent an event longer than ${MAX_EVENT_BYTES} bytes; the stream was cut`)))
          controller.close()
          return
        }
        pending.push(chunk)
        const joined = pending.length === 1 ? chunk : Buffer.concat(pending, held + chunk.length)
        let start = 0
        let wrote = false
        for (let end = eventEnd(joined, Math.max(0, held - 2)); end !== -1; end = eventEnd(joined, start)) {
          const data = eventData(decoder.decode(joined.subarray(start, end)))
          if (data === '[DONE]') {
            const held = joined.slice(start)
            if (start > 0) controller.enqueue(joined.slice(0, start))
            options.upstream.close()
            const failure = await finish('finished')
            controller.enqueue(failure ? errorEvent(failure) : held)
            controller.close()
            return
          }
          if (data !== '') options.observe(data)
          start = end
          wrote = true
        }
        if (wrote) controller.enqueue(joined.slice(0, start))
        const rest = joined.slice(start)
        pending = rest.length === 0 ? [] : [rest]
        held = rest.length
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
