import type { Metering, PendingCharges } from '../billing/metering'
import type { Purpose } from '../billing/ledger'
import type { Backend } from '../catalog/types'
import { ApiError } from '../http/errors'
import type { Principal } from '../keys/principal'
import type { Clock } from '../lib/clock'
import type { FaultPoint } from '../lib/fault-point'
import type { Nanos } from '../lib/money'
import type { GatewayMetrics } from '../observability/gateway-metrics'
import type { Lifecycle } from '../observability/lifecycle'
import type { Logger } from '../observability/logger'
import type { FailedOpen } from '../providers/router'
import { UpstreamError, type CallAttestation, type Provider } from '../providers/types'
import type { WebService } from '../web/service'
import type { ChatEvent, ChatRequest, PassThroughFormat, Usage } from './canonical'
import { collect, type ChatResult } from './collect'
import type { DialectEncoder, ResponseMeta } from './dialects/types'
import type { DocumentEnrichmentDeps } from './enrich/documents'
import { typicalInputTokens } from './meter'
import { openCall } from './open-call'
import { streamResponse } from './stream-response'
import { toApiError } from './upstream-errors'

/** The backend a call's stream comes from; `failures`: the ones abandoned before it (router.ts). */
export interface OpenedBackend {
  backend: Backend
  provider: Provider
  attestation?: CallAttestation
  failures?: readonly UpstreamError[]
}

/** What the pipeline needs of the provider router. */
export interface ChatRouter {
  open(
    route: ChatRequest['route'],
    request: ChatRequest,
    options: {
      signal: AbortSignal
      controller?: AbortController
      requestId: string
      uncensored?: boolean
      collect?: boolean
      passThrough?: PassThroughFormat
      /** The stream moved to another backend before any output (providers/before-output.ts). */
      onFallback?: (opened: OpenedBackend) => void
      /** The stream failed before any output and no other backend opened: it ends with `error`. */
      onFallbackFailed?: (error: unknown) => void
    },
  ): Promise<OpenedBackend & { events: AsyncIterable<ChatEvent> }>
  /** The backend a call's opening failed on with `error` (open's rejection, onFallbackFailed's), and the failures before it. */
  failedOpen?(error: unknown): FailedOpen | undefined
  /** Throws the adapters' refusal of a request none of the route's backends would send, without calling any (Router.checkRequest). */
  checkRequest?(route: ChatRequest['route'], request: ChatRequest): void
  /** Exact input tokens from a backend that counts (Messages count_tokens); undefined when none does. */
  countTokens?(route: ChatRequest['route'], request: ChatRequest, options: { signal: AbortSignal; requestId: string }): Promise<number | undefined>
}

export interface PipelineDeps {
  metering: Metering
  router: ChatRouter
  logger: Logger
  clock: Clock
  /** Document extraction for file parts (absent: file parts are refused). */
  documents?: DocumentEnrichmentDeps
  /** Hosted web_fetch / web_search (absent: requests for them are refused with 503). */
  web?: WebService
  /** Upstream, token and charge metrics (updated once per call, never per frame). */
  metrics?: GatewayMetrics
  /** Calls register here: a drain waits for them, then cuts the rest; a call whose client left is cut on its ticks. */
  lifecycle: Lifecycle
  /** Crash tests only (SVC_FAULT_POINT): kills the process at a step. Undefined in production. */
  fault?: (point: FaultPoint) => void
}

/** One billed chat call, whatever its client format. */
export interface ChatCallInput {
  principal: Principal
  request: ChatRequest
  requestId: string
  uncensored?: boolean
  /** Ends the upstream call (the client left, or a caller's deadline passed). */
  signal: AbortSignal
  /** Lifts Bun's idle timeout for this response (long generations, slow streams). */
  disableIdleTimeout?: () => void
  /** What the charge is for (default `chat`; Fusion parts are `fusion`). */
  purpose?: Purpose
  /** A stable billing key: calls that share one are charged once (Fusion's Idempotency-Key). */
  billingKey?: string
  /** Called once the reservation is held, just before the upstream is called. */
  onAdmitted?: () => void
  /**
   * The call continues a request already in flight (Fusion's judge, after its participants): a
   * drain lets it run, as it lets that request's response finish. Only new requests are refused.
   */
  continuesRequest?: boolean
  /**
   * The request holds an org inference slot for this call already (a Fusion run holds one for
   * all its parts): the call, and its hosted web pieces, take none of their own.
   */
  slotHeld?: boolean
  /** What the request holds already for work of its own (a Fusion run's documents), besides this call's `pending`. */
  ownHeld?: Nanos
  /** The HTTP request this call serves, when it has one of its own (its log record is filled in). */
  httpRequest?: Request
  /** Set by openCall: charges of request-local work that wait for the chat's admission. */
  pending?: PendingCharges
  /** The events go to an encoder that reads `passthrough` events of this format (a streamed reply). */
  passThrough?: PassThroughFormat
}

export interface ChatInput extends Omit<ChatCallInput, 'signal' | 'httpRequest'> {
  encoder: DialectEncoder
  includeUsage: boolean
  /** The client's request: its signal ends the upstream call when the client leaves. */
  httpRequest: Request
  /**
   * Ends the call as the client's leaving does (default: the request's signal). An MCP tools/call
   * passes one that also aborts on the client's notifications/cancelled (mcp/in-flight-calls.ts):
   * the same cut, outcome `cancelled` and billing as a client that left.
   */
  signal?: AbortSignal
  /** A streamed reply is read in this process (an MCP tool), not sent by Bun's server (reply-sink.ts). */
  readInProcess?: boolean
}

/** A collected (non-streamed) chat call, settled. */
export interface CollectedChat {
  result: ChatResult
  usage: Usage
  charged: Nanos
  /** When the call started (the clock's epoch milliseconds). */
  startedAt: number
  /**
   * The attestation a Confidential call was bound to (the evidence fetched, with a fresh nonce,
   * before the call), as the router's `open` reported it (AttestedProvider.streamAttested).
   * Fusion reports it per participant and judge.
   */
  attestation?: CallAttestation
  /** The hosted web tools the gateway ran for this call (set when the request enabled them). */
  serverTools?: ServerTools
}

/** Hosted web tool runs of one call (they replace the upstream's counts in usage). */
export type ServerTools = { webFetchRequests: number; webSearchRequests: number }

/** The attestation fields of one Confidential call (names as in spec §2.4); defined with the providers that produce it. */
export type { CallAttestation } from '../providers/types'

/**
 * One chat request from admission to settlement (ARCHITECTURE.md §8 steps 3–9): policy checks,
 * reserve an upper-bound estimate, call the upstream through the router, stream or collect, and
 * settle exactly once, before the final frame or the JSON body.
 */
export async function runChat(deps: PipelineDeps, input: ChatInput): Promise<Response | Record<string, unknown>> {
  const signal = input.signal ?? input.httpRequest.signal
  const call = { ...input, signal, passThrough: input.request.stream ? input.encoder.passThrough : undefined }
  if (!input.request.stream) {
    const collected = await collectChat(deps, call)
    return input.encoder.encode(collected.result, collected.usage, metaOf(input, collected.startedAt, collected.serverTools)) as Record<string, unknown>
  }
  const open = await openCall(deps, call)
  const record = open.record
  if (record !== undefined) record.sink.defer(record)
  // A reply read in this process is no response: the MCP progress stream it feeds is counted (mcp/server.ts).
  const metrics = input.readInProcess === true ? undefined : deps.metrics
  if (metrics) metrics.openStreams += 1
  const encoder = input.encoder.streamEncoder(metaOf(input, open.started, open.serverTools))
  return streamResponse({
    events: open.events,
    encoder,
    observe: event => open.observe(event),
    failure: () => open.shutdownReason(),
    clientGone: () => signal.aborted,
    // With no other call in flight, an answer that came whole need not wait for its settlement
    // to start out (the time to first byte of an idle gateway); under load one write is cheaper.
    sendBeforeSettling: () => deps.lifecycle.inFlight <= 1,
    readInProcess: input.readInProcess,
    // The usage frame reports what is billed (the meter's: a missing count's fallback, the
    // call's bound, the hosted tools the gateway ran), not the upstream's report as it came.
    finishUsage: () => open.meter.usage(),
    // Terminal frames are written only after this resolves (settlement before the final frame).
    async complete(outcome) {
      try {
        if (outcome === 'cancelled') open.abort()
        // A stream the drain's deadline cut is logged as such, not as the upstream's failure.
        const logged = outcome === 'failed' && open.shutdownReason() !== undefined ? 'aborted' : outcome
        // What the encoder still held is dropped with the stream: the meter counted it on
        // arrival, but the client never received it (QA: a call held behind an unfinished one).
        if (outcome !== 'finished' && encoder.unsent !== undefined) open.meter.withdraw(encoder.unsent())
        // A stream that failed or was left before any output charges nothing; once output was
        // sent, the reported usage or the counted fallback is charged.
        if (outcome !== 'finished' && !open.meter.producedOutput) {
          open.release()
          open.log(logged, undefined, 0n)
          return undefined
        }
        try {
          const { usage, charged } = await open.settle()
          open.log(logged, usage, charged)
          return undefined
        } catch (error) {
          // A settlement that failed before reaching the ledger (a usage it could not price) would
          // hold the call, its hold and slot, for good: end it (the ledger keeps its own failures).
          if (!open.call.done) open.release()
          open.log('settlement-failed', undefined, undefined)
          return error instanceof ApiError ? error : new ApiError('unavailable', 'the ledger could not record this charge')
        }
      } finally {
        open.detach()
        if (metrics) metrics.openStreams -= 1
        if (record !== undefined) record.sink.end(record)
      }
    },
  })
}

/** What the reply's encoder needs beyond the answer: its id, model, time and usage options. */
function metaOf(input: ChatInput, startedAt: number, serverTools: ServerTools | undefined): ResponseMeta {
  return {
    id: `${input.encoder.idPrefix}${Bun.randomUUIDv7('base64url')}`,
    model: input.request.model,
    createdAt: Math.floor(startedAt / 1000),
    includeUsage: input.includeUsage,
    estimatedInputTokens: typicalInputTokens(input.request),
    serverToolUse: serverTools !== undefined,
  }
}

/**
 * A collected call that failed, or was abandoned, after `collectChat`'s caller had forwarded
 * its output to a client (Fusion's streamed synthesis): charged like a cut stream, for the input
 * and the output sent: `usage`, priced `charged`. `attestation`: the evidence a Confidential call
 * was bound to, as on a success (the output sent came from that backend).
 */
export class DeliveredFailure extends ApiError {
  constructor(
    error: ApiError,
    readonly usage: Usage,
    readonly charged: Nanos,
    readonly attestation: CallAttestation | undefined,
  ) {
    super(error.code, error.message, error.param, error.headers)
  }
}

/**
 * The non-streamed path of runChat, for callers that need the canonical result rather than a
 * dialect's JSON (Fusion): admit, call, collect, settle. Throws ApiError when anything fails,
 * with nothing charged (the caller received no answer), unless `delivered` says `onEvent` has
 * already sent output on to a client: then what was sent is charged (DeliveredFailure), as a
 * stream's is. `onEvent` sees each event as it arrives; a promise it returns holds the upstream's
 * next read until it settles (collect).
 */
export async function collectChat(deps: PipelineDeps, input: ChatCallInput, onEvent?: (event: ChatEvent) => void | Promise<void>, delivered?: () => boolean): Promise<CollectedChat> {
  // Nothing watches single events: the upstream may answer in one JSON body instead of a stream.
  const open = await openCall(deps, input, { collect: onEvent === undefined })
  try {
    const observe = onEvent ? (event: ChatEvent): void | Promise<void> => (open.observe(event), onEvent(event)) : (event: ChatEvent) => open.observe(event)
    const result = await collect(open.events, observe)
    if (result.error || open.aborted()) {
      // A client that left cut the upstream itself: logged as a stream the client left is, not
      // as the upstream's failure.
      // (The call's signal is the client's when it serves a request of its own: see ChatInput.signal.)
      // (The drain's deadline cut the call: `aborted`, as the Encrypted relay and parses log it.)
      const outcome = input.httpRequest !== undefined && input.signal.aborted ? 'cancelled' : open.shutdownReason() ? 'aborted' : result.error ? 'upstream-error' : 'aborted'
      const failure = open.shutdownReason() ?? toApiError(result.error ?? new UpstreamError('aborted', 'the call was aborted', 'gateway', input.request.model))
      if (delivered?.() === true) {
        const { usage, charged } = await open.settle()
        open.log(outcome, usage, charged)
        throw new DeliveredFailure(failure, usage, charged, open.attestation)
      }
      // The client receives nothing of a failed, abandoned or cut non-streamed answer, so
      // nothing is charged.
      open.release()
      open.log(outcome, undefined, undefined)
      throw failure
    }
    const { usage, charged } = await open.settle()
    open.log('ok', usage, charged)
    const collected: CollectedChat = { result, usage, charged, startedAt: open.started }
    if (open.attestation) collected.attestation = open.attestation
    if (open.serverTools) collected.serverTools = open.serverTools
    return collected
  } catch (error) {
    // Client gone or an exception while collecting: nothing was delivered.
    if (!open.call.done) open.release()
    throw toApiError(error)
  } finally {
    open.detach()
  }
}
