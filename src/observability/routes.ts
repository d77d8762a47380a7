import { Elysia, t } from 'elysia'
import { pingDatabase, type Database } from '../db/client'
import { ErrorResponse } from '../http/openapi-schemas'

/** Liveness and readiness probes (public; no credential). */
export function healthRoutes(database: Database) {
  return new Elysia({ tags: ['Health'] })
    .get('/healthz', () => ({ status: 'ok' as const }), {
      response: { 200: t.Object({ status: t.Literal('ok') }) },
      detail: { summary: 'Liveness', description: 'The process is up and serving requests.' },
    })
    .get(
      '/readyz',
      async ({ set }) => {
        set.headers['cache-control'] = 'no-store'
        if (await pingDatabase(database)) return { status: 'ready' as const, database: 'ok' as const }
        set.status = 503
        return { status: 'unavailable' as const, database: 'unreachable' as const }
      },
      {
        response: {
          200: t.Object({ status: t.Literal('ready'), database: t.Literal('ok') }),
          503: t.Object({ status: t.Literal('unavailable'), database: t.Literal('unreachable') }),
          500: ErrorResponse,
        },
        detail: { summary: 'Readiness', description: 'The database answers a query. 503 while it does not.' },
      },
    )
}
