import type { OAuthScope } from '../db/schema'
import { OAuthError } from './errors'

/** The MCP endpoint, the protected resource of `mcp:inference` tokens. */
export const MCP_PATH = '/mcp'

/** A `resource` indicator (RFC 8707) that names one of this gateway's two protected resources. */
export interface NamedResource {
  /** Normalized: the origin as the URL parser writes it, plus `/mcp` for the MCP endpoint. */
  url: string
  /** The scope whose tokens that resource accepts (the token prefix follows the scope: src/http/auth.ts). */
  scope: OAuthScope
}

/**
 * The resource a scope's tokens are for, as the protected-resource metadata (RFC 9728) advertises
 * it: the issuer's /mcp for `mcp:inference`, the issuer itself (the API) for `cli:inference`.
 */
export function resourceOf(scope: OAuthScope, issuer: string): string {
  return scope === 'mcp:inference' ? issuer + MCP_PATH : issuer
}

/**
 * Whether two spellings of a `resource` indicator name one resource, as parseResource reads them:
 * the URL parser's origin (host case, default port) and the path without a trailing slash.
 */
export function sameResource(a: string, b: string): boolean {
  if (a === b) return true
  const key = (raw: string) => {
    try {
      const url = new URL(raw)
      return `${url.origin}${url.pathname.replace(/\/$/, '')}${url.search}${url.hash}`
    } catch {
      return undefined
    }
  }
  const first = key(a)
  return first !== undefined && first === key(b)
}

/**
 * The `resource` indicator, when a client sends one, must name this gateway: /mcp or the API
 * root; undefined when absent, else `invalid_target`. Normalized (`/mcp` and `/mcp/` alike, the
 * host as the parser writes it), because the token request's indicator is compared with the
 * authorization request's.
 */
export function parseResource(raw: string | undefined, issuer: string): NamedResource | undefined {
  if (raw === undefined || raw === '') return undefined
  const invalid = new OAuthError('invalid_target', `resource must be ${resourceOf('mcp:inference', issuer)} or ${resourceOf('cli:inference', issuer)}`)
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw invalid
  }
  if (url.origin !== new URL(issuer).origin || url.hash !== '') throw invalid
  if (url.pathname === '/') return { url: url.origin, scope: 'cli:inference' }
  if (url.pathname === MCP_PATH || url.pathname === `${MCP_PATH}/`) return { url: url.origin + MCP_PATH, scope: 'mcp:inference' }
  throw invalid
}

/**
 * RFC 8707 §2: a token is issued only for a resource that will accept it. Where a token works
 * follows its scope (svc_mcp_ on /mcp, svc_cli_ on the API), so a resource other than the
 * scope's would get the client a token its resource refuses, usable elsewhere: `invalid_target`.
 */
export function checkAudience(resource: NamedResource | undefined, scope: OAuthScope): void {
  if (resource === undefined || resource.scope === scope) return
  const origin = new URL(resource.url).origin
  throw new OAuthError('invalid_target', `resource ${resource.url} accepts ${resource.scope} tokens, not ${scope}: ask for scope ${resource.scope} there, or for resource ${resourceOf(scope, origin)}`)
}
