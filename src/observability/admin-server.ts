import { isIP } from 'node:net'
import type { Deps } from '../deps'
import { ApiError, renderError } from '../http/errors'
import { checkRequestUrl, hostlessPath } from '../http/request-context'
import { requestIdFrom } from '../lib/ids'
import { metricsResponse, readiness } from './routes'

/**
 * The admin port (`metrics.port`): /metrics, /healthz and /readyz only, outside the public app,
 * so that scrapes and probes can stay on a network the public never reaches. /metrics still
 * needs the token when `metrics.token_env` is also set.
 */
export function startAdminServer(deps: Deps, port: number, hostname: string): ReturnType<typeof Bun.serve> {
  try {
    return serveAdmin(deps, port, hostname)
  } catch (error) {
    // Bun's own words name a port, not which setting chose it; and for a host name that does not
    // resolve they are not about names at all (ENOENT "no such file or directory", EINVAL, even
    // EADDRINUSE were seen), so a name is pointed at as the likely cause.
    const hint = isIP(hostname) === 0 ? ` (is "${hostname}" a name that resolves to an address of this machine?)` : ''
    throw new Error(`cannot serve the admin port (metrics.port ${port} on metrics.host ${hostname}): ${(error as Error).message}${hint}`)
  }
}

function serveAdmin(deps: Deps, port: number, hostname: string): ReturnType<typeof Bun.serve> {
  return Bun.serve({
    port,
    hostname,
    async fetch(request) {
      const requestId = requestIdFrom(request.headers.get('x-request-id'))
      try {
        const response = await answer(deps, request)
        // Every response carries its request id, as the public port's do (README, Metrics and logs).
        response.headers.set('x-request-id', requestId)
        return response
      } catch (error) {
        return renderError(error instanceof ApiError ? error : new ApiError('internal_error', 'internal error'), 'api', requestId)
      }
    },
  })
}

async function answer(deps: Deps, request: Request): Promise<Response> {
  const path = pathOf(request)
  const known = path === '/metrics' || path === '/healthz' || path === '/readyz'
  if (!known) throw new ApiError('not_found', `no route for ${request.method} ${path}`)
  if (request.method !== 'GET' && request.method !== 'HEAD') throw new ApiError('method_not_allowed', `${request.method} is not allowed on ${path}; it takes GET, HEAD`, undefined, { allow: 'GET, HEAD' })
  if (path === '/metrics') return metricsResponse(request, { registry: deps.metrics.registry, token: deps.config.metrics.token })
  if (path === '/healthz') return Response.json({ status: 'ok' })
  const ready = await readiness(deps.database, deps.lifecycle, deps.ledger.health)
  return Response.json(ready, { status: ready.status === 'ready' ? 200 : 503, headers: { 'cache-control': 'no-store' } })
}

/**
 * The request's path. The admin port serves three fixed paths and needs no host: a request without
 * one (an HTTP/1.0 probe) is served by its path. A Host that makes no URL is refused (400), as on
 * the public port.
 */
function pathOf(request: Request): string {
  const hostless = hostlessPath(request)
  if (hostless !== undefined) return hostless
  checkRequestUrl(request)
  return new URL(request.url).pathname
}
