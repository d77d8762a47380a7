import { ApiError } from '../http/errors'
import { UpstreamError } from '../providers/types'

/**
 * How an upstream failure before any output reaches the client: the upstream's rate limit is
 * passed on as 429 with its Retry-After; a request the upstream rejected as malformed is the
 * caller's 400; everything else is 502 provider_error. Upstream bodies are trimmed, and never
 * carry our credentials (adapters build them without).
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error
  if (!(error instanceof UpstreamError)) return new ApiError('provider_error', 'the upstream provider failed')
  // No evidence, no call: a Confidential or Encrypted backend that cannot be attested is unavailable.
  if (error.details.phase === 'attestation') {
    const status = error.status ? ` (HTTP ${error.status})` : ''
    return new ApiError('unavailable', `the attested backend's evidence could not be fetched: ${error.kind}${status}`)
  }
  if (error.kind === 'rate-limited') {
    const seconds = Math.max(1, Math.ceil((error.details.retryAfterMs ?? 1000) / 1000))
    return new ApiError('rate_limited', 'the upstream provider is rate limiting requests; retry later', undefined, { 'retry-after': String(seconds) })
  }
  if (error.kind === 'bad-request') {
    // Without an upstream body the refusal is the adapter's own (a request its wire cannot carry): say why.
    if (!error.details.bodySnippet) return new ApiError('invalid_request', error.message)
    return new ApiError('invalid_request', `the upstream provider rejected the request: ${error.details.bodySnippet.slice(0, 300)}`)
  }
  const status = error.status ? ` (HTTP ${error.status})` : ''
  return new ApiError('provider_error', `the upstream provider failed: ${error.kind}${status}`)
}
