// Classification of upstream failures into the closed UpstreamError kinds (ARCHITECTURE.md §6).
// The router falls over only on `retryable` kinds, so the mapping decides whether a second
// backend is tried: auth and bad-request never are, 429 and 5xx are.

import { UpstreamError } from '../types'
import { withoutSecret } from '../secret-text'

/** Longest body excerpt kept on an error (bytes of UTF-8). */
export const BODY_SNIPPET_BYTES = 500

/** How much of an error body is read (enough to parse a JSON error whose snippet is cut). */
export const ERROR_BODY_READ_BYTES = 4096

/** Who failed: the provider id and the upstream model, and the secret to scrub from anything we keep. */
export interface ErrorOrigin {
  readonly provider: string
  readonly model: string
  readonly apiKey?: string
}

/**
 * A non-2xx answer as an UpstreamError: 400/413/422 → bad-request, 401/403 → auth, 404 →
 * not-found, 408 → timeout, 429 → rate-limited (with Retry-After), 5xx → server, any other
 * 4xx → bad-request, anything else (a redirect: base_url is wrong) → server.
 */
export function classifyStatus(origin: ErrorOrigin, status: number, headers: Headers, body: string): UpstreamError {
  const scrubbed = withoutSecret(body, origin.apiKey)
  const bodySnippet = cutUtf8(scrubbed, BODY_SNIPPET_BYTES)
  const parsed = upstreamMessage(scrubbed)
  const detail = parsed === undefined ? undefined : cutUtf8(parsed, 200)
  const message = `upstream answered ${status}${detail ? `: ${detail}` : ''}`
  const retryAfterMs = parseRetryAfter(headers)
  const details = { status, bodySnippet, ...(parsed !== undefined ? { upstreamMessage: cutUtf8(parsed, BODY_SNIPPET_BYTES) } : {}), ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) }
  return new UpstreamError(kindForStatus(status), message, origin.provider, origin.model, details)
}

/** The kind for an HTTP status (see classifyStatus). */
export function kindForStatus(status: number): UpstreamError['kind'] {
  if (status === 401 || status === 403) return 'auth'
  if (status === 404) return 'not-found'
  if (status === 408) return 'timeout'
  if (status === 429) return 'rate-limited'
  if (status >= 500) return 'server'
  if (status >= 400) return 'bad-request'
  return 'server'
}

/** A failure of `fetch` itself (no HTTP answer): refused, reset, DNS, TLS. */
export function connectionError(origin: ErrorOrigin, cause: unknown): UpstreamError {
  const code = typeof cause === 'object' && cause !== null && 'code' in cause ? String((cause as { code: unknown }).code) : undefined
  const message = `upstream connection failed${code ? ` (${code})` : ''}`
  return new UpstreamError('connection', message, origin.provider, origin.model)
}

/**
 * Retry-After as milliseconds: OpenAI's `retry-after-ms` first, then `retry-after` as delta
 * seconds (decimals allowed) or an HTTP date. Undefined when absent or unreadable.
 */
export function parseRetryAfter(headers: Headers, now: number = Date.now()): number | undefined {
  const milliseconds = headers.get('retry-after-ms')
  if (milliseconds !== null && /^\d+(\.\d+)?$/.test(milliseconds.trim())) return Math.ceil(Number(milliseconds))
  const value = headers.get('retry-after')?.trim()
  if (!value) return undefined
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000)
  const date = Date.parse(value)
  if (Number.isNaN(date)) return undefined
  return Math.max(0, date - now)
}

/** At most `maxBytes` of `text` as UTF-8, cut on a character boundary. */
export function cutUtf8(text: string, maxBytes: number): string {
  const bytes = new TextEncoder().encode(text)
  if (bytes.length <= maxBytes) return text
  let end = maxBytes
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end -= 1 // never split a UTF-8 sequence
  return new TextDecoder().decode(bytes.subarray(0, end))
}

/** The human message of an OpenAI-style error body (`{ error: { message } }` or `{ error: "…" }`), if any. */
function upstreamMessage(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: unknown; message?: unknown; detail?: unknown }
    const error = parsed.error
    if (typeof error === 'string') return error
    if (typeof error === 'object' && error !== null && typeof (error as { message?: unknown }).message === 'string') return (error as { message: string }).message
    if (typeof parsed.message === 'string') return parsed.message
    if (typeof parsed.detail === 'string') return parsed.detail
    // FastAPI's validation errors (vLLM, many proxies): `detail: [{ loc, msg, input }]`, told by place and message.
    if (Array.isArray(parsed.detail)) {
      const problems = parsed.detail.flatMap(item => {
        const { loc, msg } = (typeof item === 'object' && item !== null ? item : {}) as { loc?: unknown; msg?: unknown }
        if (typeof msg !== 'string') return []
        return [Array.isArray(loc) && loc.length > 0 ? `${loc.join('.')}: ${msg}` : msg]
      })
      if (problems.length > 0) return problems.join('; ')
    }
  } catch {
    // Not JSON (a proxy's HTML page, a truncated snippet): the snippet itself carries it.
  }
  return undefined
}
