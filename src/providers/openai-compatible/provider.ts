// The Chat Completions adapter: OpenAI, vLLM, Ollama, llama.cpp server and anything else that
// speaks POST {base_url}/chat/completions with SSE streaming.

import type { ProviderConfig } from '../../config/config'
import { SseDecoder, type SseEvent } from '../../http/sse'
import type { ChatEvent } from '../../inference/canonical'
import { UpstreamError, type AdapterCall, type Provider, type ProviderCall } from '../types'
import { classifyStatus, type ErrorOrigin } from './errors'
import { ChunkTranslator, type StreamContext } from './from-upstream-stream'
import { openUpstreamStream, type UpstreamStream } from './open-upstream-stream'
import { PassThroughTranslator } from './pass-through'
import { toUpstream, UnsupportedPartError, type ChatCompletionsBody, type ChatCompletionsOptions } from './to-upstream'
import { openedAtFirstEvent } from '../first-event'
import { replay } from '../replay'

/** Backend choices that config may set; see ChatCompletionsOptions. */
export type OpenAICompatibleOptions = ChatCompletionsOptions

/** Largest non-streamed (JSON) 2xx body accepted from a backend that ignored `stream: true`. */
const MAX_JSON_BODY_BYTES = 16 * 1024 * 1024
/**
 * Largest declared-length stream read whole (~1,000 chunks): beyond it chunks are handled as they
 * arrive, so a long body on a slow link still reaches the client in pieces.
 */
const MAX_WHOLE_STREAM_BYTES = 256 * 1024

/**
 * A Provider over the Chat Completions API (ARCHITECTURE.md §6, §8 step 6). The upstream sees
 * only the request body built by toUpstream, `Authorization: Bearer <apiKey>` when the config
 * has a key, and fixed content headers: never a client header, credential, IP or `user`.
 */
export class OpenAICompatibleProvider implements Provider {
  readonly id: string
  private readonly endpoint: string

  /** `id`: the provider that wraps this one (an attested backend's chat), so its failures carry that provider's label. */
  constructor(
    private readonly config: ProviderConfig,
    private readonly options: OpenAICompatibleOptions = {},
    id = `openai-compatible:${config.id}`,
  ) {
    if (config.baseUrl === undefined || config.baseUrl === '') throw new Error(`provider ${config.id}: an openai-compatible provider needs a base_url`)
    this.id = id
    this.endpoint = `${config.baseUrl.replace(/\/+$/, '')}/chat/completions`
  }

  checkRequest(call: AdapterCall): void {
    this.encode(call)
  }

  /** The Chat Completions body of a call; a part this wire cannot carry is refused, before any call (phase `adapter`). */
  private encode(call: AdapterCall): ChatCompletionsBody {
    try {
      return toUpstream(call.request, call.upstreamModel, this.options)
    } catch (error) {
      if (error instanceof UnsupportedPartError) throw new UpstreamError('bad-request', error.message, this.id, call.upstreamModel, { phase: 'adapter' })
      throw error
    }
  }

  async stream(call: ProviderCall): Promise<AsyncIterable<ChatEvent>> {
    const origin: ErrorOrigin = { provider: this.id, model: call.upstreamModel, apiKey: this.config.apiKey }
    const upstreamBody = this.encode(call)
    const body = JSON.stringify(call.collect ? asCollected(upstreamBody) : upstreamBody)
    // Our request id goes along, so one request can be followed into the upstream's logs (vLLM,
    // llama.cpp and most proxies log X-Request-Id).
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: call.collect ? 'application/json' : 'text/event-stream', 'x-request-id': call.requestId }
    if (this.config.apiKey) headers.authorization = `Bearer ${this.config.apiKey}`
    const upstream = await openUpstreamStream({
      url: this.endpoint,
      headers,
      body,
      signal: call.signal,
      abortable: call.abortable,
      // A JSON answer's headers come once the whole answer is generated.
      connectTimeoutMs: call.collect ? this.config.responseTimeoutMs : this.config.connectTimeoutMs,
      idleTimeoutMs: this.config.idleTimeoutMs,
      origin,
      classifyStatus: (status, responseHeaders, text) => classifyStatus(origin, status, responseHeaders, text),
    })
    const context: StreamContext = { provider: this.id, model: call.upstreamModel, requestId: call.requestId }
    // Chosen by what came back, not what was asked: some backends ignore `stream` either way.
    if ((upstream.headers.get('content-type') ?? '').toLowerCase().includes('application/json')) {
      // Read whole, and the upstream closed, before this returns.
      return replay(await eventsFromJsonBody(upstream, context), call.signal)
    }
    // A Chat Completions client gets this upstream's chunks passed through (pass-through.ts).
    const translator = call.passThrough === 'chat-completions' ? new PassThroughTranslator(context) : new ChunkTranslator(context)
    // A stream whose length the upstream declared was complete before it answered (a live
    // stream cannot know its length; a cache, a buffering proxy or a replay can): read whole in
    // one call and translated in one pass, instead of a read, a decode and a promise per network
    // chunk. At 128 connections it held ~15% less CPU per stream, mostly fewer collections of
    // the chunks' buffers (bench/README.md). A failed read throws before any event, so the
    // router may still try another backend.
    let whole: string | undefined
    try {
      whole = await upstream.wholeText(MAX_WHOLE_STREAM_BYTES)
    } catch (error) {
      upstream.close()
      throw error
    }
    if (whole !== undefined) {
      // Read to its end: closing stops its idle timer and the abort listener, which would hold the
      // response until the idle deadline (RSS past 1.9 GiB within a minute without it).
      upstream.close()
      const events = eventsFromWholeSse(whole, translator)
      // Failed before any output (first-event.ts): the router may try the next backend.
      if (events[0]?.type === 'error') throw events[0].error
      return replay(events, call.signal)
    }
    // Only the caller leaving ends the events without an error event.
    return openedAtFirstEvent(fromSse(upstream, call.signal, translator, context), () =>
      new UpstreamError(call.signal.aborted ? 'aborted' : 'server', 'the upstream stream ended without events', this.id, call.upstreamModel),
    )
  }
}

type Translator = Pick<ChunkTranslator, 'event' | 'end' | 'ended' | 'reportedUsage'>

/** Translates decoded SSE events into `out`, up to the terminal one. */
function translate(sse: SseEvent[], translator: Translator, out: ChatEvent[]): void {
  for (const event of sse) {
    translator.event(event, out)
    if (translator.ended) return
  }
}

/** The events of a stream read whole, as fromSse would produce them. */
function eventsFromWholeSse(text: string, translator: Translator): ChatEvent[] {
  const out: ChatEvent[] = []
  if (translator instanceof PassThroughTranslator) {
    translator.whole(text, out)
  } else {
    const sse: SseEvent[] = []
    new SseDecoder().pushText(text, sse)
    translate(sse, translator, out)
  }
  translator.end(out)
  return out
}

/**
 * The streamed events. A failure of the byte stream becomes one in-band `error` event (mid-stream
 * failures never throw, ARCHITECTURE.md §8 step 7), except when the call's own signal aborted:
 * the caller left, so the iterator just ends. Each network chunk is decoded and translated in one
 * synchronous step (SseDecoder, ChunkTranslator): this is the one async layer per stream.
 */
async function* fromSse(
  upstream: UpstreamStream,
  signal: AbortSignal,
  translator: Translator,
  context: StreamContext,
): AsyncGenerator<ChatEvent> {
  const decoder = new SseDecoder()
  const sse: SseEvent[] = []
  const out: ChatEvent[] = []
  try {
    // Read chunk by chunk, not through `upstream.bytes`: one async generator per chunk fewer.
    for (let chunk = await upstream.read(); !chunk.done; chunk = await upstream.read()) {
      decoder.push(chunk.value, sse)
      translate(sse, translator, out)
      sse.length = 0
      // The protocol's end: the connection can go back to the pool (see UpstreamStream.complete).
      if (translator.ended && out[out.length - 1]?.type === 'finish') upstream.complete()
      for (const event of out) {
        if (signal.aborted) return
        yield event
      }
      out.length = 0
      if (translator.ended) return
    }
    translator.end(out)
    for (const event of out) yield event
  } catch (error) {
    // The caller left: the iterator just ends. (A lent controller is the signal's, and the idle
    // deadline aborts it too: that is a timeout, reported as one.)
    if (signal.aborted && !(error instanceof UpstreamError && error.kind === 'timeout')) return
    // The usage a chunk reported before the cut (its input count is billed, not an estimate).
    const failed: ChatEvent = { type: 'error', error: asUpstreamError(error, context) }
    const usage = translator.reportedUsage
    if (usage !== undefined) failed.usage = usage
    yield failed
  } finally {
    upstream.close()
  }
}

/**
 * The body of a collected call: one chat.completion instead of a stream (the usage is part of it).
 * Decoding ~20 SSE chunks cost ~17% of a non-streamed reply's CPU; one JSON parse replaces it.
 */
function asCollected(body: ReturnType<typeof toUpstream>): Record<string, unknown> {
  // Changed in place (the body is this call's own): a rest-and-spread copy of it was ~0.4% of a
  // collected call's CPU. JSON.stringify leaves out the undefined stream_options.
  const collected = body as unknown as Record<string, unknown>
  collected.stream = false
  collected.stream_options = undefined
  return collected
}

/**
 * A chat.completion JSON answer: asked for by a collected call, or from a backend that ignored
 * `stream: true`. It is read whole before `stream()` resolves, so an error object in a 200 still
 * rejects before any event (and the router may try another backend); a completion is replayed
 * through the same translator as a single delta, so its events have the same shape as a stream's.
 */
async function eventsFromJsonBody(upstream: UpstreamStream, context: StreamContext): Promise<ChatEvent[]> {
  let parsed: unknown
  try {
    let text = await upstream.wholeText(MAX_JSON_BODY_BYTES)
    if (text === undefined) {
      // No declared length (or one past the cap): counted as it streams.
      const chunks: Uint8Array[] = []
      let size = 0
      for await (const chunk of upstream.bytes) {
        size += chunk.length
        if (size > MAX_JSON_BODY_BYTES) throw new UpstreamError('server', 'upstream JSON answer too large', context.provider, context.model)
        chunks.push(chunk)
      }
      text = Buffer.concat(chunks).toString('utf8')
    }
    parsed = JSON.parse(text)
  } catch (error) {
    throw error instanceof UpstreamError ? error : new UpstreamError('server', 'upstream answered 2xx with malformed JSON', context.provider, context.model)
  } finally {
    upstream.close()
  }
  // An object that is neither an error nor a completion with its first choice (a proxy's status
  // object, an empty `choices`) is no answer: read as one, it was a 200 with nothing in it, billed
  // the input, and no other backend was tried.
  if (isNoCompletion(parsed)) throw new UpstreamError('server', 'upstream answered 2xx JSON without a completion', context.provider, context.model)
  const out: ChatEvent[] = []
  const translator = new ChunkTranslator(context)
  // The translator reads a choice's `message` where a chunk has `delta`, and numbers tool calls
  // without an `index` by position: a completion is one chunk whose delta is the whole message.
  translator.push(parsed, out)
  translator.done(out)
  const failure = out.find(event => event.type === 'error')
  if (failure !== undefined && failure.type === 'error') throw failure.error
  return out
}

/** A JSON object with no error and no choice 0 (the translator reports errors and non-objects itself). */
function isNoCompletion(parsed: unknown): boolean {
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return false
  const { error, object, choices } = parsed as { error?: unknown; object?: unknown; choices?: unknown }
  if ((error !== undefined && error !== null) || object === 'error') return false
  return !Array.isArray(choices) || !choices.some(choice => typeof choice === 'object' && choice !== null && ((choice as { index?: unknown }).index ?? 0) === 0)
}

function asUpstreamError(error: unknown, context: { provider: string; model: string }): UpstreamError {
  if (error instanceof UpstreamError) return error
  return new UpstreamError('server', `upstream stream failed: ${error instanceof Error ? error.message : String(error)}`, context.provider, context.model)
}
