import type { OAuthConfig } from '../config/config'
import { and, eq, lt, notExists } from 'drizzle-orm'
import type { Db } from '../db/client'
import { oauthCodes, oauthDeviceCodes, oauthGrants, oauthTokens, type OAuthScope } from '../db/schema'
import type { KeyService } from '../keys/service'
import type { Clock } from '../lib/clock'
import { RateLimiter } from '../limits/limiter'
import { ClientService, DEVICE_GRANT } from './clients'
import { CodeService } from './codes'
import { DeviceService } from './device'
import { OAuthError } from './errors'
import { MCP_PATH, resourceOf } from './resource'
import { SCOPES } from './secrets'
import { TokenService } from './tokens'

/** Paths of the authorization server (relative to the issuer). */
export const OAUTH_PATHS = {
  authorize: '/oauth/authorize',
  token: '/oauth/token',
  register: '/oauth/register',
  revoke: '/oauth/revoke',
  deviceAuthorization: '/oauth/device_authorization',
  device: '/oauth/device',
} as const

/** The discovery documents (RFC 8414, RFC 9728), with the path forms MCP clients ask for. */
export const WELL_KNOWN_PATHS = {
  authorizationServer: '/.well-known/oauth-authorization-server',
  authorizationServerMcp: '/.well-known/oauth-authorization-server/mcp',
  protectedResource: '/.well-known/oauth-protected-resource',
  protectedResourceMcp: '/.well-known/oauth-protected-resource/mcp',
} as const

/**
 * Unauthenticated endpoints that write rows (registration, device authorization): per client
 * address, a burst of 30 then one every 10 seconds, so nobody can fill the database anonymously.
 * Each endpoint has its own bucket: a registration flood must not lock everyone behind the same
 * address out of `svc login`.
 */
const ANONYMOUS_WRITES = { burst: 30, perSecond: 0.1 }

/** The unauthenticated endpoints that write rows, each throttled in its own bucket. */
export type AnonymousWrite = 'register' | 'device_authorization'

/**
 * The throttle key of a peer address: an IPv6 address by its /64 (one host usually holds a whole
 * /64, so keying by the full address would give it 2^64 buckets); IPv4, IPv4-mapped IPv6 and
 * anything unparsable as written.
 */
export function throttleKeyOf(address: string): string {
  const bare = address.replace(/%.*$/, '').toLowerCase()
  if (!bare.includes(':') || bare.includes('.')) return bare
  const halves = bare.split('::')
  if (halves.length > 2) return bare
  const [headGroups, tailGroups] = halves.map(half => (half === '' ? [] : half.split(':'))) as [string[], string[] | undefined]
  const missing = 8 - headGroups.length - (tailGroups?.length ?? 0)
  if (tailGroups !== undefined && missing < 1) return bare
  const groups = tailGroups === undefined ? headGroups : [...headGroups, ...Array<string>(missing).fill('0'), ...tailGroups]
  if (groups.length !== 8 || groups.some(group => !/^[0-9a-f]{1,4}$/.test(group))) return bare
  return `${groups.slice(0, 4).map(group => Number.parseInt(group, 16).toString(16)).join(':')}::/64`
}

/** Spent codes are kept a day past expiry, so a late replay still revokes what they issued. */
const KEEP_EXPIRED_MS = 86_400_000

/** The OAuth 2.1 authorization server: its services and its discovery documents. */
export class OAuthServer {
  readonly clients: ClientService
  readonly tokens: TokenService
  readonly codes: CodeService
  readonly device: DeviceService
  private readonly limiter: RateLimiter

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    readonly config: OAuthConfig,
    /** Sign-in on the consent pages: the person proves who they are with one of their API keys. */
    readonly keys: KeyService,
    cache: { ttlMs: number; maxEntries: number },
  ) {
    this.clients = new ClientService(db, clock)
    this.tokens = new TokenService(db, clock, config, cache)
    this.codes = new CodeService(db, clock, this.tokens, config.codeTtlMs)
    this.device = new DeviceService(db, clock, this.tokens, config)
    this.limiter = new RateLimiter(clock, 10_000)
  }

  /**
   * Deletes what can no longer be used: codes and device codes a day past expiry, expired
   * tokens (a spent refresh token stays until it expires, for reuse detection), and grants left
   * without tokens. Run at boot and hourly by `svc serve`. Returns the rows deleted.
   */
  async purgeExpired(): Promise<number> {
    const now = this.clock.now()
    const results = await this.db.batch([
      this.db.delete(oauthCodes).where(lt(oauthCodes.expiresAtMs, now - KEEP_EXPIRED_MS)),
      this.db.delete(oauthDeviceCodes).where(lt(oauthDeviceCodes.expiresAtMs, now - KEEP_EXPIRED_MS)),
      this.db.delete(oauthTokens).where(lt(oauthTokens.expiresAtMs, now)),
      this.db.delete(oauthGrants).where(
        and(
          // Not one being issued right now (its tokens are inserted just after it).
          lt(oauthGrants.createdAtMs, now - 60_000),
          notExists(this.db.select({ hash: oauthTokens.hash }).from(oauthTokens).where(eq(oauthTokens.grantId, oauthGrants.id))),
          notExists(this.db.select({ hash: oauthCodes.hash }).from(oauthCodes).where(eq(oauthCodes.grantId, oauthGrants.id))),
        ),
      ),
    ])
    return results.reduce((sum, result) => sum + result.rowsAffected, 0)
  }

  /** Throttles anonymous writes of one kind by client address (429 with Retry-After in the OAuth error shape). */
  throttle(kind: AnonymousWrite, address: string): void {
    const decision = this.limiter.take(`oauth:${kind}:${throttleKeyOf(address)}`, ANONYMOUS_WRITES)
    if (!decision.allowed) {
      throw new OAuthError('invalid_request', `too many requests from this address; retry in ${Math.ceil(decision.retryAfterMs / 1000)} s`, 429, { 'retry-after': String(Math.max(1, Math.ceil(decision.retryAfterMs / 1000))) })
    }
  }

  /** The configured issuer, else the origin this request arrived at (a self-hosted default; set `oauth.issuer` behind a proxy). */
  issuerOf(request: Request): string {
    return this.config.issuer ?? new URL(request.url).origin
  }

  /** RFC 8414 authorization-server metadata. */
  authorizationServerMetadata(issuer: string): Record<string, unknown> {
    return {
      issuer,
      authorization_endpoint: issuer + OAUTH_PATHS.authorize,
      token_endpoint: issuer + OAUTH_PATHS.token,
      registration_endpoint: issuer + OAUTH_PATHS.register,
      revocation_endpoint: issuer + OAUTH_PATHS.revoke,
      device_authorization_endpoint: issuer + OAUTH_PATHS.deviceAuthorization,
      scopes_supported: [...SCOPES],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token', DEVICE_GRANT],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      code_challenge_methods_supported: ['S256'],
      authorization_response_iss_parameter_supported: true,
      service_documentation: `${issuer}/docs`,
    }
  }

  /** RFC 9728 protected-resource metadata: /mcp (mcp:inference) or the API itself (cli:inference). */
  protectedResourceMetadata(issuer: string, resource: 'mcp' | 'api'): Record<string, unknown> {
    const scope: OAuthScope = resource === 'mcp' ? 'mcp:inference' : 'cli:inference'
    return {
      resource: resourceOf(scope, issuer),
      authorization_servers: [issuer],
      scopes_supported: [scope],
      bearer_methods_supported: ['header'],
      resource_name: resource === 'mcp' ? 'svc-gateway MCP server' : 'svc-gateway API',
      resource_documentation: `${issuer}/docs`,
    }
  }

  /** The WWW-Authenticate challenge of /mcp (RFC 9728 §5.1), which starts an MCP client's OAuth flow. */
  mcpChallenge(request: Request, error?: string): string {
    const issuer = this.issuerOf(request)
    const parts = [`resource_metadata="${issuer}/.well-known/oauth-protected-resource${MCP_PATH}"`, 'scope="mcp:inference"']
    if (error) parts.push(`error="${error}"`)
    return `Bearer ${parts.join(', ')}`
  }
}
