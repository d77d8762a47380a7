// The HTTP side of a streaming upstream call (ARCHITECTURE.md §8 step 6): one AbortController
// tied to the call's signal, a deadline for the response headers, an idle deadline between body
// chunks, and non-2xx answers read (a bounded excerpt) and classified before anything streams.
// Nothing here is specific to Chat Completions: the caller passes the URL, headers, body and
// the status classifier.

import { UpstreamError } from '../types'
import { connectionError, ERROR_BODY_READ_BYTES, type ErrorOrigin } from './errors'

/** What to send and how long to wait. */
export interface UpstreamHttpCall {
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: string
  /** The call's signal: when it aborts, the upstream request is aborted. */
  readonly signal: AbortSignal
  /** Deadline for the status line and headers (the provider's response_timeout_ms for a JSON answer). */
  readonly connectTimeoutMs: number
  /** Longest wait for the next body chunk while one is being read. */
  readonly idleTimeoutMs: number
  readonly origin: ErrorOrigin
  /** Turns a non-2xx answer (with up to ERROR_BODY_READ_BYTES of its body) into an UpstreamError. */
  readonly classifyStatus: (status: number, headers: Headers, body: string) => UpstreamError
}

type ReadResult = { done: true; value?: undefined } | { done: false; value: Uint8Array }

/** A 2xx upstream answer whose body is still to be read. */
export interface UpstreamStream {
  readonly status: number
  readonly headers: Headers
  /**
   * The body bytes. Throws an UpstreamError: `timeout` after `idleTimeoutMs` of silence while
   * reading, `connection` on a reset, `aborted` when the call's signal aborted.
   */
  readonly bytes: AsyncIterable<Uint8Array>
  /**
   * The whole body as UTF-8 text in one read, when its declared content-length is at most `limit`
   * bytes and `bytes` was not started; undefined otherwise (read `bytes` then). Errors as for
   * `bytes`. One native read and decode instead of a reader loop (~1.7 µs less on the event loop
   * per JSON answer), and no Buffer view to decode it through (~1 µs more).
   */
  wholeText(limit: number): Promise<string | undefined>
  /** Aborts the upstream request, which closes its socket (idempotent). */
  close(): void
  /**
   * The protocol's end was seen (a `[DONE]`): a later close() only releases the body, without
   * aborting, so the connection goes back to the pool instead of being torn down.
   */
  complete(): void
}

/**
 * POSTs and waits for the headers. Resolves on 2xx; rejects with an UpstreamError otherwise:
 * `aborted` (the call's signal), `timeout` (no headers before the deadline), `connection`
 * (no HTTP answer), or the classified status. Redirects are not followed: a base URL comes
 * from config and a redirect means it is wrong (and following one could carry the key elsewhere).
 */
export async function openUpstreamStream(call: UpstreamHttpCall): Promise<UpstreamStream> {
  const { origin, signal } = call
  if (signal.aborted) throw abortedError(origin)
  // Only AbortController.abort() reliably closes the upstream socket (STACK-NOTES.md §8).
  const controller = new AbortController()
  let cause: 'deadline' | 'idle' | undefined
  const onAbort = () => controller.abort()
  signal.addEventListener('abort', onAbort, { once: true })
  const deadline = setTimeout(() => {
    cause = 'deadline'
    controller.abort()
  }, call.connectTimeoutMs)

  let response: Response
  try {
    // `timeout: false`: our deadlines govern; Bun's own socket idle timer (5 min) would cut a
    // long JSON answer, whose headers come only once it is generated.
    response = await fetch(call.url, { method: 'POST', headers: call.headers, body: call.body, signal: controller.signal, redirect: 'manual', timeout: false })
  } catch (error) {
    signal.removeEventListener('abort', onAbort)
    if (signal.aborted) throw abortedError(origin)
    if (cause === 'deadline') throw new UpstreamError('timeout', `no response headers within ${call.connectTimeoutMs} ms`, origin.provider, origin.model)
    throw connectionError(origin, error)
  } finally {
    clearTimeout(deadline)
  }

  // One timer for the whole body, re-armed when a read starts: a consumer that is slow to pull
  // (a slow client) is not upstream silence, so it fires only while a read is pending.
  let reading = false
  const idle = setTimeout(() => {
    if (!reading) return
    cause = 'idle'
    controller.abort()
  }, call.idleTimeoutMs)
  // Taken on the first read: until then `wholeText` may read the body at once instead.
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined
  let closed = false
  let finished = false
  const close = () => {
    if (closed) return
    closed = true
    signal.removeEventListener('abort', onAbort)
    // A body read to its end has released its connection; aborting it would only cost time.
    if (finished) return clearTimeout(idle)
    if (completed && response.body !== null) {
      // Past the protocol's end only the body's last bytes remain: read them (still under the
      // idle deadline) so the connection returns to the pool; aborting would tear it down.
      drainRest(read).then(
        () => clearTimeout(idle),
        () => {
          clearTimeout(idle)
          controller.abort()
        },
      )
      return
    }
    clearTimeout(idle)
    controller.abort()
    reader?.cancel().catch(() => {})
  }
  let completed = false
  const readFailure = (error: unknown): UpstreamError => {
    if (signal.aborted) return abortedError(origin)
    if (cause === 'idle') return new UpstreamError('timeout', `no data from upstream for ${call.idleTimeoutMs} ms`, origin.provider, origin.model)
    return connectionError(origin, error)
  }
  const read = async (): Promise<ReadResult> => {
    reader ??= response.body?.getReader() as ReadableStreamDefaultReader<Uint8Array> | undefined
    if (reader === undefined) return { done: true, value: undefined }
    reading = true
    idle.refresh()
    try {
      const result = await reader.read()
      if (result.done) finished = true
      return result
    } catch (error) {
      throw readFailure(error)
    } finally {
      reading = false
    }
  }
  const wholeText = async (limit: number): Promise<string | undefined> => {
    const declared = response.headers.get('content-length')
    if (reader !== undefined || declared === null || !/^\d+$/.test(declared) || Number(declared) > limit) return undefined
    // The idle deadline covers the whole read here: a declared body that stalls is cut as silence.
    reading = true
    idle.refresh()
    try {
      const text = await response.text()
      finished = true
      return text
    } catch (error) {
      throw readFailure(error)
    } finally {
      reading = false
    }
  }

  if (response.status < 200 || response.status > 299) {
    let text = ''
    try {
      text = await readText(read, ERROR_BODY_READ_BYTES)
    } catch (error) {
      if (error instanceof UpstreamError && error.kind === 'aborted') {
        close()
        throw error
      }
      // A body cut short still classifies by its status.
    }
    close()
    throw call.classifyStatus(response.status, response.headers, text)
  }

  async function* bytes(): AsyncGenerator<Uint8Array> {
    while (true) {
      const { done, value } = await read()
      if (done) return
      yield value
    }
  }
  // The generator is made on first use: a JSON answer read with wholeText never needs one.
  let chunks: AsyncGenerator<Uint8Array> | undefined
  return {
    status: response.status,
    headers: response.headers,
    get bytes() {
      return (chunks ??= bytes())
    },
    wholeText,
    close,
    complete: () => (completed = true),
  }
}

/** Reads what is left of a body whose protocol already ended, at most a few chunks' worth. */
async function drainRest(read: () => Promise<ReadResult>): Promise<void> {
  for (let chunks = 0; chunks < 16; chunks += 1) if ((await read()).done) return
  throw new Error('upstream kept sending after the end of its stream')
}

/** The error for a call its own signal cancelled. */
export function abortedError(origin: ErrorOrigin): UpstreamError {
  return new UpstreamError('aborted', 'the call was aborted', origin.provider, origin.model)
}

/** Up to about `limit` bytes of the body as text (a multi-byte character at the cut may be replaced). */
async function readText(read: () => Promise<ReadResult>, limit: number): Promise<string> {
  const decoder = new TextDecoder()
  let text = ''
  let total = 0
  while (total < limit) {
    const { done, value } = await read()
    if (done) break
    const piece = value.subarray(0, limit - total)
    total += piece.length
    text += decoder.decode(piece, { stream: true })
  }
  return text + decoder.decode()
}
