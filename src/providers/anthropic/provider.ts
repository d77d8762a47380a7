import { dearestCacheWrite } from '../../inference/cache-ttl'
import type { ChatEvent } from '../../inference/canonical'
import type { ProviderConfig } from '../../config/config'
import { SseDecoder, type SseEvent } from '../../http/sse'
import { systemClock, type Clock } from '../../lib/clock'
import { UpstreamError, type AdapterCall, type Provider, type ProviderCall } from '../types'
import { CallControl } from './call-control'
import { errorFromResponse, errorFromTransport, protocolError, type ErrorContext } from './errors'
import { AnthropicStreamTranslator } from './from-upstream-stream'
import { MessagesPassThrough } from './pass-through'
import { toUpstream, UnsupportedRequestError, type AnthropicRequestBody } from './to-upstream'
import { openedAtFirstEvent } from '../first-event'
import { replay } from '../replay'

/** The API version every request pins (the only stable version of the Messages API). */
export const ANTHROPIC_VERSION = '2023-06-01'

/** Used when the provider's config has no `base_url`. It includes the version path. */
export const DEFAULT_ANTHROPIC_BASE_URL = 'https://api.anthropic.com/v1'

/** How much of a non-2xx body is read for classification and the log snippet. */
const ERROR_BODY_BYTES = 64 * 1024

/** Largest Messages JSON answer (a collected call) accepted. */
const MAX_JSON_BODY_BYTES = 16 * 1024 * 1024
/**
 * Largest declared-length stream read whole: beyond it events are handled as they arrive, so a
 * long body on a slow link still reaches the client in pieces (as the openai-compatible provider).
 */
const MAX_WHOLE_STREAM_BYTES = 256 * 1024

/** Seams for tests; production passes nothing. */
export interface AnthropicProviderOptions {
  /** Stamps `response-start.createdAt` (epoch ms) and resolves HTTP-date Retry-After. */
  readonly clock?: Clock
  /** Defaults to the global fetch. */
  readonly fetch?: (input: string, init: BunFetchRequestInit) => Promise<Response>
}

/**
 * The `anthropic` provider: Anthropic's native Messages API (POST `${baseUrl}/messages`),
 * streamed, except for a collected call (ProviderCall.collect), which asks `stream: false` and
 * turns the one Messages JSON into the same events (AnthropicStreamTranslator.message).
 *
 * `stream()` resolves once the upstream answered 2xx *and* sent its first event
 * (message_start), so an `error` event in place of message_start (e.g. `overloaded_error`)
 * rejects like a status would, and the router can still fall back. After that, failures are
 * in-band `error` events, except a caller abort, after which the events just end. Cancellation: the call's signal, the connect deadline (until response
 * headers) and the idle deadline (between body chunks) all abort one AbortController; a
 * consumer that stops iterating early aborts it too, so the upstream socket is always closed.
 */
export class AnthropicProvider implements Provider {
  readonly id: string
  private readonly url: string
  private readonly countUrl: string
  private readonly clock: Clock
  private readonly fetch: (input: string, init: BunFetchRequestInit) => Promise<Response>

  constructor(
    private readonly config: ProviderConfig,
    options: AnthropicProviderOptions = {},
  ) {
    if (config.type !== 'anthropic') throw new Error(`AnthropicProvider cannot serve a provider of type ${config.type}`)
    this.id = `anthropic:${config.id}`
    this.url = `${(config.baseUrl ?? DEFAULT_ANTHROPIC_BASE_URL).replace(/\/+$/, '')}/messages`
    this.countUrl = `${this.url}/count_tokens`
    this.clock = options.clock ?? systemClock
    this.fetch = options.fetch ?? ((input, init) => fetch(input, init))
  }

  async stream(call: ProviderCall): Promise<AsyncIterable<ChatEvent>> {
    const context: ErrorContext = { provider: this.id, model: call.upstreamModel, apiKey: this.config.apiKey }
    // A collected call asks for one JSON answer, whose headers come once it is generated.
    const collect = call.collect === true
    const timeouts = { connectMs: collect ? this.config.responseTimeoutMs : this.config.connectTimeoutMs, idleMs: this.config.idleTimeoutMs }
    if (call.signal.aborted) throw errorFromTransport('client', call.signal.reason, context, timeouts)
    const upstreamBody = this.encode(call)
    if (collect) upstreamBody.stream = false
    const body = JSON.stringify(upstreamBody)

    const control = new CallControl(call.signal, timeouts, call.abortable)
    let response: Response
    try {
      const headers = collect ? { ...this.headers(call.requestId), accept: 'application/json' } : this.headers(call.requestId)
      // `timeout: false`: our deadlines govern, not Bun's 5-minute socket idle timer.
      response = await this.fetch(this.url, { method: 'POST', headers, body, signal: control.signal, redirect: 'manual', timeout: false })
      control.headersReceived()
      if (!response.ok) {
        const text = await readErrorBody(response, control)
        throw errorFromResponse(response.status, response.headers, text, context, this.clock.now())
      }
    } catch (error) {
      // Classified before dispose(): a lent controller (the router's last attempt) is the
      // caller's own, and disposing aborts it, which would read as the client leaving (QA: a
      // reset on the last backend answered "aborted" and went uncounted in the upstream metrics).
      const failure = errorFromTransport(control.cause, error, context, timeouts)
      control.dispose()
      throw failure
    }

    const translator = new AnthropicStreamTranslator(context, () => this.clock.now(), call.requestId, dearestCacheWrite(call.request, call.request.route.price)?.ttl === '1h')
    if ((response.headers.get('content-type') ?? '').toLowerCase().includes('application/json')) {
      return replay(await readMessage(response, control, translator, context, timeouts), call.signal)
    }
    // A Messages client gets the content deltas as the upstream sent them (pass-through.ts).
    const stream: Stream = { translator, passThrough: call.passThrough === 'messages' ? new MessagesPassThrough(translator) : undefined }
    // A stream whose length was declared was complete before the answer (a cache, a buffering
    // proxy, a replay; Anthropic's own streams declare none): read whole and translated in one
    // pass, its events replayed, instead of a read, a decode and a promise per event.
    const whole = await readWholeStream(response, control, stream, context, timeouts)
    if (whole !== undefined) return replay(whole, call.signal)
    // Only a caller abort ends the events without an error event.
    return openedAtFirstEvent(translate(response, control, stream, context, timeouts), () =>
      control.cause === 'client' ? errorFromTransport('client', undefined, context, timeouts) : protocolError('The Anthropic stream ended without events', context),
    )
  }

  /**
   * POST /v1/messages/count_tokens with the prompt fields of the body `stream` would send (so
   * the count matches what a call would be billed for). Same deadlines; the answer is
   * `{"input_tokens": N}`.
   */
  async countTokens(call: ProviderCall): Promise<number> {
    const context: ErrorContext = { provider: this.id, model: call.upstreamModel, apiKey: this.config.apiKey }
    const timeouts = { connectMs: this.config.connectTimeoutMs, idleMs: this.config.idleTimeoutMs }
    // output_config too: a structured output's schema is part of the prompt Anthropic counts. The
    // cache hints go as they would on the call (count_tokens takes the top-level one as well).
    const { model, messages, system, tools, tool_choice, thinking, output_config, cache_control } = this.encode(call)
    const body = JSON.stringify({ model, messages, system, tools, tool_choice, thinking, output_config, cache_control })
    const control = new CallControl(call.signal, timeouts)
    try {
      const response = await this.fetch(this.countUrl, { method: 'POST', headers: { ...this.headers(call.requestId), accept: 'application/json' }, body, signal: control.signal, redirect: 'manual' })
      const text = await readCapped(response, ERROR_BODY_BYTES)
      if (!response.ok) throw errorFromResponse(response.status, response.headers, text, context, this.clock.now())
      const count = (JSON.parse(text) as { input_tokens?: unknown }).input_tokens
      if (typeof count !== 'number' || !Number.isInteger(count) || count < 0) throw protocolError('Anthropic count_tokens answered without input_tokens', context)
      return count
    } catch (error) {
      if (error instanceof UpstreamError) throw error
      if (error instanceof SyntaxError) throw protocolError('Anthropic count_tokens answered malformed JSON', context)
      throw errorFromTransport(control.cause, error, context, timeouts)
    } finally {
      control.dispose()
    }
  }

  checkRequest(call: AdapterCall): void {
    this.encode(call)
  }

  /** The Messages body of a call; a request it cannot carry is refused, before any call (phase `adapter`). */
  private encode(call: AdapterCall): AnthropicRequestBody {
    try {
      return toUpstream(call.request, call.upstreamModel, call.thinking)
    } catch (error) {
      // Only the expected refusal is a bad request; anything else is a bug and stays one.
      if (!(error instanceof UnsupportedRequestError)) throw error
      throw new UpstreamError('bad-request', `The request cannot be sent to Anthropic: ${error.message}`, this.id, call.upstreamModel, { param: error.param, phase: 'adapter' })
    }
  }

  /**
   * Only what Anthropic needs, plus our request id (so a request can be followed into the
   * upstream's logs): never the client's credential, IP, user id or other headers.
   */
  private headers(requestId: string): Record<string, string> {
    return {
      'content-type': 'application/json',
      'x-request-id': requestId,
      accept: 'text/event-stream',
      'anthropic-version': ANTHROPIC_VERSION,
      ...(this.config.apiKey !== undefined ? { 'x-api-key': this.config.apiKey } : {}),
    }
  }
}

/**
 * Body bytes → SSE events → ChatEvents. A transport failure becomes one in-band error event,
 * except when the caller aborted: nobody is listening for a terminal event then, and the events
 * simply end (the pipeline meters what it saw). Each network chunk is decoded and translated in
 * one synchronous step, as the openai-compatible provider does: this is the one async layer
 * per stream (a decoder and a chunk reader as async generators of their own cost two more
 * promise hops per event).
 */
async function* translate(
  response: Response,
  control: CallControl,
  stream: Stream,
  context: ErrorContext,
  timeouts: { connectMs: number; idleMs: number },
): AsyncGenerator<ChatEvent, void, undefined> {
  const translator = stream.translator
  const decoder = new SseDecoder()
  const sse: SseEvent[] = []
  const out: ChatEvent[] = []
  try {
    if (response.body !== null) {
      for (let chunk = await control.read(response.body); chunk !== undefined; chunk = await control.read(response.body)) {
        decoder.push(chunk, sse)
        translateEvents(sse, stream, out)
        sse.length = 0
        // message_stop: the connection's last bytes are read, not torn down (CallControl.dispose).
        if (translator.done && out[out.length - 1]?.type === 'finish') control.protocolEnded()
        for (const event of out) yield event
        out.length = 0
        if (translator.done) return
      }
    }
    for (const event of translator.end()) yield event
  } catch (error) {
    // The usage reported before the cut is billed (message_start's input, message_delta's output).
    if (!translator.done && control.cause !== 'client') yield translator.errorEvent(errorFromTransport(control.cause, error, context, timeouts))
  } finally {
    control.dispose()
  }
}

/** A stream's translator, and its pass-through when the client speaks Messages. */
interface Stream {
  readonly translator: AnthropicStreamTranslator
  readonly passThrough: MessagesPassThrough | undefined
}

/** Translates decoded SSE events into `out`, up to the terminal one. */
function translateEvents(sse: SseEvent[], { translator, passThrough }: Stream, out: ChatEvent[]): void {
  if (passThrough !== undefined) return passThrough.events(sse, out)
  for (const event of sse) {
    for (const translated of translator.push(event)) out.push(translated)
    if (translator.done) return
  }
}

/**
 * The events of a declared-length stream (see MAX_WHOLE_STREAM_BYTES), read before `stream()`
 * resolves: a failed read, or an error in place of the first event, rejects like a status would,
 * so the router may still try another backend. Undefined, with nothing read, for any other body.
 */
async function readWholeStream(
  response: Response,
  control: CallControl,
  stream: Stream,
  context: ErrorContext,
  timeouts: { connectMs: number; idleMs: number },
): Promise<ChatEvent[] | undefined> {
  let text: string | undefined
  try {
    text = await control.wholeText(response, MAX_WHOLE_STREAM_BYTES)
  } catch (error) {
    // Classified before dispose(), which aborts a lent controller (see stream()).
    const failure = errorFromTransport(control.cause, error, context, timeouts)
    control.dispose()
    throw failure
  }
  if (text === undefined) return undefined
  control.dispose()
  const events: ChatEvent[] = []
  if (stream.passThrough !== undefined) stream.passThrough.whole(text, events)
  else {
    const sse: SseEvent[] = []
    new SseDecoder().pushText(text, sse)
    translateEvents(sse, stream, events)
  }
  for (const event of stream.translator.end()) events.push(event)
  // Never empty: a stream that ends short of message_stop ends with an error event.
  const first = events[0]!
  if (first.type === 'error') throw first.error
  return events
}

/**
 * A whole Messages answer (a collected call), read before `stream()` resolves under the idle
 * deadline, so an error object in a 200 still rejects before any event and the router may try
 * another backend.
 */
async function readMessage(
  response: Response,
  control: CallControl,
  translator: AnthropicStreamTranslator,
  context: ErrorContext,
  timeouts: { connectMs: number; idleMs: number },
): Promise<ChatEvent[]> {
  const chunks: Uint8Array[] = []
  try {
    let size = 0
    if (response.body !== null) {
      for await (const chunk of control.chunks(response.body)) {
        size += chunk.byteLength
        if (size > MAX_JSON_BODY_BYTES) throw protocolError('The Anthropic answer is too large', context)
        chunks.push(chunk)
      }
    }
  } catch (error) {
    throw errorFromTransport(control.cause, error, context, timeouts)
  } finally {
    control.dispose()
  }
  const events = translator.message(Buffer.concat(chunks).toString('utf8'))
  const failure = events.find(event => event.type === 'error')
  if (failure?.type === 'error') throw failure.error
  return events
}

/**
 * Up to ERROR_BODY_BYTES of a non-2xx body as text, read under the idle deadline like any body
 * (README, "Upstream deadlines"): under the headers' deadline, a stalled error body of a collected
 * call held it up to response_timeout_ms. A stall or a cut yields what arrived (the status
 * decides); only the caller leaving ends the call.
 */
async function readErrorBody(response: Response, control: CallControl): Promise<string> {
  const chunks: Uint8Array[] = []
  let total = 0
  try {
    while (response.body !== null && total < ERROR_BODY_BYTES) {
      const chunk = await control.read(response.body)
      if (chunk === undefined) break
      chunks.push(chunk)
      total += chunk.byteLength
    }
  } catch (error) {
    if (control.cause === 'client') throw error
  }
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, ERROR_BODY_BYTES))
}

/** Up to `maxBytes` of a body as text; a failing read yields what arrived (the status decides). */
async function readCapped(response: Response, maxBytes: number): Promise<string> {
  if (response.body === null) return ''
  const reader = response.body.getReader()
  const chunks: Uint8Array[] = []
  let total = 0
  try {
    while (total < maxBytes) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      total += value.byteLength
    }
  } catch (error) {
    // An abort (deadline or client) while reading the error body is that failure, not the status.
    if (error instanceof Error && error.name === 'AbortError') throw error
  } finally {
    reader.releaseLock()
  }
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, maxBytes))
}
