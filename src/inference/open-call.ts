import { type MeteredCall, PendingCharges } from '../billing/metering'
import type { ApiError } from '../http/errors'
import type { Nanos } from '../lib/money'
import type { GatewayMetrics } from '../observability/gateway-metrics'
import { CallAbort } from '../observability/lifecycle'
import { recordOf, type RequestRecord } from '../observability/request-log'
import { UpstreamError } from '../providers/types'
import type { ChatEvent, Usage } from './canonical'
import { enrichDocuments, hasFileParts } from './enrich/documents'
import { enrichWithWeb, hostedWeb, wantsWeb } from './enrich/web'
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
  /** Charges the call, and with it the request's files and hosted web work. */
  settle(): Promise<{ usage: Usage; charged: Nanos }>
  /** Charges nothing: the call, and the request's files and hosted web work, are released. */
  release(): void
  log(outcome: string, usage: Usage | undefined, charged: bigint | undefined): void
}

/**
 * Policy, enrichment, output bound, reservation and the upstream's opened stream (steps 3–6).
 * `collect`: the caller folds the events into one answer and watches none of them singly.
 */
export async function openCall(deps: PipelineDeps, input: ChatCallInput, options: { collect?: boolean } = {}): Promise<OpenCall> {
  const { request, requestId } = input
  const route = request.route
  // The request's log line names the model and stream mode from the start: a chat refused on
  // the way (policy, funds, cap, a full document queue) or left by its client says which.
  const record = input.httpRequest ? recordOf(input.httpRequest) : undefined
  if (record !== undefined) {
    record.model = request.model
    record.stream = request.stream
  }
  checkPolicy(request)
  // Request-local enrichment, before the estimate so it counts the added text. Each piece is
  // priced on its own, but charged only with the chat (OpenedCall.pending): a refused chat costs nothing.
  const withFiles = hasFileParts(request)
  // Hosted tools the gateway cannot run are refused before any file is read.
  const web = wantsWeb(request) ? hostedWeb(deps.web, request) : undefined
  const pending = withFiles || web ? new PendingCharges() : undefined
  // A request whose enrichment starts before a drain is in flight: a drain that begins while its
  // files or pages are read lets its chat run (and cuts it at the deadline), as it lets Fusion's
  // judge, whether or not a page or search came back (QA: a failed search made it a 503).
  const enriched = pending !== undefined && !deps.lifecycle.draining
  let serverTools: ServerTools | undefined
  let maxOutputTokens: number
  let call: MeteredCall
  try {
    if (withFiles) await enrichDocuments(deps, { ...input, pending })
    // Its pages and searches are admitted as the chat will be: a drain since lets them run (regression QA).
    const continuesRequest = input.continuesRequest === true || enriched
    if (web) serverTools = await enrichWithWeb(web, { principal: input.principal, request, requestId, signal: input.signal, billingKey: input.billingKey, pending, slotHeld: input.slotHeld, continuesRequest })
    // Bound every upstream's output (some, like Ollama, are unbounded by default) by what was
    // reserved for: the model's cap, within the context left.
    maxOutputTokens = request.sampling.maxOutputTokens ??= Math.max(1, Math.min(route.maxOutputTokens, route.contextLength - typicalInputTokens(request)))
    call = await deps.metering.begin({
      principal: input.principal, purpose: input.purpose ?? 'chat', estimate: estimateCharge(request, route), inference: input.slotHeld !== true, requestId, billingKey: input.billingKey,
      continuesRequest, model: request.model, ownHeld: (pending?.total ?? 0n) + (input.ownHeld ?? 0n),
    })
  } catch (error) {
    pending?.releaseAll()
    throw error
  }
  deps.fault?.('after_reserve')
  input.onAdmitted?.()
  const upstream = new CallAbort(input.signal)
  upstream.checkClient()
  // The lifecycle's ticks cut the call when its client leaves; a drain's deadline cuts it with an
  // ApiError as the abort reason, which the client sees.
  deps.lifecycle.track(upstream)
  const open = new OpenedCall(deps, input, call, upstream, serverTools, maxOutputTokens, options.collect === true, record)
  open.pending = pending
  // A long generation (streamed or collected), or a slow upstream's headers, must not be cut
  // by Bun's idle timeout.
  input.disableIdleTimeout?.()
  const metrics = deps.metrics
  const openedAt = performance.now()
  let opened: Awaited<ReturnType<ChatRouter['open']>>
  try {
    opened = await deps.router.open(route, request, {
      signal: upstream.signal, controller: upstream, requestId, uncensored: input.uncensored, collect: options.collect, passThrough: input.passThrough,
      // Only a route with another backend to try can fall back (no closures per call otherwise).
      onFallback: route.backends.length > 1 ? next => open.fellBack(next, openedAt) : undefined,
      onFallbackFailed: route.backends.length > 1 ? error => open.fallbackFailed(error, openedAt) : undefined,
    })
  } catch (error) {
    // No backend took the request: neither it nor its files and pages are charged (QA: a
    // backend's adapter refusing it before any call, a 400, kept the parse charge).
    open.release()
    open.detach()
    open.failedToOpen(error, openedAt, false)
    // A client that left before the upstream answered aborted the call itself, and the drain's
    // deadline cut it: neither is the upstream's failure. A refusal of the request itself (no
    // uncensored backend, an adapter's refusal before any call) is logged as its code by the
    // request context.
    if (open.record !== undefined) open.record.outcome = upstream.unread() ?? (error instanceof UpstreamError && error.details.phase !== 'adapter' ? 'upstream-error' : undefined)
    throw open.shutdownReason() ?? toApiError(error)
  }
  if (metrics) {
    for (const failure of opened.failures ?? []) countUpstreamFailure(metrics, failure, 'before-first-event', openedAt)
    metrics.upstreamCalls.inc(1, opened.provider.id, 'ok')
    metrics.upstreamSeconds.observe((performance.now() - openedAt) / 1000, opened.provider.id)
  }
  deps.fault?.('after_upstream_headers')
  open.answeredBy(opened)
  return open
}

/**
 * One admitted call (OpenCall), as one object: its methods are shared by every call, where a
 * literal of closures made ~10 functions and their scopes per call (bench/README.md,
 * twenty-seventh session).
 */
class OpenedCall implements OpenCall {
  events!: AsyncIterable<ChatEvent>
  readonly started: number
  readonly meter: Meter
  /** The backend answering (after a fallback, the one that took over): the log line names it, a collected call reports its attestation. */
  private answering!: OpenedBackend
  private deltas = 0
  /** An error event already counted as a failed open (fallbackFailed), not to count again as mid-stream. */
  private counted: unknown
  /**
   * The request's attached files and hosted web work: charged with the chat's own settlement, so
   * only when it produced output (QA: a stream that opened and failed before any output charged
   * its files), and released with it.
   */
  pending: PendingCharges | undefined
  /** What they were charged: its line's charge includes it. */
  enrichmentCharged = 0n

  constructor(
    private readonly deps: PipelineDeps,
    private readonly input: ChatCallInput,
    readonly call: MeteredCall,
    private readonly upstream: CallAbort,
    readonly serverTools: ServerTools | undefined,
    maxOutputTokens: number,
    private readonly collected: boolean,
    /** The request's log record (HTTP callers), filled with the outcome, usage and charge. */
    readonly record: RequestRecord | undefined,
  ) {
    const request = input.request
    this.started = deps.clock.now()
    this.meter = new Meter(highInputTokens(request), { maxInputTokens: request.route.contextLength, maxOutputTokens }, serverTools)
  }

  get attestation(): CallAttestation | undefined {
    return this.answering.attestation
  }

  /** The router opened the upstream's stream (step 6). */
  answeredBy(opened: Awaited<ReturnType<ChatRouter['open']>>): void {
    this.events = opened.events
    this.answering = opened
    this.named(opened.provider.id, opened.backend.model)
  }

  /**
   * The call's opening ended with `error` (no backend opened, or, `streamFailedFirst`, none opened
   * after the first one's stream failed before its output): every backend tried is counted (the
   * first one's stream as `before-output`, the others as failing to open; an attested backend's
   * rejected evidence is counted by its own metric), and the log line names the last one tried.
   */
  failedToOpen(error: unknown, openedAt: number, streamFailedFirst: boolean): void {
    const failed = this.deps.router.failedOpen?.(error)
    const metrics = this.deps.metrics
    if (metrics) {
      failed?.abandoned.forEach((abandoned, index) => countUpstreamFailure(metrics, abandoned, streamFailedFirst && index === 0 ? 'before-output' : 'before-first-event', openedAt))
      if (error instanceof UpstreamError) countUpstreamFailure(metrics, error, 'before-first-event', openedAt)
    }
    if (failed !== undefined) this.named(failed.provider, failed.backend.model)
  }

  /** The stream failed before any output and no other backend opened: its error event was counted here, not as mid-stream. */
  fallbackFailed(error: unknown, openedAt: number): void {
    this.failedToOpen(error, openedAt, true)
    this.counted = error
  }

  /** The stream moved to another backend before any output (router.ts). */
  fellBack(next: OpenedBackend, openedAt: number): void {
    this.answering = next
    const [failure, ...rejected] = next.failures ?? []
    const metrics = this.deps.metrics
    if (metrics) {
      if (failure !== undefined) countUpstreamFailure(metrics, failure, 'before-output')
      for (const rejection of rejected) countUpstreamFailure(metrics, rejection, 'before-first-event', openedAt)
      metrics.upstreamCalls.inc(1, next.provider.id, 'ok')
    }
    this.named(next.provider.id, next.backend.model)
  }

  /** The backend the log line names: the one answering, or the last one tried. */
  private named(provider: string, model: string): void {
    if (this.record !== undefined) this.record.backend = `${provider}/${model}`
  }

  observe(event: ChatEvent): void {
    this.meter.observe(event)
    const { metrics, fault } = this.deps
    if (event.type === 'error' && metrics) {
      if (event.error !== this.counted) countUpstreamFailure(metrics, event.error, 'mid-stream')
    }
    // Crash tests: die on the second text delta, once the first has gone out (a collected
    // answer may arrive as one delta, and sends nothing before settling: its first; a
    // passthrough event counts its chunks).
    else if (fault !== undefined) {
      const midStreamDelta = this.collected ? 1 : 2
      if (this.deltas >= midStreamDelta) return
      if (event.type === 'text-delta') this.deltas += 1
      else if (event.type === 'passthrough') this.deltas += event.format === 'messages' ? event.count : event.deltas.length
      if (this.deltas >= midStreamDelta) fault('mid_stream')
    }
  }

  shutdownReason(): ApiError | undefined {
    return this.upstream.shutdownReason()
  }

  // The client's own signal too: it may have left since the last tick.
  aborted(): boolean {
    return this.upstream.signal.aborted || this.input.signal.aborted
  }

  detach(): void {
    this.deps.lifecycle.untrack(this.upstream)
  }

  abort(): void {
    this.upstream.cut()
  }

  /** `charged`: what was booked (nothing for a repeat of a billing key already charged). */
  async settle(): Promise<{ usage: Usage; charged: Nanos }> {
    const usage = this.meter.usage()
    const fault = this.deps.fault
    fault?.('before_settle')
    if (this.pending !== undefined) this.enrichmentCharged = await this.pending.settleAll()
    const charged = await this.call.settle(priceUsage(this.input.request.route.price, usage))
    fault?.('after_settle_before_final_frame')
    return { usage, charged }
  }

  release(): void {
    this.pending?.releaseAll()
    this.call.release()
  }

  // The request's log line (written by the request context, or by the stream's end) gets the
  // outcome, usage and charge; metrics count tokens by model once per call (the nanos are
  // counted where every charge settles: MeteredCall). Calls without an HTTP request of their
  // own (Fusion parts) are logged by their caller.
  log(outcome: string, usage: Usage | undefined, charged: bigint | undefined): void {
    const record = this.record
    if (record !== undefined) {
      record.outcome = outcome
      // The request's whole charge: its files and hosted web work are charged with the chat.
      // Several calls on one request (an MCP batch) add up on its one line.
      const charge = this.enrichmentCharged === 0n ? charged : (charged ?? 0n) + this.enrichmentCharged
      const earlier = record.chargedNanos
      record.chargedNanos = earlier === undefined ? charge : earlier + (charge ?? 0n)
      if (usage !== undefined) {
        record.inputTokens = (record.inputTokens ?? 0) + usage.inputTokens
        record.outputTokens = (record.outputTokens ?? 0) + usage.outputTokens
      }
    }
    const metrics = this.deps.metrics
    if (metrics && usage && charged !== undefined) {
      const model = this.input.request.model
      metrics.tokens.inc(usage.inputTokens, model, 'input')
      metrics.tokens.inc(usage.outputTokens, model, 'output')
    }
  }
}

/**
 * `before-first-event`: the call failed to open (no status, no event); `before-output`: it opened,
 * then failed before any output, and the next backend was tried; `mid-stream`: the client saw it.
 */
export function countUpstreamFailure(metrics: GatewayMetrics, error: UpstreamError, phase: 'before-first-event' | 'before-output' | 'mid-stream', startedAt?: number): void {
  // A request the adapter would not send (phase `adapter`) made no upstream call at all.
  if (error.details.phase === 'adapter') return
  // A call the gateway itself cancelled (client gone, drain) is not an upstream failure; one
  // cancelled before the upstream answered is still an upstream call, counted as `aborted`.
  if (error.kind === 'aborted') {
    if (phase === 'before-first-event') metrics.upstreamCalls.inc(1, error.provider, 'aborted')
    return
  }
  metrics.upstreamErrors.inc(1, error.provider, error.kind, phase)
  if (phase === 'before-first-event') {
    metrics.upstreamCalls.inc(1, error.provider, error.kind)
    if (startedAt !== undefined) metrics.upstreamSeconds.observe((performance.now() - startedAt) / 1000, error.provider)
  }
}
