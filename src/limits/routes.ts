import { Elysia } from 'elysia'
import { authMacro } from '../http/auth'
import { ErrorResponse, unauthorized } from '../http/openapi-schemas'
import { refuseQuery } from '../http/query'
import type { KeyService } from '../keys/service'
import { toRfc3339 } from '../lib/clock'
import type { Limits } from './admission'
import type { RateSnapshot } from './limiter'
import { RateLimitsResponse } from './schema'

// No 429: this route takes from no bucket (SECURITY-NOTES L10).
const errors = { 400: ErrorResponse, 401: unauthorized(ErrorResponse), 403: ErrorResponse, 503: ErrorResponse }

function windowView(snapshot: RateSnapshot) {
  return {
    limit: snapshot.limit,
    remaining: snapshot.remaining,
    reset_at: toRfc3339(snapshot.resetAt * 1000),
    refill_per_second: snapshot.refillPerSecond,
  }
}

/**
 * GET /api/v1/rate-limits (spec §4.13, SECURITY-NOTES L10): the caller's request windows and
 * inference slots, for any organization key (no admin needed). It reads with `peek` only, and
 * its auth step takes no management token either (`rateLimited: false`).
 */
export function rateLimitRoutes(keys: KeyService, limits: Limits) {
  return new Elysia({ prefix: '/api/v1/rate-limits', tags: ['Rate limits'] }).use(authMacro(keys, limits)).get(
    '',
    ({ principal, request, set }) => {
      refuseQuery(request)
      const snapshot = limits.snapshot(principal)
      set.headers['cache-control'] = 'no-store'
      return {
        inference: { key: windowView(snapshot.inference.key), org: windowView(snapshot.inference.org) },
        management: { key: windowView(snapshot.management.key), org: windowView(snapshot.management.org) },
        concurrency: { in_use: snapshot.concurrency.inUse, limit: snapshot.concurrency.limit },
      } satisfies typeof RateLimitsResponse.static
    },
    {
      // Inspecting the windows must not consume them, so this route takes no bucket itself.
      auth: { mode: 'management', rateLimited: false },
      response: { 200: RateLimitsResponse, ...errors },
      detail: {
        summary: 'Get rate limits',
        description:
          "Non-consuming snapshots of the caller's request windows (inference and management, per key and per organization) " +
          'and of its organization’s inference concurrency. Limits are per gateway instance. Reading them takes nothing from any window, ' +
          'the management ones included, so this route never answers 429. Takes no query parameters (any is 400).',
      },
    },
  )
}
