import type { ApiError } from '../http/errors'
import type { GatewayMetrics } from './gateway-metrics'
import type { Logger } from './logger'

/**
 * What the one log line of a request says (ARCHITECTURE.md §8 step 9). Filled in as the request
 * goes: the request context creates it, auth adds the organization and key, the chat pipeline
 * adds the model, backend, usage and charge. Never content: no prompt, output, file, ciphertext
 * or credential is ever put here.
 */
export interface RequestRecord {
  readonly startedAt: number
  readonly method: string
  readonly requestId: string
  route: string
  status: number
  orgId?: string
  keyId?: string
  model?: string
  backend?: string
  /** How a billed call ended: ok, upstream-error, failed, cancelled, settlement-failed, … */
  outcome?: string
  stream?: boolean
  inputTokens?: number
  outputTokens?: number
  chargedNanos?: bigint
  /** A stream: its line is written when the stream ends, not when the headers leave (RequestLog.defer). */
  deferred: boolean
  /**
   * Parts of the response still running that the line waits for: a stream, or an MCP tools/call
   * and its progress stream around the chat stream inside it. The line is written when the last
   * one ends (and the response was recorded).
   */
  pending: number
  ended: boolean
  readonly sink: RequestLog
  /**
   * Puts back the connection's idle timeout, which the request lifted for a long answer
   * (http/idle-timeout.ts): called once the request is done.
   */
  restoreIdle?: () => void
}

/**
 * The status logged for a request whose client left before its response (nginx's "client closed
 * request"): the error the gateway would have sent reached no one, and is not the gateway's or
 * the upstream's failure. A stream the client left logs the 200 that was sent.
 */
export const CLIENT_CLOSED_REQUEST = 499

const records = new WeakMap<Request, RequestRecord>()
// Methods are a label: anything else a client invents shares one value, so series stay bounded.
const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'])

/** The record of a request (undefined for requests that did not pass through the request context). */
export function recordOf(request: Request): RequestRecord | undefined {
  return records.get(request)
}

/** A billed call's outcome, and its charge when it settled, on its request's line (README, Metrics and logs). */
export function noteOutcome(request: Request, outcome: string, charged?: bigint): void {
  const record = records.get(request)
  if (record === undefined) return
  record.outcome = outcome
  if (charged !== undefined) record.chargedNanos = charged
}

/**
 * A request's call failed with `error`: the one rule of the HTTP error handler and of an MCP
 * tool's failure. The line's outcome is the one the call set (`upstream-error`, `aborted`, …),
 * else `cancelled` when the client has left (the error reaches no one: the line says 499, never
 * an upstream failure or a refusal; a chat's hosted search, say, throws when its client leaves
 * and has no request to mark), else the error's code. The gateway's own refusals
 * are counted, except a cancelled call's: a client that left was refused nothing.
 */
export function recordFailure(request: Request, error: ApiError, metrics: GatewayMetrics | undefined): RequestRecord | undefined {
  const record = recordOf(request)
  const outcome = record?.outcome ?? (request.signal.aborted ? 'cancelled' : error.code)
  if (record !== undefined) record.outcome = outcome
  if (outcome !== 'cancelled') metrics?.refused(error)
  return record
}

/** Writes the per-request log line and the per-request metrics, once each. */
export class RequestLog {
  constructor(
    private readonly logger: Logger,
    readonly metrics: GatewayMetrics,
  ) {}

  /** A record for a request entering the app. */
  begin(request: Request, requestId: string): RequestRecord {
    const record: RequestRecord = {
      startedAt: performance.now(), method: METHODS.has(request.method) ? request.method : 'OTHER', requestId, route: 'unmatched', status: 0, deferred: false, pending: 0, ended: false, sink: this,
    }
    records.set(request, record)
    return record
  }

  /**
   * The response headers are ready: metrics now; the log line now, unless a part it waits for
   * is still running (`defer`: a stream's line is written at its end). A lifted idle timeout
   * comes back now, or (deferred) with the line.
   */
  respond(record: RequestRecord, route: string, status: number): void {
    record.route = route
    record.status = status
    this.metrics.request(route, record.method, status, (performance.now() - record.startedAt) / 1000)
    if (!record.deferred) restoreIdle(record)
    if (record.pending === 0) this.write(record)
  }

  /** A part of the response the line must wait for starts (a stream); `end` says it is over. */
  defer(record: RequestRecord): void {
    record.deferred = true
    record.pending += 1
  }

  /** A deferred part is over: the line is written once none is left (and the response was recorded). */
  end(record: RequestRecord): void {
    if (record.pending > 0) record.pending -= 1
    if (record.pending === 0) this.write(record)
  }

  /** Writes the request's line (once). */
  private write(record: RequestRecord): void {
    // A short stream can end before the request context has recorded its status: `respond` writes it.
    if (record.ended || record.status === 0) return
    record.ended = true
    this.logger.info('request', {
      request_id: record.requestId, org_id: record.orgId, key_id: record.keyId, route: record.route, method: record.method,
      status: record.status, model: record.model, backend: record.backend, outcome: record.outcome, stream: record.stream,
      input_tokens: record.inputTokens, output_tokens: record.outputTokens, charged_nanos: record.chargedNanos?.toString(),
      latency_ms: Math.round((performance.now() - record.startedAt) * 100) / 100,
    })
    if (record.deferred) restoreIdle(record)
  }
}

/** Puts back the idle timeout the request lifted (http/idle-timeout.ts), once; a no-op otherwise. */
export function restoreIdle(record: RequestRecord): void {
  const restore = record.restoreIdle
  if (restore === undefined) return
  record.restoreIdle = undefined
  try {
    restore()
  } catch {
    // The connection is gone already: nothing to time out.
  }
}
