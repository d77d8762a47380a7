// The HTTP side of a streaming upstream call (ARCHITECTURE.md §8 step 6): one AbortController
// (the call's own when it is lent, else one tied to the call's signal), a deadline for the
// response headers, an idle deadline between body chunks, and non-2xx answers read (a bounded
// excerpt) and classified before anything streams.
// Nothing here is specific to Chat Completions: the caller passes the URL, headers, body and
// the status classifier.

import { UpstreamError } from '../types'
import { declaresAtMost } from '../declared-length'
import { drainRest } from '../drain-rest'
import { connectionError, ERROR_BODY_READ_BYTES, type ErrorOrigin } from './errors'

/** What to send and how long to wait. */
export interface UpstreamHttpCall {
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: string
  /** The call's signal: when it aborts, the upstream request is aborted. */
  readonly signal: AbortSignal
  /** The controller behind `signal`, when this call may abort it (ProviderCall.abortable). */
  readonly abortable?: AbortController
  /** Deadline for the status line and headers (the provider's response_timeout_ms for a JSON answer). */
  readonly connectTimeoutMs: number
  /** Longest wait for the next body chunk while one is being read. */
  readonly idleTimeoutMs: number
  readonly origin: ErrorOrigin
  /** Turns a non-2xx answer (with up to ERROR_BODY_READ_BYTES of its body) into an UpstreamError. */
  readonly classifyStatus: (status: number, headers: Headers, body: string) => UpstreamError
}

export type ReadResult = { done: true; value?: undefined } | { done: false; value: Uint8Array }

/** A 2xx upstream answer whose body is still to be read. */
export interface UpstreamStream {
  readonly status: number
  readonly headers: Headers
  /**
   * The body bytes. Throws an UpstreamError: `timeout` after `idleTimeoutMs` of silence while
   * reading, `connection` on a reset, `aborted` when the call's signal aborted.
   */
  readonly bytes: AsyncIterable<Uint8Array>
  /** The next body chunk, as `bytes` yields them, without an iterator around it (the SSE loop's own). */
  read(): Promise<ReadResult>
  /**
   * The whole body as UTF-8 text in one read, when its declared content-length is at most `limit`
   * bytes and no chunk was read yet; undefined otherwise (read chunks then). Errors as for
   * `bytes`. One native read and decode instead of a reader loop (~1.7 µs less on the event loop
   * per JSON answer) and no Buffer view to decode bytes through (~1 µs less again).
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
  const upstream = new UpstreamResponse(call)
  // The call's abort reaches the upstream through the object's handleEvent (no closure per call).
  // A lent controller needs no link: a listener and a second controller cost ~4% of a
  // non-streamed request's CPU (bench/README.md, "The client's signal read on a tick").
  if (upstream.linked) signal.addEventListener('abort', upstream)
  const deadline = setTimeout(onDeadline, call.connectTimeoutMs, upstream)
  let response: Response
  try {
    // `timeout: false`: our deadlines govern; Bun's own socket idle timer (5 min) would cut a
    // long JSON answer, whose headers come only once it is generated.
    response = await fetch(call.url, { method: 'POST', headers: call.headers, body: call.body, signal: upstream.controller.signal, redirect: 'manual', timeout: false })
  } catch (error) {
    if (upstream.linked) signal.removeEventListener('abort', upstream)
    // The deadline first: with a lent controller, its abort is the call's signal's too.
    if (upstream.cause === 'deadline') throw new UpstreamError('timeout', `no response headers within ${call.connectTimeoutMs} ms`, origin.provider, origin.model)
    if (signal.aborted) throw abortedError(origin)
    throw connectionError(origin, error)
  } finally {
    clearTimeout(deadline)
  }
  upstream.received(response)
  if (response.status < 200 || response.status > 299) {
    let text = ''
    try {
      text = await readText(upstream, ERROR_BODY_READ_BYTES)
    } catch (error) {
      if (error instanceof UpstreamError && error.kind === 'aborted') {
        upstream.close()
        throw error
      }
      // A body cut short still classifies by its status.
    }
    upstream.close()
    throw call.classifyStatus(response.status, response.headers, text)
  }
  return upstream
}

function onDeadline(upstream: UpstreamResponse): void {
  // Already aborted (the call's signal, before its abort reached the fetch): not a timeout.
  if (upstream.controller.signal.aborted) return
  upstream.cause = 'deadline'
  upstream.controller.abort()
}

function onIdle(upstream: UpstreamResponse): void {
  // Upstream silence only while a read waits: a consumer slow to pull (a slow client) is not it.
  if (!upstream.reading || upstream.controller.signal.aborted) return
  upstream.cause = 'idle'
  upstream.controller.abort()
}

/**
 * One upstream call's answer and its controls. A class rather than closures over the call: a
 * chat request makes one, and its methods and timer callbacks are shared (~11 functions and
 * their scope fewer per call).
 */
class UpstreamResponse implements UpstreamStream {
  // Only AbortController.abort() reliably closes the upstream socket (STACK-NOTES.md §8).
  readonly controller: AbortController
  /** The controller is this call's own, tied to the call's signal by a listener (not a lent one). */
  readonly linked: boolean
  cause: 'deadline' | 'idle' | undefined
  /** A read is waiting for the upstream (the idle deadline counts only then). */
  reading = false
  private response!: Response
  /** One timer for the whole body, re-armed when a read starts (see onIdle). */
  private idle!: ReturnType<typeof setTimeout>
  // Taken on the first read: until then `wholeText` may read the body at once instead.
  private reader: ReadableStreamDefaultReader<Uint8Array> | undefined
  private chunks: AsyncGenerator<Uint8Array> | undefined
  private closed = false
  private finished = false
  private completed = false

  constructor(private readonly call: UpstreamHttpCall) {
    this.controller = call.abortable ?? new AbortController()
    this.linked = call.abortable === undefined
  }

  get status(): number {
    return this.response.status
  }

  get headers(): Headers {
    return this.response.headers
  }

  /** The generator is made on first use: a JSON answer read with wholeText never needs one. */
  get bytes(): AsyncIterable<Uint8Array> {
    return (this.chunks ??= this.generate())
  }

  /** The response headers arrived: from now on the idle deadline applies to reads. */
  received(response: Response): void {
    this.response = response
    this.idle = setTimeout(onIdle, this.call.idleTimeoutMs, this)
  }

  /** The call's signal aborted (EventListener object: `signal.addEventListener('abort', this)`). */
  handleEvent(): void {
    this.controller.abort()
  }

  complete(): void {
    this.completed = true
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    if (this.linked) this.call.signal.removeEventListener('abort', this)
    // A body read to its end has released its connection; aborting it would only cost time.
    if (this.finished) return clearTimeout(this.idle)
    if (this.completed && this.response.body !== null) {
      // Past the protocol's end only the body's last bytes remain: read them (still under the
      // idle deadline) so the connection returns to the pool; aborting would tear it down.
      drainRest(async () => (await this.read()).done).then(
        () => clearTimeout(this.idle),
        () => {
          clearTimeout(this.idle)
          this.controller.abort()
        },
      )
      return
    }
    clearTimeout(this.idle)
    this.controller.abort()
    this.reader?.cancel().catch(() => {})
  }

  async read(): Promise<ReadResult> {
    this.reader ??= this.response.body?.getReader() as ReadableStreamDefaultReader<Uint8Array> | undefined
    if (this.reader === undefined) return { done: true, value: undefined }
    this.reading = true
    this.idle.refresh()
    try {
      const result = await this.reader.read()
      if (result.done) this.finished = true
      return result
    } catch (error) {
      throw this.readFailure(error)
    } finally {
      this.reading = false
    }
  }

  async wholeText(limit: number): Promise<string | undefined> {
    if (this.reader !== undefined || !declaresAtMost(this.response.headers, limit)) return undefined
    // The idle deadline covers the whole read here: a declared body that stalls is cut as silence.
    this.reading = true
    this.idle.refresh()
    try {
      const text = await this.response.text()
      this.finished = true
      return text
    } catch (error) {
      throw this.readFailure(error)
    } finally {
      this.reading = false
    }
  }

  private readFailure(error: unknown): UpstreamError {
    const { origin } = this.call
    // The idle deadline first: with a lent controller, its abort is the call's signal's too.
    if (this.cause === 'idle') return new UpstreamError('timeout', `no data from upstream for ${this.call.idleTimeoutMs} ms`, origin.provider, origin.model)
    if (this.call.signal.aborted) return abortedError(origin)
    return connectionError(origin, error)
  }

  private async *generate(): AsyncGenerator<Uint8Array> {
    while (true) {
      const { done, value } = await this.read()
      if (done) return
      yield value
    }
  }
}

/** The error for a call its own signal cancelled. */
export function abortedError(origin: ErrorOrigin): UpstreamError {
  return new UpstreamError('aborted', 'the call was aborted', origin.provider, origin.model)
}

/** Up to about `limit` bytes of the body as text (a multi-byte character at the cut may be replaced). */
async function readText(upstream: UpstreamResponse, limit: number): Promise<string> {
  const decoder = new TextDecoder()
  let text = ''
  let total = 0
  while (total < limit) {
    const { done, value } = await upstream.read()
    if (done) break
    const piece = value.subarray(0, limit - total)
    total += piece.length
    text += decoder.decode(piece, { stream: true })
  }
  return text + decoder.decode()
}
