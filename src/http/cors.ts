import { Elysia } from 'elysia'
import { hostlessPath } from './request-context'

// Browser MCP clients (an agent host in a web page) call /mcp and the OAuth endpoints it
// discovers from another origin, with an Authorization header: the browser asks first (a CORS
// preflight) and shows the answers only when they name its origin. Origins are those
// `mcp.allowed_origins` lists, the configured issuer's, and the gateway's own on loopback;
// no cookie is ever involved, so credentials are never allowed.

/** Loopback names and addresses, as URL.hostname writes them (IPv4 normalized, IPv6 in brackets). */
const LOOPBACK_HOST = /^(localhost|127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\])$/

/** What a browser may send and read on these paths. */
const ALLOW_HEADERS = 'authorization, content-type, accept, mcp-protocol-version, mcp-session-id, last-event-id, x-org-id, x-request-id'
const EXPOSE_HEADERS = 'www-authenticate, mcp-session-id, mcp-protocol-version, x-request-id, retry-after'

/** The browser origins the gateway answers. */
export class BrowserOrigins {
  private readonly allowed: ReadonlySet<string>
  private readonly issuer: string | undefined

  constructor(allowed: readonly string[], issuer: string | undefined) {
    this.allowed = new Set(allowed)
    this.issuer = issuer === undefined ? undefined : new URL(issuer).origin
  }

  /**
   * Whether a page at `origin` may call: an origin in mcp.allowed_origins, the configured
   * issuer's, or the request's own when it is a loopback one (isOwnLoopbackOrigin).
   */
  allows(origin: string, request: Request): boolean {
    return this.allowed.has(origin) || origin === this.issuer || isOwnLoopbackOrigin(origin, request)
  }
}

/**
 * Whether `origin` is the request's own and a loopback one. The request's own origin comes from
 * its Host header, which a DNS-rebinding page chooses (its own name, now pointed at this server),
 * so it proves nothing unless it names this machine's loopback: only the gateway itself serves a
 * page there. /mcp (BrowserOrigins) and the OAuth consent forms (checkCsrf) trust it on this rule.
 */
export function isOwnLoopbackOrigin(origin: string, request: Request): boolean {
  const own = new URL(request.url)
  return origin === own.origin && LOOPBACK_HOST.test(own.hostname)
}

/**
 * CORS for `paths`: an OPTIONS preflight route for each (204 naming the origin when it is
 * allowed, 403 without CORS headers otherwise), and the allowed origin on every answer there.
 */
export function browserAccess(origins: BrowserOrigins, paths: readonly string[]) {
  const served = new Set(paths)
  const app = new Elysia().onRequest(({ request, set }) => {
    const origin = request.headers.get('origin')
    // Only requests from browsers carry Origin: the hot path never parses its URL here. A probe
    // without a Host (request-context.ts) has a relative URL, and a path not served here.
    if (origin === null || request.method === 'OPTIONS' || !served.has(hostlessPath(request) ?? new URL(request.url).pathname) || !origins.allows(origin, request)) return
    set.headers['access-control-allow-origin'] = origin
    set.headers['access-control-expose-headers'] = EXPOSE_HEADERS
    set.headers.vary = 'Origin'
  })
  for (const path of paths) {
    app.options(
      path,
      ({ request }) => {
        const origin = request.headers.get('origin')
        if (origin === null || !origins.allows(origin, request)) return new Response(null, { status: 403, headers: { vary: 'Origin' } })
        return new Response(null, {
          status: 204,
          headers: {
            'access-control-allow-origin': origin,
            'access-control-allow-methods': 'GET, POST',
            'access-control-allow-headers': ALLOW_HEADERS,
            'access-control-max-age': '600',
            vary: 'Origin',
          },
        })
      },
      { detail: { hide: true } },
    )
  }
  return app
}
