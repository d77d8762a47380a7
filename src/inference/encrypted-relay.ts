// Encrypted chat on POST /v1/chat/completions (spec §4.10; TEE-PROTOCOL.md B3, B4): rules,
// key pinning to fresh evidence, reserve from the envelope, relay bytes, settle from the
// backend's usage before the final byte. The gateway never decrypts, logs or keeps ciphertext.

import type { AttestationService, AttestedBackend } from '../attestation/service'
import type { Metering } from '../billing/metering'
import { chargeForTokens } from '../billing/pricing'
import type { ModelRoute } from '../catalog/types'
import { ApiError } from '../http/errors'
import type { Principal } from '../keys/principal'
import type { Clock } from '../lib/clock'
import type { GatewayMetrics } from '../observability/gateway-metrics'
import type { Lifecycle } from '../observability/lifecycle'
import type { Logger } from '../observability/logger'
import { recordOf } from '../observability/request-log'
import { UpstreamError } from '../providers/types'
import type { Usage } from './canonical'
import { checkHeadersForFormat, hasEncryptedHeaders, parseEncryptedHeaders } from './encrypted'
import { backendHeaders, backendRefusal, pinKey, responseEvidence } from './encrypted-backend'
import { checkEncryptedBody, type CheckedBody } from './encrypted-body'
import { passthroughStream } from './encrypted-stream'
import { EnvelopeMeter } from './encrypted-usage'
import { priceUsage } from './meter'
import { RelayCallCount } from './relay-call-count'
import { toApiError } from './upstream-errors'

export interface EncryptedDeps {
  catalog: { resolve(id: string): ModelRoute }
  attestation: AttestationService
  metering: Metering
  logger: Logger
  clock: Clock
  /** The drain: it waits for the calls it tracks and cuts them at its deadline (main.ts). */
  lifecycle?: Pick<Lifecycle, 'track' | 'untrack'>
  /** Counted as a chat's call: the upstream call by provider, tokens and nanos by model. */
  metrics?: GatewayMetrics
}

export interface EncryptedChatInput {
  principal: Principal
  body: unknown
  /** The client's exact body bytes: X-Request-Hash binds the backend's signature to them. */
  rawBody: Uint8Array
  requestId: string
  httpRequest: Request
  disableIdleTimeout?: () => void
}

const MAX_JSON_BYTES = 16 * 1024 * 1024
/** Backend response headers a client of the Phala family reads; nothing else is passed on. */
const PASSED_HEADERS = ['x-e2ee-applied', 'x-e2ee-version', 'x-e2ee-algo']

/** Whether a chat completions request is Encrypted (and so goes through relayEncryptedChat). */
export function isEncryptedChat(headers: Headers, body: unknown): boolean {
  const model = (body as { model?: unknown } | null)?.model
  return hasEncryptedHeaders(headers) || (typeof model === 'string' && model.endsWith(':encrypted'))
}

export async function relayEncryptedChat(deps: EncryptedDeps, input: EncryptedChatInput): Promise<Response> {
  const headers = input.httpRequest.headers
  const model = (input.body as { model?: unknown } | null)?.model
  if (typeof model !== 'string' || model === '') throw new ApiError('invalid_request', 'model is required', 'model')
  const route = deps.catalog.resolve(model)
  if (route.level !== 'encrypted') throw new ApiError('invalid_request', `the svc-encrypted headers need an :encrypted model id; ${route.id} is ${route.level}`, 'model')
  if (!hasEncryptedHeaders(headers)) throw new ApiError('invalid_request', `model ${route.id} needs the Encrypted headers (svc-encrypted: 1 and svc-encrypted-*; see GET /api/v1/attestation)`, 'model')
  const stream = (input.body as { stream?: unknown }).stream === true
  // The request's log line names the model from the start, as a chat's: a refused or cancelled call says which.
  const record = recordOf(input.httpRequest)
  if (record !== undefined) {
    record.model = route.id
    record.stream = stream
  }
  const h = parseEncryptedHeaders(headers, stream)

  // Backends whose protocol accepts these headers and this body; each check runs before any backend call.
  const nowSec = Math.floor(deps.clock.now() / 1000)
  const candidates: Array<{ target: AttestedBackend; checked: CheckedBody }> = []
  let firstRefusal: unknown
  // The body is checked once per protocol, not per backend: the check reads every ciphertext.
  const byFormat = new Map<string, CheckedBody | { refused: unknown }>()
  for (const target of deps.attestation.backends(route, h.algo, 'svc-encrypted-signing-algo')) {
    const format = target.provider.proofFormat
    try {
      checkHeadersForFormat(h, format, nowSec)
      let checked = byFormat.get(format.name)
      if (checked === undefined) {
        try {
          checked = checkEncryptedBody(input.body, h, format)
        } catch (error) {
          checked = { refused: error }
        }
        byFormat.set(format.name, checked)
      }
      if ('refused' in checked) throw checked.refused
      candidates.push({ target, checked })
    } catch (error) {
      firstRefusal ??= error
    }
  }
  if (candidates.length === 0) throw firstRefusal
  const checked = candidates[0]!.checked
  if (checked.reasoning && !route.capabilities.reasoning) throw new ApiError('invalid_request', `model ${route.id} does not advertise reasoning controls`, 'reasoning_effort')
  if (Array.isArray(checked.body.tools) && checked.body.tools.length > 0 && !route.capabilities.tools) throw new ApiError('invalid_request', `model ${route.id} does not support tools`, 'tools')
  const inputTokens = Math.ceil(checked.plainBytes / 3) + checked.messageCount * 4
  if (checked.maxTokens !== undefined && checked.maxTokens > route.maxOutputTokens) {
    throw new ApiError('invalid_request', `${checked.maxTokensField} ${checked.maxTokens} exceeds model ${route.id}'s maximum output of ${route.maxOutputTokens} tokens`, checked.maxTokensField)
  }
  if (inputTokens >= route.contextLength) {
    throw new ApiError('invalid_request', `the request (about ${inputTokens} input tokens) does not fit model ${route.id}'s context of ${route.contextLength} tokens`, 'messages')
  }
  const outputTokens = checked.maxTokens ?? Math.min(route.maxOutputTokens, route.contextLength - inputTokens)
  if (inputTokens + outputTokens > route.contextLength) {
    throw new ApiError('invalid_request', `the request (up to ${inputTokens} input tokens plus ${outputTokens} output tokens) does not fit model ${route.id}'s context of ${route.contextLength} tokens`, 'messages')
  }

  // Funds first, as for Confidential: a caller who cannot pay (balance, spend cap, concurrency)
  // is refused before the backend is asked for fresh evidence.
  const estimate = chargeForTokens(inputTokens, route.price.inputPerMillion) + chargeForTokens(outputTokens, maxOutputRate(route))
  const call = await deps.metering.begin({ principal: input.principal, purpose: 'chat', estimate, inference: true, requestId: input.requestId, model: route.id })
  const clientLeft = () => input.httpRequest.signal.aborted
  let pinned: Awaited<ReturnType<typeof pinKey>>
  try {
    pinned = await pinKey(deps.attestation, candidates, h, {
      // A client that leaves ends the evidence fetch (up to connect + idle timeouts) and frees its reservation and slot now.
      signal: input.httpRequest.signal,
      attesting: target => {
        if (record !== undefined) record.backend = `${target.provider.id}/${target.backend.model}`
      },
      passedOver: (target, error) =>
        deps.logger.warn('attestation evidence rejected; the Encrypted request is for another backend', {
          request_id: input.requestId, model: route.id, backend: `${target.provider.id}/${target.backend.model}`, reason: error.message,
        }),
    })
  } catch (error) {
    // No key pinned (a mismatch, rejected or missing evidence) or no client: nothing is charged.
    call.release()
    // A client that left (its signal cut the fetch) is logged 499, whatever the fetch failed with.
    throw clientLeft() ? clientGone(input.httpRequest) : error
  }
  // The client may have left as the evidence came: no backend call.
  if (clientLeft()) {
    call.release()
    throw clientGone(input.httpRequest)
  }
  const { target, evidence } = pinned

  // One cap, the one reserved and metered, in the field attested backends read (as the
  // Confidential path writes it). Rewriting the body is safe: signatures bind the client's own
  // bytes through X-Request-Hash, and the Phala AAD binds only model and message positions.
  const forward: Record<string, unknown> = { ...pinned.checked.body, model: target.backend.model, max_tokens: outputTokens }
  if (stream) forward.stream_options = { ...(forward.stream_options as object | undefined), include_usage: true }
  const upstreamAbort = new AbortController()
  const onClientGone = () => upstreamAbort.abort(new DOMException('client disconnected', 'AbortError'))
  input.httpRequest.signal.addEventListener('abort', onClientGone, { once: true })
  // An abort listener added after the abort never runs: a client that left meanwhile stops the call now.
  if (clientLeft()) onClientGone()
  // Tracked like a chat: a cut at the drain's deadline aborts with an ApiError, which the client gets.
  const drained = { abort: (reason: ApiError) => upstreamAbort.abort(reason) }
  deps.lifecycle?.track(drained)
  const shutdownReason = () => (upstreamAbort.signal.reason instanceof ApiError ? upstreamAbort.signal.reason : undefined)
  input.disableIdleTimeout?.()
  const meter = new EnvelopeMeter(Math.ceil(checked.plainBytes / 4) + checked.messageCount * 4, { maxInputTokens: route.contextLength, maxOutputTokens: outputTokens }, target.provider.proofFormat, h.algo)
  const started = deps.clock.now()
  const backend = `${target.provider.id}/${target.backend.model}`
  // The request's own log line carries the call as a chat's does (README, Metrics and logs).
  if (record !== undefined) record.backend = backend
  const log = (outcome: string, usage: Usage | undefined, charged: bigint | undefined) => {
    if (record !== undefined) {
      record.outcome = outcome
      record.inputTokens = usage?.inputTokens
      record.outputTokens = usage?.outputTokens
      record.chargedNanos = charged
      if (record.deferred) record.sink.end(record)
    }
    if (deps.metrics && usage && charged !== undefined) {
      deps.metrics.tokens.inc(usage.inputTokens, route.id, 'input')
      deps.metrics.tokens.inc(usage.outputTokens, route.id, 'output')
    }
    deps.logger.info('chat', {
      request_id: input.requestId, org_id: input.principal.orgId, key_id: input.principal.keyId, model: route.id, level: 'encrypted',
      backend, outcome, stream, input_tokens: usage?.inputTokens, output_tokens: usage?.outputTokens,
      charged_nanos: charged, latency_ms: deps.clock.now() - started,
    })
  }
  const settle = async () => {
    const usage = meter.usage()
    const charged = await call.settle(priceUsage(route.price, usage))
    return { usage, charged }
  }

  let upstream
  const count = new RelayCallCount(deps.metrics, target.provider.id, target.backend.model, performance.now())
  try {
    upstream = await target.provider.relay({ upstreamModel: target.backend.model, body: JSON.stringify(forward), headers: backendHeaders(h, target, evidence, input.rawBody, input.requestId), signal: upstreamAbort.signal, collect: !stream })
  } catch (error) {
    call.release()
    input.httpRequest.signal.removeEventListener('abort', onClientGone)
    deps.lifecycle?.untrack(drained)
    if (error instanceof UpstreamError) count.failed(error)
    const reason = shutdownReason()
    if (reason) {
      log('aborted', undefined, undefined)
      throw reason
    }
    // The client's own leaving, not the backend's failure (logged 499 cancelled, as a chat's).
    if (clientLeft()) {
      log('cancelled', undefined, undefined)
      throw toApiError(error)
    }
    // No fallback (the ciphertext is for this backend's key), but other calls pass it over for a while.
    deps.attestation.failed(target, error)
    log('upstream-error', undefined, undefined)
    throw backendRefusal(error)
  }
  // A streamed call answered with something else (a JSON body, an HTML page): the relay cannot
  // read ciphertext to re-frame it, and passing it on would be a 200 event stream of garbage for
  // the client. A backend failure before any output, as the Confidential path answers it.
  const contentType = upstream.headers.get('content-type') ?? 'no content type'
  if (stream && !contentType.toLowerCase().startsWith('text/event-stream')) {
    upstream.close()
    call.release()
    input.httpRequest.signal.removeEventListener('abort', onClientGone)
    deps.lifecycle?.untrack(drained)
    const error = new UpstreamError('server', `the backend answered a streamed call with ${contentType.slice(0, 100)}, not an event stream`, target.provider.id, target.backend.model)
    count.failed(error)
    // Passed over for a while by other calls, as a backend that failed to answer is.
    deps.attestation.failed(target, error)
    log('upstream-error', undefined, undefined)
    throw toApiError(error)
  }

  const passed: Record<string, string> = {}
  for (const name of PASSED_HEADERS) {
    const value = upstream.headers.get(name)
    if (value !== null) passed[name] = value
  }

  if (stream) {
    // As a chat stream's, the line is written when the stream ends (by `log`, with its outcome).
    if (record !== undefined) record.sink.defer(record)
    if (deps.metrics) deps.metrics.openStreams += 1
    return passthroughStream({
      upstream,
      headers: passed,
      observe: data => {
        meter.observeEvent(data)
        if (meter.answered) count.answered()
      },
      failure: shutdownReason,
      async complete(outcome, error) {
        input.httpRequest.signal.removeEventListener('abort', onClientGone)
        deps.lifecycle?.untrack(drained)
        if (deps.metrics) deps.metrics.openStreams -= 1
        if (outcome === 'cancelled') {
          upstreamAbort.abort(new DOMException('client disconnected', 'AbortError'))
          count.cut()
        }
        if (outcome === 'failed') count.failed(error)
        // A stream that finished without a choice or a usage (only `data: [DONE]`) is no answer:
        // nothing is charged, and the client gets the in-band failure instead of the [DONE].
        if (outcome === 'finished' && !meter.answered) {
          call.release()
          count.failed(noCompletion())
          log('upstream-error', undefined, undefined)
          return noCompletion()
        }
        if (outcome !== 'finished' && !meter.producedOutput) {
          call.release()
          log(outcome, undefined, 0n)
          return undefined
        }
        try {
          const { usage, charged } = await settle()
          log(outcome, usage, charged)
          return undefined
        } catch (error) {
          // A settlement that failed before reaching the ledger (a usage it could not price) would
          // hold the call, its hold and slot, for good: end it (the ledger keeps its own failures).
          if (!call.done) call.release()
          log('settlement-failed', undefined, undefined)
          return error instanceof ApiError ? error : new ApiError('unavailable', 'the ledger could not record this charge')
        }
      },
    })
  }

  try {
    const bytes = await readAll(upstream)
    let parsed: unknown
    try {
      parsed = JSON.parse(new TextDecoder().decode(bytes))
    } catch {
      parsed = undefined
    }
    // A chat completion is a JSON object: anything else (null, a string, an array) is as malformed as bad JSON.
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new UpstreamError('server', 'the backend answered 2xx with malformed JSON', target.provider.id, target.backend.model)
    }
    meter.observeCompletion(parsed as Record<string, unknown>)
    // Any JSON object parses, but one with no choice and no usage (`{}`) is no completion.
    if (!meter.answered) throw noCompletion()
    count.answered()
    // A client that left receives nothing of a non-streamed answer, so nothing is charged (as a chat's).
    if (clientLeft()) throw clientGone(input.httpRequest)
    const { usage, charged } = await settle()
    log('ok', usage, charged)
    if (!h.responseEvidence) return new Response(bytes, { headers: { 'content-type': 'application/json', ...passed } })
    const evidenceField = await responseEvidence(target, h, bytes, parsed as Record<string, unknown>)
    return Response.json({ ...parsed, svc_response_evidence: evidenceField }, { headers: passed })
  } catch (error) {
    // Before a whole completion came, the backend's failure; after it (the ledger's, the response
    // evidence's, a client that left), the call was answered.
    if (!meter.answered) count.failed(error)
    if (!call.done) {
      call.release()
      log(shutdownReason() ? 'aborted' : clientLeft() ? 'cancelled' : 'upstream-error', undefined, undefined)
    }
    throw shutdownReason() ?? toApiError(error)
  } finally {
    input.httpRequest.signal.removeEventListener('abort', onClientGone)
    deps.lifecycle?.untrack(drained)
  }
}

/** A backend 2xx that holds no completion (no choice, no usage): a failure before any output, as on :confidential. */
function noCompletion(): ApiError {
  return new ApiError('provider_error', 'the attested backend answered without a completion (no choice and no usage)')
}

/** The error of a call whose client left: its request is logged 499 `cancelled`; nobody reads the error. */
function clientGone(request: Request): ApiError {
  const record = recordOf(request)
  if (record !== undefined) record.outcome = 'cancelled'
  return new ApiError('unavailable', 'the client closed the request')
}

function maxOutputRate(route: ModelRoute): bigint {
  const { outputPerMillion, reasoningPerMillion } = route.price
  return reasoningPerMillion !== undefined && reasoningPerMillion > outputPerMillion ? reasoningPerMillion : outputPerMillion
}

async function readAll(upstream: { bytes: AsyncIterable<Uint8Array>; close(): void }): Promise<Uint8Array> {
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    for await (const chunk of upstream.bytes) {
      size += chunk.length
      if (size > MAX_JSON_BYTES) throw new ApiError('provider_error', 'the backend answer is too large')
      chunks.push(chunk)
    }
  } finally {
    upstream.close()
  }
  return new Uint8Array(Buffer.concat(chunks))
}
