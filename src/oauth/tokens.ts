import { and, eq, isNull } from 'drizzle-orm'
import type { OAuthConfig } from '../config/config'
import type { Db } from '../db/client'
import { memberships, oauthGrants, oauthTokens, type OAuthScope } from '../db/schema'
import type { Principal, VerifyResult } from '../keys/principal'
import { VerifyCache } from '../keys/verify-cache'
import type { Clock } from '../lib/clock'
import { newId } from '../lib/ids'
import { OAuthError } from './errors'
import { hashOf, isWellFormedToken, PREFIX, randomSecret } from './secrets'

/** What a grant is issued for: one client, user, org and scope. */
export interface GrantInput {
  clientId: string
  userId: string
  orgId: string
  scope: OAuthScope
  resource: string | null
}

/** The token response of RFC 6749 §5.1. */
export interface TokenSet {
  access_token: string
  token_type: 'Bearer'
  expires_in: number
  refresh_token: string
  scope: OAuthScope
}

/**
 * OAuth grants and their tokens: issue, verify (for the auth step), rotate refresh tokens with
 * reuse detection, revoke. Verification is cached like API keys (same TTL); revocations in this
 * process evict at once.
 */
export class TokenService {
  private readonly cache: VerifyCache

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly config: OAuthConfig,
    cache: { ttlMs: number; maxEntries: number },
  ) {
    this.cache = new VerifyCache(cache.ttlMs, cache.maxEntries)
  }

  /** A new grant with its first access and refresh tokens. */
  async issue(input: GrantInput): Promise<{ grantId: string; tokens: TokenSet }> {
    const grantId = newId()
    const now = this.clock.now()
    await this.db.insert(oauthGrants).values({ id: grantId, ...input, createdAtMs: now })
    return { grantId, tokens: await this.mint(grantId, input.scope, now) }
  }

  /**
   * Refresh-token rotation (OAuth 2.1 §4.3.1): the presented token is spent and a new pair is
   * issued. A refresh token presented a second time means it leaked (or a client raced itself):
   * the whole grant is revoked, so the thief's tokens die with the victim's.
   */
  async refresh(refreshToken: string, clientId: string, scope: OAuthScope | undefined): Promise<TokenSet> {
    const now = this.clock.now()
    const row = await this.lookup(refreshToken, 'refresh')
    if (!row || row.grant.revokedAtMs !== null) throw new OAuthError('invalid_grant', 'the refresh token is invalid or revoked')
    if (row.grant.clientId !== clientId) throw new OAuthError('invalid_grant', 'the refresh token was issued to another client')
    if (row.token.usedAtMs !== null) {
      await this.revokeGrant(row.grant.id)
      throw new OAuthError('invalid_grant', 'the refresh token was already used; every token of this authorization is now revoked')
    }
    if (row.token.expiresAtMs <= now) throw new OAuthError('invalid_grant', 'the refresh token has expired; sign in again')
    if (scope !== undefined && scope !== row.grant.scope) throw new OAuthError('invalid_scope', `this authorization is for ${row.grant.scope} only`)
    // Spend it with a guarded update, so two concurrent refreshes cannot both win.
    const spent = await this.db
      .update(oauthTokens)
      .set({ usedAtMs: now })
      .where(and(eq(oauthTokens.hash, hashOf(refreshToken)), isNull(oauthTokens.usedAtMs)))
    if (spent.rowsAffected !== 1) {
      await this.revokeGrant(row.grant.id)
      throw new OAuthError('invalid_grant', 'the refresh token was already used; every token of this authorization is now revoked')
    }
    return this.mint(row.grant.id, row.grant.scope, now)
  }

  /**
   * RFC 7009: revokes the grant a token belongs to (access or refresh: revoking either ends the
   * authorization). Unknown tokens are not an error. False when the token belongs to another client.
   */
  async revoke(token: string, clientId: string | undefined): Promise<boolean> {
    const row = (await this.lookup(token, 'refresh')) ?? (await this.lookup(token, 'access'))
    if (!row) return true
    if (clientId !== undefined && row.grant.clientId !== clientId) return false
    await this.revokeGrant(row.grant.id)
    return true
  }

  async revokeGrant(grantId: string): Promise<void> {
    await this.db.update(oauthGrants).set({ revokedAtMs: this.clock.now() }).where(and(eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAtMs)))
    this.cache.evictKey(grantId)
  }

  /**
   * An access token → principal (the auth step). `fresh` skips the cache (admin routes read the
   * user's current role). The user must still be a member of the organization.
   */
  async verify(token: string, fresh = false): Promise<VerifyResult> {
    if (!isWellFormedToken(token)) return { ok: false, reason: 'unknown' }
    const now = this.clock.now()
    return this.cache.resolve(hashOf(token), now, fresh, () => this.load(token, now))
  }

  /** Drops cached results of a user's tokens (role change). */
  evictUser(userId: string): void {
    this.cache.evictUser(userId)
  }

  private async load(token: string, now: number): Promise<VerifyResult> {
    const rows = await this.db
      .select({ token: oauthTokens, grant: oauthGrants, role: memberships.role })
      .from(oauthTokens)
      .innerJoin(oauthGrants, eq(oauthGrants.id, oauthTokens.grantId))
      .leftJoin(memberships, and(eq(memberships.orgId, oauthGrants.orgId), eq(memberships.userId, oauthGrants.userId)))
      .where(and(eq(oauthTokens.hash, hashOf(token)), eq(oauthTokens.kind, 'access')))
      .limit(1)
    const row = rows[0]
    // The prefix must match the scope it was issued for: a token cannot be re-labelled.
    if (!row || !token.startsWith(PREFIX[row.grant.scope])) return { ok: false, reason: 'unknown' }
    if (row.grant.revokedAtMs !== null) return { ok: false, reason: 'revoked' }
    if (row.token.expiresAtMs <= now) return { ok: false, reason: 'expired' }
    // A user removed from the organization loses every token at once.
    if (row.role === null) return { ok: false, reason: 'revoked' }
    const principal: Principal = {
      kind: 'oauth',
      keyId: row.grant.id,
      orgId: row.grant.orgId,
      userId: row.grant.userId,
      // A CLI token carries admin authority while its user is an owner or admin (spec §5).
      keyAdmin: row.grant.scope === 'cli:inference',
      role: row.role,
      expiresAtMs: row.token.expiresAtMs,
      spendCap: null,
      scope: row.grant.scope,
    }
    return { ok: true, principal }
  }

  private async lookup(token: string, kind: 'access' | 'refresh') {
    if (!isWellFormedToken(token)) return undefined
    const rows = await this.db
      .select({ token: oauthTokens, grant: oauthGrants })
      .from(oauthTokens)
      .innerJoin(oauthGrants, eq(oauthGrants.id, oauthTokens.grantId))
      .where(and(eq(oauthTokens.hash, hashOf(token)), eq(oauthTokens.kind, kind)))
      .limit(1)
    return rows[0]
  }

  private async mint(grantId: string, scope: OAuthScope, now: number): Promise<TokenSet> {
    const access = randomSecret(PREFIX[scope])
    const refresh = randomSecret(PREFIX[scope])
    await this.db.insert(oauthTokens).values([
      { hash: hashOf(access), grantId, kind: 'access', createdAtMs: now, expiresAtMs: now + this.config.accessTokenTtlMs },
      { hash: hashOf(refresh), grantId, kind: 'refresh', createdAtMs: now, expiresAtMs: now + this.config.refreshTokenTtlMs },
    ])
    return { access_token: access, token_type: 'Bearer', expires_in: Math.floor(this.config.accessTokenTtlMs / 1000), refresh_token: refresh, scope }
  }
}
