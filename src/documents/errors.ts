import { ApiError } from '../http/errors'
import { ExtractionError } from './types'

// How long a client told "extractor at capacity" waits: jobs finish in well under a second
// typically, and a queue slot frees as soon as one does.
const BUSY_RETRY_SECONDS = 1

/**
 * An extraction failure as the API error every surface renders (ARCHITECTURE.md §6, §10):
 * unreadable or hostile input → 400 invalid_request, a full queue → 429 rate_limited with
 * Retry-After and X-RateLimit-*, a timeout or shutdown → 503 unavailable, a job killed for the
 * memory of jobs running together → 503 unavailable with Retry-After. `subject` names the
 * document in the message ("attached file "a.pdf"") so chat errors say which part failed.
 */
export function extractionApiError(error: unknown, options: { subject?: string; queueSize: number; nowMs: number; param?: string }): ApiError {
  if (error instanceof ApiError) return error
  const prefix = options.subject ? `${options.subject}: ` : ''
  if (!(error instanceof ExtractionError)) return new ApiError('unavailable', `${prefix}document extraction failed unexpectedly; try again`, options.param)
  switch (error.reason) {
    case 'invalid':
      return new ApiError('invalid_request', `${prefix}${error.message}`, options.param)
    case 'busy':
      return new ApiError('rate_limited', `${prefix}${error.message} (retry after ${BUSY_RETRY_SECONDS}s)`, options.param, {
        'Retry-After': String(BUSY_RETRY_SECONDS),
        'X-RateLimit-Limit': String(options.queueSize),
        'X-RateLimit-Remaining': '0',
        'X-RateLimit-Reset': String(Math.ceil(options.nowMs / 1000) + BUSY_RETRY_SECONDS),
      })
    case 'timeout':
      return new ApiError('unavailable', `${prefix}${error.message}; the document may be too complex to read`, options.param)
    case 'closed':
      return new ApiError('unavailable', `${prefix}${error.message}`, options.param)
    case 'overloaded':
      return new ApiError('unavailable', `${prefix}${error.message}`, options.param, { 'Retry-After': String(BUSY_RETRY_SECONDS) })
  }
}
