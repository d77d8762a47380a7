import { and, eq, gt, isNull, lt, or, sql } from 'drizzle-orm'
import type { OAuthConfig } from '../config/config'
import type { Db } from '../db/client'
import { apiKeys, memberships, oauthGrants, oauthTokens, type KeyStatus, type OAuthScope } from '../db/schema'
import { spendCapOf, type Principal, type VerifyResult } from '../keys/principal'
import { effectiveStatus } from '../keys/service'
import { VerifyCache } from '../keys/verify-cache'
import type { Clock } from '../lib/clock'
import { newId } from '../lib/ids'
import { OAuthError } from './errors'
import { checkAudience, type NamedResource } from './resource'
import { hashOf, isWellFormedToken, PREFIX, randomSecret } from './secrets'

/** What a grant is issued for: one client, user, org and scope, signed in with one API key. */
export interface GrantInput {
  clientId: string
  userId: string
  orgId: string
  scope: OAuthScope
  resource: string | null
  /** The key the person signed in with (a key of userId in orgId): it bounds every token of the grant. */
  keyId: string
}

/**
 * How long after its rotation a spent refresh token may still be exchanged by its client, and how
 * many exchanges it may have in all (the rotation included). Clients do present one twice without
 * any theft: the MCP SDK refreshes once per request that got 401, so a host's parallel calls after
 * the access token expired all send the same refresh token at once; and a client retries a
 * refresh whose answer was lost. Revoking the grant then would sign the person out. Each such
 * exchange issues a new pair and leaves the others valid (RFC 9700 §4.14.2 allows this leeway;
 * Okta and Auth0 call it a grace period or reuse interval). Later, or beyond the count, a spent
 * token is taken as stolen and the grant is revoked.
 */
export const REUSE_WINDOW_MS = 30_000
export const MAX_EXCHANGES = 5

/** The token response of RFC 6749 §5.1. */
export interface TokenSet {
  access_token: string
  token_type: 'Bearer'
  expires_in: number
  refresh_token: string
  scope: OAuthScope
}

/** What a token needs of the grant's key: everything that bounds what the key may do. */
const KEY_BOUNDS = {
  id: apiKeys.id,
  orgId: apiKeys.orgId,
  userId: apiKeys.userId,
  admin: apiKeys.admin,
  status: apiKeys.status,
  expiresAtMs: apiKeys.expiresAtMs,
  spendCapPeriod: apiKeys.spendCapPeriod,
  spendCapNanos: apiKeys.spendCapNanos,
}

/**
 * The grant key's status now: `active`, `expired` (by time or an exhausted overall cap) or
 * `revoked`. A grant without a key (issued before migration 0006) reads as revoked.
 */
function keyStatusOf(key: { status: KeyStatus; expiresAtMs: number | null } | null, now: number): KeyStatus {
  return key === null ? 'revoked' : effectiveStatus(key.status, key.expiresAtMs, now)
}

/**
 * OAuth grants and their tokens: issue, verify (for the auth step), rotate refresh tokens with
 * reuse detection, revoke. A token obtained by presenting an API key can never do more than that
 * key (spec §2.1, §5): its principal is the key's (id, admin flag, spend cap, expiry), and it
 * stops working when the key is revoked or expires. Verification is cached like API keys (same
 * TTL); revocations in this process (of the grant or of its key) evict at once.
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
    const now = this.clock.now()
    const rows = await this.db.select(KEY_BOUNDS).from(apiKeys).where(eq(apiKeys.id, input.keyId)).limit(1)
    const key = rows[0] ?? null
    // The consent page signed the person in with this very key; a mismatch is a caller's bug, and
    // would lend one person's key (cap, admin flag) to another's tokens.
    if (key !== null && (key.orgId !== input.orgId || key.userId !== input.userId)) throw new Error('the sign-in key belongs to another user or organization')
    // A key revoked or expired since the sign-in (a device may poll for minutes) issues nothing.
    const status = keyStatusOf(key, now)
    if (status !== 'active') throw new OAuthError('invalid_grant', `the API key used to sign in is ${status}; sign in again`)
    const grantId = newId()
    await this.db.insert(oauthGrants).values({ id: grantId, ...input, createdAtMs: now })
    return { grantId, tokens: await this.mint(grantId, input.scope, now, key!.expiresAtMs) }
  }

  /**
   * Refresh-token rotation (OAuth 2.1 §4.3.1): the presented token is spent and a new pair is
   * issued. A spent refresh token presented again means it leaked: the whole grant is revoked, so
   * the thief's tokens die with the victim's. Except within REUSE_WINDOW_MS of its rotation, up to
   * MAX_EXCHANGES in all: a client racing itself (or retrying) gets another pair.
   */
  async refresh(refreshToken: string, clientId: string, scope: OAuthScope | undefined, resource: NamedResource | undefined): Promise<TokenSet> {
    const now = this.clock.now()
    const row = await this.lookup(refreshToken, 'refresh')
    if (!row || row.grant.revokedAtMs !== null) throw new OAuthError('invalid_grant', 'the refresh token is invalid or revoked')
    if (row.grant.clientId !== clientId) throw new OAuthError('invalid_grant', 'the refresh token was issued to another client')
    // The guarded update's rule (below), checked first: a reuse revokes whatever else is wrong.
    const { usedAtMs, exchanges } = row.token
    if (usedAtMs !== null && (now - usedAtMs >= REUSE_WINDOW_MS || exchanges >= MAX_EXCHANGES)) await this.refuseReuse(row.grant.id)
    if (row.token.expiresAtMs <= now) throw new OAuthError('invalid_grant', 'the refresh token has expired; sign in again')
    // The tokens live no longer than the key signed in with (revoked, expired, or none: pre-0006).
    const keyStatus = keyStatusOf(row.key, now)
    if (keyStatus !== 'active') throw new OAuthError('invalid_grant', `the API key this authorization was signed in with is ${keyStatus}; sign in again`)
    if (scope !== undefined && scope !== row.grant.scope) throw new OAuthError('invalid_scope', `this authorization is for ${row.grant.scope} only`)
    checkAudience(resource, row.grant.scope)
    // Spend it (or count one more exchange in the window) with a guarded update, so concurrent
    // refreshes cannot exchange it more than MAX_EXCHANGES times; the window runs from the first.
    const spent = await this.db
      .update(oauthTokens)
      .set({ usedAtMs: sql`coalesce(${oauthTokens.usedAtMs}, ${now})`, exchanges: sql`${oauthTokens.exchanges} + 1` })
      .where(
        and(
          eq(oauthTokens.hash, hashOf(refreshToken)),
          or(isNull(oauthTokens.usedAtMs), and(gt(oauthTokens.usedAtMs, now - REUSE_WINDOW_MS), lt(oauthTokens.exchanges, MAX_EXCHANGES))),
        ),
      )
    if (spent.rowsAffected !== 1) await this.refuseReuse(row.grant.id)
    return this.mint(row.grant.id, row.grant.scope, now, row.key!.expiresAtMs)
  }

  /**
   * RFC 7009: revokes the grant a token belongs to (access or refresh: revoking either ends the
   * authorization). Unknown tokens are not an error. False when the token belongs to another client.
   */
  async revoke(token: string, clientId: string): Promise<boolean> {
    const row = (await this.lookup(token, 'refresh')) ?? (await this.lookup(token, 'access'))
    if (!row) return true
    if (row.grant.clientId !== clientId) return false
    await this.revokeGrant(row.grant.id)
    return true
  }

  async revokeGrant(grantId: string): Promise<void> {
    await this.db.update(oauthGrants).set({ revokedAtMs: this.clock.now() }).where(and(eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAtMs)))
    this.cache.evictWhere(result => result.ok && result.principal.grantId === grantId)
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

  /** Drops cached results of the tokens signed in with an API key (the key revoked or expired). */
  evictKey(keyId: string): void {
    this.cache.evictKey(keyId)
  }

  private async load(token: string, now: number): Promise<VerifyResult> {
    const rows = await this.db
      .select({ token: oauthTokens, grant: oauthGrants, key: KEY_BOUNDS, role: memberships.role })
      .from(oauthTokens)
      .innerJoin(oauthGrants, eq(oauthGrants.id, oauthTokens.grantId))
      .leftJoin(apiKeys, eq(apiKeys.id, oauthGrants.keyId))
      .leftJoin(memberships, and(eq(memberships.orgId, oauthGrants.orgId), eq(memberships.userId, oauthGrants.userId)))
      .where(and(eq(oauthTokens.hash, hashOf(token)), eq(oauthTokens.kind, 'access')))
      .limit(1)
    const row = rows[0]
    // The prefix must match the scope it was issued for: a token cannot be re-labelled.
    if (!row || !token.startsWith(PREFIX[row.grant.scope])) return { ok: false, reason: 'unknown' }
    if (row.grant.revokedAtMs !== null) return { ok: false, reason: 'revoked' }
    if (row.token.expiresAtMs <= now) return { ok: false, reason: 'expired' }
    // A grant from before migration 0006 names no key, so nothing could bound it: sign in again.
    const key = row.key
    if (key === null) return { ok: false, reason: 'revoked' }
    // The token fails as its key would: revoked, or expired (by time or an exhausted overall cap).
    const keyStatus = effectiveStatus(key.status, key.expiresAtMs, now)
    if (keyStatus !== 'active') return { ok: false, reason: keyStatus }
    // A user removed from the organization loses every token at once.
    if (row.role === null) return { ok: false, reason: 'revoked' }
    const principal: Principal = {
      kind: 'oauth',
      // The key's own id: its spend-cap lease, rate-limit buckets and ledger entries are shared
      // with the key, so a token cannot widen any of them.
      keyId: key.id,
      grantId: row.grant.id,
      orgId: row.grant.orgId,
      userId: row.grant.userId,
      // Admin authority as for the key itself: its admin flag, plus the user's current owner or
      // admin role (spec §5), which hasAdminAuthority checks.
      keyAdmin: key.admin,
      role: row.role,
      // Whichever ends first: the access token or the key.
      expiresAtMs: key.expiresAtMs === null ? row.token.expiresAtMs : Math.min(row.token.expiresAtMs, key.expiresAtMs),
      spendCap: spendCapOf(key.spendCapPeriod, key.spendCapNanos),
      scope: row.grant.scope,
    }
    return { ok: true, principal }
  }

  /** A spent refresh token presented too late or too often: taken as stolen, its grant revoked. */
  private async refuseReuse(grantId: string): Promise<never> {
    await this.revokeGrant(grantId)
    throw new OAuthError('invalid_grant', 'the refresh token was already used; every token of this authorization is now revoked')
  }

  private async lookup(token: string, kind: 'access' | 'refresh') {
    if (!isWellFormedToken(token)) return undefined
    const rows = await this.db
      .select({ token: oauthTokens, grant: oauthGrants, key: KEY_BOUNDS })
      .from(oauthTokens)
      .innerJoin(oauthGrants, eq(oauthGrants.id, oauthTokens.grantId))
      .leftJoin(apiKeys, eq(apiKeys.id, oauthGrants.keyId))
      .where(and(eq(oauthTokens.hash, hashOf(token)), eq(oauthTokens.kind, kind)))
      .limit(1)
    return rows[0]
  }

  /**
   * A new access and refresh token pair. The access token lives no longer than the key it is
   * bounded by, and `expires_in` says so (RFC 6749 §5.1: the token's lifetime): a client that
   * schedules its refresh from it would otherwise keep a dead token for up to the full TTL.
   */
  private async mint(grantId: string, scope: OAuthScope, now: number, keyExpiresAtMs: number | null): Promise<TokenSet> {
    const access = randomSecret(PREFIX[scope])
    const refresh = randomSecret(PREFIX[scope])
    const ttlEnd = now + this.config.accessTokenTtlMs
    const accessExpiresAtMs = keyExpiresAtMs === null ? ttlEnd : Math.min(ttlEnd, keyExpiresAtMs)
    await this.db.insert(oauthTokens).values([
      { hash: hashOf(access), grantId, kind: 'access', createdAtMs: now, expiresAtMs: accessExpiresAtMs },
      { hash: hashOf(refresh), grantId, kind: 'refresh', createdAtMs: now, expiresAtMs: now + this.config.refreshTokenTtlMs },
    ])
    return { access_token: access, token_type: 'Bearer', expires_in: Math.floor((accessExpiresAtMs - now) / 1000), refresh_token: refresh, scope }
  }
}
