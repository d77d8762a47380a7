import type { MeteredCall, Metering } from '../billing/metering'
import type { Backend } from '../catalog/types'
import { ApiError } from '../http/errors'
import type { Principal } from '../keys/principal'
import type { Clock } from '../lib/clock'
import type { GatewayMetrics } from '../observability/gateway-metrics'
import type { FaultPoint } from '../lib/fault-point'
import { Lifecycle } from '../observability/lifecycle'
import type { Logger } from '../observability/logger'
import { recordOf } from '../observability/request-log'
import { UpstreamError, type Provider } from '../providers/types'
import type { ChatEvent, ChatRequest, Usage } from './canonical'
import { collect } from './collect'
import type { DialectEncoder, ResponseMeta } from './dialects/types'
import { checkPolicy } from './policy'
import { estimateCharge, highInputTokens, Meter, priceUsage, typicalInputTokens } from './meter'
import { streamResponse } from './stream-response'
import { toApiError } from './upstream-errors'

/** What the pipeline needs of the provider router. */
export interface ChatRouter {
  open(
    route: ChatRequest['route'],
    request: ChatRequest,
    options: { signal: AbortSignal; requestId: string; uncensored?: boolean },
  ): Promise<{ events: AsyncIterable<ChatEvent>; backend: Backend; provider: Provider }>
}

export interface PipelineDeps {
  metering: Metering
  router: ChatRouter
  logger: Logger
  clock: Clock
  /** Upstream, token and charge metrics (updated once per call, never per frame). */
  metrics?: GatewayMetrics
  /** Shutdown: calls register here so a drain can wait for them, then cut the rest. */
  lifecycle?: Lifecycle
  /** Crash tests only (SVC_FAULT_POINT): kills the process at a step. Undefined in production. */
  fault?: (point: FaultPoint) => void
}

export interface ChatInput {
  principal: Principal
  request: ChatRequest
  requestId: string
  encoder: DialectEncoder
  includeUsage: boolean
  uncensored?: boolean
  /** The client's request: its signal ends the upstream call when the client leaves. */
  httpRequest: Request
  /** Lifts Bun's idle timeout for this response (long generations, slow streams). */
  disableIdleTimeout?: () => void
}

/**
 * One chat request from admission to settlement (ARCHITECTURE.md §8 steps 3–9): policy checks,
 * reserve an upper-bound estimate, call the upstream through the router, stream or collect, and
 * settle exactly once, before the final frame or the JSON body.
 */
export async function runChat(deps: PipelineDeps, input: ChatInput): Promise<Response | Record<string, unknown>> {
  const { request, requestId } = input
  const route = request.route
  checkPolicy(request)
  // Bound every upstream's output (some, like Ollama, are unbounded by default) by what was
  // reserved for: the model's cap, within the context left.
  if (request.sampling.maxOutputTokens === undefined) {
    request.sampling.maxOutputTokens = Math.max(1, Math.min(route.maxOutputTokens, route.contextLength - typicalInputTokens(request)))
  }
  if (deps.lifecycle?.draining) throw Lifecycle.refusal()
  const call = await deps.metering.begin({ principal: input.principal, purpose: 'chat', estimate: estimateCharge(request, route), inference: true, requestId })
  const fault = deps.fault
  fault?.('after_reserve')
  const upstream = new AbortController()
  const onClientGone = () => upstream.abort(new DOMException('client disconnected', 'AbortError'))
  input.httpRequest.signal.addEventListener('abort', onClientGone, { once: true })
  // A drain's deadline cuts the call with an ApiError as the abort reason, which the client sees.
  const untrack = deps.lifecycle?.track(reason => upstream.abort(reason)) ?? noop
  const shutdownReason = () => (upstream.signal.reason instanceof ApiError ? upstream.signal.reason : undefined)
  const started = deps.clock.now()
  const meta: ResponseMeta = { id: `chatcmpl-${Bun.randomUUIDv7('base64url')}`, model: request.model, createdAt: Math.floor(started / 1000), includeUsage: input.includeUsage }
  const meter = new Meter(highInputTokens(request))
  const record = recordOf(input.httpRequest)
  if (record !== undefined) {
    record.model = request.model
    record.stream = request.stream
  }
  const metrics = deps.metrics

  // A long generation (streamed or collected), or a slow upstream's headers, must not be cut
  // by Bun's idle timeout.
  input.disableIdleTimeout?.()
  let opened: Awaited<ReturnType<ChatRouter['open']>>
  const openedAt = performance.now()
  try {
    opened = await deps.router.open(route, request, { signal: upstream.signal, requestId, uncensored: input.uncensored })
  } catch (error) {
    call.release()
    untrack()
    input.httpRequest.signal.removeEventListener('abort', onClientGone)
    if (metrics && error instanceof UpstreamError) countUpstreamFailure(metrics, error, 'before-first-event', openedAt)
    if (record !== undefined) record.outcome = 'upstream-error'
    throw shutdownReason() ?? toApiError(error)
  }
  if (metrics) {
    for (const failure of (opened as { failures?: UpstreamError[] }).failures ?? []) countUpstreamFailure(metrics, failure, 'before-first-event', openedAt)
    metrics.upstreamCalls.inc(1, opened.provider.id, 'ok')
    metrics.upstreamSeconds.observe((performance.now() - openedAt) / 1000, opened.provider.id)
  }
  fault?.('after_upstream_headers')
  const backend = `${opened.provider.id}/${opened.backend.model}`
  if (record !== undefined) record.backend = backend

  // The request's log line (written by the request context, or by the stream's end) gets the
  // outcome, usage and charge; metrics count tokens and nanos by model once per call.
  const log = (outcome: string, usage: Usage | undefined, charged: bigint | undefined) => {
    if (record !== undefined) {
      record.outcome = outcome
      record.inputTokens = usage?.inputTokens
      record.outputTokens = usage?.outputTokens
      record.chargedNanos = charged
    }
    if (metrics && usage && charged !== undefined) {
      metrics.tokens.inc(usage.inputTokens, request.model, 'input')
      metrics.tokens.inc(usage.outputTokens, request.model, 'output')
      metrics.billedNanos.inc(Number(charged), request.model)
    }
  }
  const settle = async (call: MeteredCall): Promise<{ usage: Usage; charged: bigint }> => {
    const usage = meter.usage()
    const charged = priceUsage(route.price, usage)
    fault?.('before_settle')
    await call.settle(charged)
    fault?.('after_settle_before_final_frame')
    return { usage, charged }
  }
  let deltas = 0
  const observe = (event: ChatEvent) => {
    meter.observe(event)
    if (event.type === 'error' && metrics) countUpstreamFailure(metrics, event.error, 'mid-stream')
    // Crash tests: die on the second text delta, once the first has gone out.
    else if (fault !== undefined && event.type === 'text-delta' && ++deltas === 2) fault('mid_stream')
  }

  if (!request.stream) {
    try {
      const result = await collect(opened.events, observe)
      if (result.error || upstream.signal.aborted) {
        // The client receives nothing of a failed, abandoned or cut non-streamed answer, so
        // nothing is charged.
        call.release()
        log(result.error ? 'upstream-error' : 'aborted', undefined, undefined)
        throw shutdownReason() ?? toApiError(result.error ?? new UpstreamError('aborted', 'the call was aborted', opened.provider.id, opened.backend.model))
      }
      const { usage, charged } = await settle(call)
      log('ok', usage, charged)
      return input.encoder.encode(result, usage, meta) as Record<string, unknown>
    } catch (error) {
      // Client gone or an exception while collecting: nothing was delivered.
      if (!call.done) call.release()
      throw toApiError(error)
    } finally {
      untrack()
      input.httpRequest.signal.removeEventListener('abort', onClientGone)
    }
  }

  if (record !== undefined) record.deferred = true
  if (metrics) metrics.openStreams += 1
  return streamResponse({
    events: opened.events,
    encoder: input.encoder.streamEncoder(meta),
    observe,
    failure: shutdownReason,
    // Terminal frames are written only after this resolves (settlement before the final frame).
    async complete(outcome) {
      input.httpRequest.signal.removeEventListener('abort', onClientGone)
      if (outcome === 'cancelled') upstream.abort(new DOMException('client disconnected', 'AbortError'))
      try {
        // A stream that failed or was left before any output charges nothing; once output was
        // sent, the reported usage or the counted fallback is charged.
        if (outcome !== 'finished' && !meter.producedOutput) {
          call.release()
          log(outcome, undefined, 0n)
          return undefined
        }
        try {
          const { usage, charged } = await settle(call)
          log(outcome, usage, charged)
          return undefined
        } catch (error) {
          log('settlement-failed', undefined, undefined)
          return error instanceof ApiError ? error : new ApiError('unavailable', 'the ledger could not record this charge')
        }
      } finally {
        untrack()
        if (metrics) metrics.openStreams -= 1
        if (record !== undefined) record.sink.end(record)
      }
    },
  })
}

const noop = () => {}

function countUpstreamFailure(metrics: GatewayMetrics, error: UpstreamError, phase: 'before-first-event' | 'mid-stream', startedAt?: number): void {
  // A call the gateway itself cancelled (client gone, drain) is not an upstream failure.
  if (error.kind === 'aborted') return
  metrics.upstreamErrors.inc(1, error.provider, error.kind, phase)
  if (phase === 'before-first-event') {
    metrics.upstreamCalls.inc(1, error.provider, error.kind)
    if (startedAt !== undefined) metrics.upstreamSeconds.observe((performance.now() - startedAt) / 1000, error.provider)
  }
}
