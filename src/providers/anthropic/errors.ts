import { SseEventTooLargeError } from '../../http/sse'
import { UpstreamError, type UpstreamErrorKind } from '../types'
import { withoutSecret } from '../secret-text'

/** Who failed: stamped on every UpstreamError this adapter makes. */
export interface ErrorContext {
  readonly provider: string
  readonly model: string
  /** Scrubbed from any upstream text we keep (a proxy may echo request headers). */
  readonly apiKey?: string
}

/** How much of an upstream error body we keep for logs, in UTF-8 bytes (never the whole body). */
const SNIPPET_BYTES = 500

/**
 * Anthropic's `error.type` values (https://docs.anthropic.com/en/api/errors) → our closed kinds.
 * Used for in-stream `error` events, which carry no HTTP status, and to refine a status.
 */
const KIND_BY_ERROR_TYPE: Readonly<Record<string, UpstreamErrorKind>> = {
  invalid_request_error: 'bad-request',
  request_too_large: 'bad-request',
  authentication_error: 'auth',
  permission_error: 'auth',
  billing_error: 'auth',
  not_found_error: 'not-found',
  rate_limit_error: 'rate-limited',
  api_error: 'server',
  // 529 in a non-streaming context; a stream may carry it as an event.
  overloaded_error: 'server',
  timeout_error: 'timeout',
}

/**
 * HTTP status → kind. 529 is Anthropic's "overloaded": a server-side condition worth a fallback.
 * A 3xx (redirects are not followed, so the API key never travels to another host) means a
 * misconfigured base URL, which is the backend's problem, not the request's.
 */
export function kindForStatus(status: number): UpstreamErrorKind {
  if (status < 400) return 'server'
  if (status === 401 || status === 403) return 'auth'
  if (status === 404) return 'not-found'
  if (status === 408) return 'timeout'
  if (status === 429) return 'rate-limited'
  if (status >= 500) return 'server'
  return 'bad-request'
}

/** `{ type: 'error', error: { type, message } }`, or undefined when the body has another shape. */
function parseErrorBody(body: string): { type?: string; message?: string } | undefined {
  try {
    const parsed: unknown = JSON.parse(body)
    if (typeof parsed !== 'object' || parsed === null) return undefined
    const error = (parsed as { error?: unknown }).error
    if (typeof error !== 'object' || error === null) return undefined
    const { type, message } = error as { type?: unknown; message?: unknown }
    return { type: typeof type === 'string' ? type : undefined, message: typeof message === 'string' ? message : undefined }
  } catch {
    return undefined
  }
}

/**
 * `retry-after` as milliseconds: delta-seconds (what Anthropic sends) or an HTTP-date.
 * `retry-after-ms` wins when a proxy in front adds it.
 */
export function parseRetryAfter(headers: Headers, nowMs: number): number | undefined {
  const milliseconds = headers.get('retry-after-ms')
  if (milliseconds !== null && /^\d+(\.\d+)?$/.test(milliseconds.trim())) return Math.ceil(Number(milliseconds))
  const value = headers.get('retry-after')?.trim()
  if (value === undefined || value === '') return undefined
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000)
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs)
}

/** A non-2xx answer, classified by status first (the body's `error.type` only names it). */
export function errorFromResponse(status: number, headers: Headers, rawBody: string, context: ErrorContext, nowMs: number): UpstreamError {
  const body = withoutSecret(rawBody, context.apiKey)
  const parsed = parseErrorBody(body)
  const kind = kindForStatus(status)
  const label = parsed?.type ?? `HTTP ${status}`
  const message = parsed?.message !== undefined ? `${label}: ${parsed.message}` : label
  return new UpstreamError(kind, `Anthropic answered ${status} (${truncate(message)})`, context.provider, context.model, {
    status,
    ...(kind === 'rate-limited' || status === 529 || status === 503 ? optionalRetryAfter(headers, nowMs) : {}),
    ...(body !== '' ? { bodySnippet: truncate(body) } : {}),
    ...(parsed?.message !== undefined ? { upstreamMessage: truncate(parsed.message) } : {}),
  })
}

/** An SSE `error` event (e.g. `overloaded_error` mid-stream). Its payload is the error body shape. */
export function errorFromStreamEvent(rawData: string, context: ErrorContext): UpstreamError {
  const data = withoutSecret(rawData, context.apiKey)
  const parsed = parseErrorBody(data)
  const kind = (parsed?.type !== undefined && Object.hasOwn(KIND_BY_ERROR_TYPE, parsed.type) ? KIND_BY_ERROR_TYPE[parsed.type] : undefined) ?? 'server'
  const label = parsed?.type ?? 'unknown error'
  const message = parsed?.message !== undefined ? `${label}: ${parsed.message}` : label
  return new UpstreamError(kind, `Anthropic stream error (${truncate(message)})`, context.provider, context.model, {
    bodySnippet: truncate(data),
    ...(parsed?.message !== undefined ? { upstreamMessage: truncate(parsed.message) } : {}),
  })
}

/**
 * The stream broke the protocol (bad JSON, or it ended before `message_stop`): the upstream
 * misbehaved, so `server` (before the first event that lets the router try another backend).
 */
export function protocolError(message: string, context: ErrorContext): UpstreamError {
  return new UpstreamError('server', message, context.provider, context.model)
}

/** Why our own AbortController fired, when it did. */
export type AbortCause = 'client' | 'connect-timeout' | 'idle-timeout'

/**
 * A failure of fetch or of reading the body. Our own aborts are classified by their cause
 * (the AbortError itself says nothing useful); anything else is a network failure.
 */
export function errorFromTransport(cause: AbortCause | undefined, error: unknown, context: ErrorContext, timeouts: { connectMs: number; idleMs: number }): UpstreamError {
  if (error instanceof UpstreamError) return error
  // The stream's bytes arrived, but not as events: the upstream misbehaved, the connection did not fail.
  if (error instanceof SseEventTooLargeError) return protocolError(`The Anthropic stream sent ${error.message}`, context)
  switch (cause) {
    case 'client':
      return new UpstreamError('aborted', 'The request was cancelled', context.provider, context.model)
    case 'connect-timeout':
      return new UpstreamError('timeout', `No response headers from Anthropic within ${timeouts.connectMs} ms`, context.provider, context.model)
    case 'idle-timeout':
      return new UpstreamError('timeout', `No bytes from Anthropic for ${timeouts.idleMs} ms`, context.provider, context.model)
    default: {
      const detail = error instanceof Error ? error.message : String(error)
      return new UpstreamError('connection', `Connection to Anthropic failed (${truncate(detail)})`, context.provider, context.model)
    }
  }
}

function optionalRetryAfter(headers: Headers, nowMs: number): { retryAfterMs?: number } {
  const retryAfterMs = parseRetryAfter(headers, nowMs)
  return retryAfterMs === undefined ? {} : { retryAfterMs }
}

/** At most SNIPPET_BYTES of `text` as UTF-8, cut on a character boundary. */
function truncate(text: string): string {
  if (text.length * 3 <= SNIPPET_BYTES) return text // cannot exceed the cap: skip the encode
  const bytes = new TextEncoder().encode(text)
  if (bytes.length <= SNIPPET_BYTES) return text
  let end = SNIPPET_BYTES
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end -= 1 // never split a UTF-8 sequence
  return new TextDecoder().decode(bytes.subarray(0, end))
}
