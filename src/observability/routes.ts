import { timingSafeEqual } from 'node:crypto'
import { Elysia, t } from 'elysia'
import type { LedgerHealth } from '../billing/ledger-health'
import { pingDatabase, type Database } from '../db/client'
import { ApiError } from '../http/errors'
import { ErrorResponse, unauthorized } from '../http/openapi-schemas'
import type { Lifecycle } from './lifecycle'
import type { MetricsRegistry } from './metrics'

/** Where /metrics is served: on this app with a bearer token, on a separate admin port, or not at all. */
export interface MetricsExposure {
  readonly registry: MetricsRegistry
  /** The bearer token /metrics requires, if configured. */
  readonly token: string | undefined
  /** True when this app serves /metrics (token configured and no admin port). */
  readonly onPublicPort: boolean
}

const PROMETHEUS = 'text/plain; version=0.0.4; charset=utf-8'

/** Liveness, readiness (unready while the database is down or the instance drains) and /metrics. */
export function healthRoutes(database: Database, lifecycle: Lifecycle, ledgerHealth: LedgerHealth | undefined, metrics: MetricsExposure) {
  return new Elysia({ tags: ['Health'] })
    .get('/healthz', () => ({ status: 'ok' as const }), {
      response: { 200: t.Object({ status: t.Literal('ok') }) },
      detail: { summary: 'Liveness', description: 'The process is up and serving requests.' },
    })
    .get(
      '/readyz',
      async ({ set }) => {
        const answer = await readiness(database, lifecycle, ledgerHealth)
        set.headers['cache-control'] = 'no-store'
        if (answer.status === 'ready') return { status: 'ready' as const, database: 'ok' as const }
        set.status = 503
        return { status: answer.status, database: answer.database }
      },
      {
        response: {
          200: t.Object({ status: t.Literal('ready'), database: t.Literal('ok') }),
          503: t.Object({ status: t.Union([t.Literal('unavailable'), t.Literal('draining')]), database: t.Union([t.Literal('ok'), t.Literal('unreachable'), t.Literal('unwritable')]) }),
          500: ErrorResponse,
        },
        detail: {
          summary: 'Readiness',
          description:
            'The database answers a query, the ledger can write to it, and the instance is not shutting down. 503 `unavailable` while the database does not answer (`unreachable`) or ' +
            'refuses the ledger\'s writes (`unwritable`: read-only, or locked by another writer past the busy timeout; billed calls get 503 meanwhile); 503 `draining` from the moment a shutdown starts.',
        },
      },
    )
    .get(
      '/metrics',
      ({ request }) => {
        if (!metrics.onPublicPort) {
          // Off, or served on the admin port only (metrics.port set): say which, so an operator is not sent to configure what is configured.
          const where = metrics.token === undefined ? 'configure metrics.token_env, or metrics.port for an admin port' : 'they are served on the admin port (metrics.port)'
          throw new ApiError('not_found', `metrics are not served on this port (${where})`)
        }
        return metricsResponse(request, metrics)
      },
      {
        response: { 200: t.String({ description: 'Prometheus text format 0.0.4 (content-type text/plain)' }), 401: unauthorized(ErrorResponse), 404: ErrorResponse },
        detail: {
          security: [{ metricsToken: [] }],
          summary: 'Prometheus metrics',
          description:
            'Prometheus text format (text/plain; version=0.0.4). Off unless configured: with `metrics.token_env` it needs ' +
            '`Authorization: Bearer <that token>`; with `metrics.port` it is served only on that admin port (404 here).',
        },
      },
    )
}

/**
 * The readiness answer: draining wins, then the database. A database that answers reads but whose
 * last ledger write failed (read-only, or another process holding the write lock) is unready as
 * well: billed calls are refused with 503 until a write succeeds again (LedgerHealth).
 */
export async function readiness(
  database: Database,
  lifecycle: Lifecycle,
  ledgerHealth: LedgerHealth | undefined,
): Promise<{ status: 'ready' | 'unavailable' | 'draining'; database: 'ok' | 'unreachable' | 'unwritable' }> {
  if (lifecycle.draining) return { status: 'draining', database: 'ok' }
  if (!(await pingDatabase(database))) return { status: 'unavailable', database: 'unreachable' }
  if (ledgerHealth?.unavailable === true) return { status: 'unavailable', database: 'unwritable' }
  return { status: 'ready', database: 'ok' }
}

/** /metrics: checks the bearer token (when one is configured) in constant time, then renders. */
export function metricsResponse(request: Request, metrics: Pick<MetricsExposure, 'registry' | 'token'>): Response {
  if (metrics.token !== undefined) {
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(request.headers.get('authorization') ?? '')
    if (!match || !sameSecret(match[1]!, metrics.token)) throw new ApiError('unauthorized', 'metrics need "Authorization: Bearer <metrics token>"')
  }
  return new Response(metrics.registry.render(), { headers: { 'content-type': PROMETHEUS, 'cache-control': 'no-store' } })
}

function sameSecret(given: string, expected: string): boolean {
  const a = new Bun.CryptoHasher('sha256').update(given).digest()
  const b = new Bun.CryptoHasher('sha256').update(expected).digest()
  return timingSafeEqual(a, b)
}
