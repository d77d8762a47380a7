import { type MeteredCall, PendingCharges } from '../billing/metering'
import type { ApiError } from '../http/errors'
import type { Nanos } from '../lib/money'
import type { GatewayMetrics } from '../observability/gateway-metrics'
import { CallAbort } from '../observability/lifecycle'
import { recordOf, type RequestRecord } from '../observability/request-log'
import { UpstreamError } from '../providers/types'
import type { ChatEvent, Usage } from './canonical'
import { enrichDocuments, hasFileParts } from './enrich/documents'
import { enrichWithWeb, wantsWeb } from './enrich/web'
import { estimateCharge, highInputTokens, Meter, priceUsage, typicalInputTokens } from './meter'
import type { CallAttestation, ChatCallInput, ChatRouter, OpenedBackend, PipelineDeps, ServerTools } from './pipeline'
import { checkPolicy } from './policy'
import { toApiError } from './upstream-errors'

/** A chat call admitted and opened: what runChat and collectChat finish (steps 7–9). */
export interface OpenCall {
  call: MeteredCall
  events: AsyncIterable<ChatEvent>
  meter: Meter
  started: number
  attestation: CallAttestation | undefined
  serverTools: ServerTools | undefined
  /** The request's log record (HTTP callers), filled with the outcome, usage and charge. */
  record: RequestRecord | undefined
  /** Sees every event: the meter, mid-stream failure metrics, crash-test fault points. */
  observe(event: ChatEvent): void
  /** The ApiError a drain's deadline cut the call with, if it did (the client sees it). */
  shutdownReason(): ApiError | undefined
  /** Whether the upstream call was aborted (client gone, caller's deadline, drain). */
  aborted(): boolean
  /** Stops listening to the caller's signal and to the drain. */
  detach(): void
  abort(): void
  settle(): Promise<{ usage: Usage; charged: Nanos }>
  log(outcome: string, usage: Usage | undefined, charged: bigint | undefined): void
}

/**
 * Policy, enrichment, output bound, reservation and the upstream's opened stream (steps 3–6).
 * `collect`: the caller folds the events into one answer and watches none of them singly.
 */
export async function openCall(deps: PipelineDeps, input: ChatCallInput, options: { collect?: boolean } = {}): Promise<OpenCall> {
  const { request, requestId } = input
  const route = request.route
  checkPolicy(request)
  // Request-local enrichment, before the estimate so it counts the added text. Each piece is
  // priced on its own, but charged only once the chat is admitted: a refused chat costs nothing.
  const withFiles = hasFileParts(request)
  const withWeb = wantsWeb(request)
  const pending = withFiles || withWeb ? new PendingCharges() : undefined
  let serverTools: ServerTools | undefined
  let maxOutputTokens: number
  let call: MeteredCall
  try {
    if (withFiles) await enrichDocuments(deps, { ...input, pending })
    if (withWeb) serverTools = await enrichWithWeb(deps.web, { principal: input.principal, request, requestId, signal: input.signal, billingKey: input.billingKey, pending })
    // A request whose files or pages were admitted is in flight: a drain that began since lets
    // its chat run (and cuts it at the deadline), as it lets Fusion's judge.
    const enriched = withFiles || (serverTools !== undefined && serverTools.webFetchRequests + serverTools.webSearchRequests > 0)
    // Bound every upstream's output (some, like Ollama, are unbounded by default) by what was
    // reserved for: the model's cap, within the context left.
    maxOutputTokens = request.sampling.maxOutputTokens ??= Math.max(1, Math.min(route.maxOutputTokens, route.contextLength - typicalInputTokens(request)))
    call = await deps.metering.begin({
      principal: input.principal, purpose: input.purpose ?? 'chat', estimate: estimateCharge(request, route), inference: true, requestId, billingKey: input.billingKey,
      continuesRequest: input.continuesRequest === true || enriched, model: request.model,
    })
  } catch (error) {
    pending?.releaseAll()
    throw error
  }
  if (pending !== undefined) {
    try {
      await pending.settleAll()
    } catch (error) {
      call.release()
      throw error
    }
  }
  const fault = deps.fault
  fault?.('after_reserve')
  input.onAdmitted?.()
  const upstream = new CallAbort(input.signal)
  upstream.checkClient()
  // The lifecycle's ticks cut the call when its client leaves; a drain's deadline cuts it with an
  // ApiError as the abort reason, which the client sees.
  const lifecycle = deps.lifecycle
  lifecycle.track(upstream)
  const detach = () => lifecycle.untrack(upstream)
  const shutdownReason = () => upstream.shutdownReason()
  const started = deps.clock.now()
  const meter = new Meter(highInputTokens(request), { maxInputTokens: route.contextLength, maxOutputTokens }, serverTools)
  const record = input.httpRequest ? recordOf(input.httpRequest) : undefined
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
  // The backend answering: the log line names it, a collected call reports its attestation.
  let answering: OpenedBackend | undefined
  const onFallback = (next: OpenedBackend) => {
    answering = next
    const [failure, ...rejected] = next.failures ?? []
    if (metrics) {
      if (failure !== undefined) countUpstreamFailure(metrics, failure, 'before-output')
      for (const rejection of rejected) countUpstreamFailure(metrics, rejection, 'before-first-event', openedAt)
      metrics.upstreamCalls.inc(1, next.provider.id, 'ok')
    }
    if (record !== undefined) record.backend = `${next.provider.id}/${next.backend.model}`
  }
  try {
    opened = await deps.router.open(route, request, { signal: upstream.signal, controller: upstream, requestId, uncensored: input.uncensored, collect: options.collect, passThrough: input.passThrough, onFallback })
  } catch (error) {
    call.release()
    detach()
    if (metrics && error instanceof UpstreamError) countUpstreamFailure(metrics, error, 'before-first-event', openedAt)
    // A client that left before the upstream answered aborted the call itself: not the upstream's failure.
    if (record !== undefined) record.outcome = input.signal.aborted ? 'cancelled' : 'upstream-error'
    throw shutdownReason() ?? toApiError(error)
  }
  if (metrics) {
    for (const failure of opened.failures ?? []) countUpstreamFailure(metrics, failure, 'before-first-event', openedAt)
    metrics.upstreamCalls.inc(1, opened.provider.id, 'ok')
    metrics.upstreamSeconds.observe((performance.now() - openedAt) / 1000, opened.provider.id)
  }
  fault?.('after_upstream_headers')
  const backend = `${opened.provider.id}/${opened.backend.model}`
  if (record !== undefined) record.backend = backend

  let deltas = 0
  const midStreamDelta = options.collect ? 1 : 2
  return {
    call,
    events: opened.events,
    meter,
    started,
    get attestation() {
      return (answering ?? opened).attestation
    },
    serverTools,
    record,
    observe(event) {
      meter.observe(event)
      if (event.type === 'error' && metrics) countUpstreamFailure(metrics, event.error, 'mid-stream')
      // Crash tests: die on the second text delta, once the first has gone out (a collected
      // answer may arrive as one delta, and sends nothing before settling: its first; a
      // passthrough event counts its chunks).
      else if (fault !== undefined && deltas < midStreamDelta) {
        if (event.type === 'text-delta') deltas += 1
        else if (event.type === 'passthrough') deltas += event.format === 'messages' ? event.count : event.deltas.length
        if (deltas >= midStreamDelta) fault('mid_stream')
      }
    },
    shutdownReason,
    // The client's own signal too: it may have left since the last tick.
    aborted: () => upstream.signal.aborted || input.signal.aborted,
    detach,
    abort: () => upstream.cut(),
    async settle() {
      const usage = meter.usage()
      const charged = priceUsage(route.price, usage)
      fault?.('before_settle')
      await call.settle(charged)
      fault?.('after_settle_before_final_frame')
      return { usage, charged }
    },
    // The request's log line (written by the request context, or by the stream's end) gets the
    // outcome, usage and charge; metrics count tokens by model once per call (the nanos are
    // counted where every charge settles: MeteredCall). Calls without an HTTP request of their
    // own (Fusion parts) are logged by their caller.
    log(outcome, usage, charged) {
      if (record !== undefined) {
        record.outcome = outcome
        record.inputTokens = usage?.inputTokens
        record.outputTokens = usage?.outputTokens
        record.chargedNanos = charged
      }
      if (metrics && usage && charged !== undefined) {
        metrics.tokens.inc(usage.inputTokens, request.model, 'input')
        metrics.tokens.inc(usage.outputTokens, request.model, 'output')
      }
    },
  }
}

/**
 * `before-first-event`: the call failed to open (no status, no event); `before-output`: it opened,
 * then failed before any output, and the next backend was tried; `mid-stream`: the client saw it.
 */
export function countUpstreamFailure(metrics: GatewayMetrics, error: UpstreamError, phase: 'before-first-event' | 'before-output' | 'mid-stream', startedAt?: number): void {
  // A call the gateway itself cancelled (client gone, drain) is not an upstream failure.
  if (error.kind === 'aborted') return
  metrics.upstreamErrors.inc(1, error.provider, error.kind, phase)
  if (phase === 'before-first-event') {
    metrics.upstreamCalls.inc(1, error.provider, error.kind)
    if (startedAt !== undefined) metrics.upstreamSeconds.observe((performance.now() - startedAt) / 1000, error.provider)
  }
}
