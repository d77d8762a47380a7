import { and, eq, isNull } from 'drizzle-orm'
import type { Db } from '../db/client'
import { oauthCodes, type OAuthScope } from '../db/schema'
import type { Clock } from '../lib/clock'
import { OAuthError } from './errors'
import { checkAudience, type NamedResource } from './resource'
import { hashOf, randomSecret, s256, safeEqual } from './secrets'
import type { GrantInput, TokenService, TokenSet } from './tokens'

const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/

/** An approved authorization request, as the consent page hands it over. */
export interface ApprovedRequest {
  clientId: string
  userId: string
  orgId: string
  redirectUri: string
  codeChallenge: string
  scope: OAuthScope
  resource: string | null
  /** The API key the person signed in with (its id): handed on to the grant, which it bounds. */
  keyId: string
}

/** PKCE (S256 only) code challenges are 43 base64url characters (RFC 7636 §4.2). */
export function isValidChallenge(challenge: string | undefined): boolean {
  return challenge !== undefined && CHALLENGE.test(challenge)
}

/**
 * Authorization codes (OAuth 2.1 §4.1): single use, short-lived, bound to the client, the
 * redirect URI and the PKCE challenge. A code presented twice revokes what the first exchange
 * issued (§4.1.3: the code may have been stolen).
 */
export class CodeService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly tokens: TokenService,
    private readonly ttlMs: number,
  ) {}

  async create(request: ApprovedRequest): Promise<string> {
    const code = randomSecret()
    await this.db.insert(oauthCodes).values({ hash: hashOf(code), ...request, expiresAtMs: this.clock.now() + this.ttlMs })
    return code
  }

  async exchange(input: { code: string; clientId: string; redirectUri: string | undefined; verifier: string | undefined; resource: NamedResource | undefined }): Promise<TokenSet> {
    const rows = await this.db.select().from(oauthCodes).where(eq(oauthCodes.hash, hashOf(input.code))).limit(1)
    const row = rows[0]
    if (!row) throw new OAuthError('invalid_grant', 'the authorization code is invalid')
    if (row.usedAtMs !== null) {
      if (row.grantId) await this.tokens.revokeGrant(row.grantId)
      throw new OAuthError('invalid_grant', 'the authorization code was already used; the tokens it issued are revoked')
    }
    const now = this.clock.now()
    if (row.expiresAtMs <= now) throw new OAuthError('invalid_grant', 'the authorization code has expired')
    if (row.clientId !== input.clientId) throw new OAuthError('invalid_grant', 'the authorization code was issued to another client')
    // Required here, as the authorization request always has one (RFC 6749 §4.1.3): missing is a malformed request, not a wrong grant.
    if (input.redirectUri === undefined) throw new OAuthError('invalid_request', 'redirect_uri is required: the one of the authorization request')
    if (input.redirectUri !== row.redirectUri) throw new OAuthError('invalid_grant', 'redirect_uri does not match the one of the authorization request')
    if (input.verifier === undefined || !VERIFIER.test(input.verifier)) {
      throw new OAuthError('invalid_request', 'code_verifier is required: 43 to 128 characters of [A-Za-z0-9._~-]')
    }
    if (!safeEqual(s256(input.verifier), row.codeChallenge)) throw new OAuthError('invalid_grant', 'code_verifier does not match the code challenge')
    if (input.resource !== undefined && row.resource !== null && input.resource.url !== row.resource) {
      throw new OAuthError('invalid_target', 'resource does not match the one of the authorization request')
    }
    // An authorization request without a resource: the token request's must still fit the scope.
    checkAudience(input.resource, row.scope)
    // Spend the code first (guarded), so two concurrent exchanges cannot both get tokens.
    const spent = await this.db.update(oauthCodes).set({ usedAtMs: now }).where(and(eq(oauthCodes.hash, row.hash), isNull(oauthCodes.usedAtMs)))
    if (spent.rowsAffected !== 1) throw new OAuthError('invalid_grant', 'the authorization code was already used')
    // A code from before key-bound sign-in (migration 0006) names no key: it cannot bound tokens.
    if (row.keyId === null) throw new OAuthError('invalid_grant', 'the authorization code names no API key; sign in again')
    const grant: GrantInput = { clientId: row.clientId, userId: row.userId, orgId: row.orgId, scope: row.scope, resource: row.resource, keyId: row.keyId }
    const { grantId, tokens } = await this.tokens.issue(grant)
    await this.db.update(oauthCodes).set({ grantId }).where(eq(oauthCodes.hash, row.hash))
    return tokens
  }
}
