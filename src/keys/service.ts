import { and, desc, eq, ne } from 'drizzle-orm'
import type { Db } from '../db/client'
import { apiKeys, memberships, type KeyStatus, type SpendCapPeriod } from '../db/schema'
import { ApiError } from '../http/errors'
import type { Clock } from '../lib/clock'
import { newId } from '../lib/ids'
import type { Logger } from '../observability/logger'
import { spendCapOf, type Principal, type VerifyResult } from './principal'
import { generateKeySecret, hashSecret } from './token'
import { VerifyCache } from './verify-cache'
import type { LedgerWriter } from '../billing/ledger-writer'

/** A key as listings show it. Never carries the secret or its hash. */
export interface KeyRecord {
  id: string
  orgId: string
  userId: string
  name: string
  admin: boolean
  status: KeyStatus
  createdAtMs: number
  expiresAtMs: number | null
  lastUsedAtMs: number | null
  revokedAtMs: number | null
  spendCapPeriod: SpendCapPeriod | null
  spendCapNanos: bigint | null
}

export interface CreateKeyInput {
  orgId: string
  userId: string
  name: string
  admin: boolean
  expiresAtMs: number | null
  spendCap: { period: SpendCapPeriod; nanos: bigint } | null
  /** Default: now. */
  createdAtMs?: number
}

/** Verifies OAuth access tokens (src/oauth/tokens.ts). */
export interface TokenVerifier {
  verify(token: string, fresh: boolean): Promise<VerifyResult>
  /** Drops cached results of the tokens signed in with a key (the key revoked or expired). */
  evictKey(keyId: string): void
}

// last_used_at is advisory: written at most once a minute per key so that using a key
// never costs a database write per request. It goes through the process's one writer, into its
// next batch: that writer waits for another process's write lock between event-loop turns, where
// the drizzle client's busy timeout waits on the loop (a key's first use froze every route for as
// long as another process held the lock, up to 5 s).
const LAST_USED_RESOLUTION_MS = 60_000
const LAST_USED_SQL = 'UPDATE api_keys SET last_used_at_ms = ? WHERE id = ?'

/** Create, list, revoke and verify organization API keys. */
export class KeyService {
  private readonly cache: VerifyCache
  private readonly lastUsedWritten = new Map<string, number>()
  private pendingWrites: Promise<unknown> = Promise.resolve()
  private tokenVerifier: TokenVerifier | undefined

  constructor(
    private readonly db: Db,
    private readonly writer: LedgerWriter,
    private readonly clock: Clock,
    private readonly logger: Logger,
    cache: { ttlMs: number; maxEntries: number },
  ) {
    this.cache = new VerifyCache(cache.ttlMs, cache.maxEntries)
  }

  /** Creates a key for a member of the organization; the secret is returned here, once. */
  async create(input: CreateKeyInput): Promise<{ key: KeyRecord; secret: string }> {
    const role = await this.db
      .select({ role: memberships.role })
      .from(memberships)
      .where(and(eq(memberships.orgId, input.orgId), eq(memberships.userId, input.userId)))
      .limit(1)
    if (role.length === 0) throw new ApiError('invalid_request', 'the user is not a member of this organization', 'user')
    const secret = generateKeySecret()
    const key: KeyRecord = {
      id: newId(),
      orgId: input.orgId,
      userId: input.userId,
      name: input.name,
      admin: input.admin,
      status: 'active',
      createdAtMs: input.createdAtMs ?? this.clock.now(),
      expiresAtMs: input.expiresAtMs,
      lastUsedAtMs: null,
      revokedAtMs: null,
      spendCapPeriod: input.spendCap?.period ?? null,
      spendCapNanos: input.spendCap?.nanos ?? null,
    }
    await this.db.insert(apiKeys).values({ ...key, secretHash: hashSecret(secret) })
    return { key, secret }
  }

  /** Every key of the organization, newest first, with time-based expiry applied. */
  async list(orgId: string): Promise<KeyRecord[]> {
    const rows = await this.db.select().from(apiKeys).where(eq(apiKeys.orgId, orgId)).orderBy(desc(apiKeys.createdAtMs), desc(apiKeys.id))
    const now = this.clock.now()
    return rows.map(({ secretHash: _hash, ...row }) => ({ ...row, status: effectiveStatus(row.status, row.expiresAtMs, now) }))
  }

  /** The organization owning a key id (operator commands), or undefined. */
  async orgOf(keyId: string): Promise<string | undefined> {
    const rows = await this.db.select({ orgId: apiKeys.orgId }).from(apiKeys).where(eq(apiKeys.id, keyId)).limit(1)
    return rows[0]?.orgId
  }

  /**
   * Revokes a key of `orgId`. False when it is missing, already revoked, or another
   * organization's (the caller cannot tell which). Takes effect in this process at once.
   */
  async revoke(orgId: string, keyId: string): Promise<boolean> {
    const result = await this.db
      .update(apiKeys)
      .set({ status: 'revoked', revokedAtMs: this.clock.now() })
      .where(and(eq(apiKeys.id, keyId), eq(apiKeys.orgId, orgId), ne(apiKeys.status, 'revoked')))
    this.evictKey(keyId)
    return result.rowsAffected === 1
  }

  /**
   * Resolves a secret to its principal. `fresh` skips the cache (admin routes always read the
   * key row and the user's current role); otherwise a cached result up to the TTL old is used.
   */
  async verify(secret: string, fresh = false): Promise<VerifyResult> {
    const hash = hashSecret(secret)
    const now = this.clock.now()
    const resolved = this.cache.resolve(hash, now, fresh, () => this.load(hash, now))
    // A cache hit is a plain value: no await (and no microtask) on the hot path.
    const result = resolved instanceof Promise ? await resolved : resolved
    if (result.ok) this.touch(result.principal.keyId, now)
    return result
  }

  /**
   * OAuth access tokens (svc_cli_, svc_mcp_) are verified by the OAuth token store; the auth
   * step reaches it through here so every route module keeps taking just the KeyService.
   */
  useTokenVerifier(verifier: TokenVerifier): void {
    this.tokenVerifier = verifier
  }

  /** An OAuth access token → principal; unknown when no token store is configured. */
  async verifyToken(token: string, fresh = false): Promise<VerifyResult> {
    return this.tokenVerifier ? this.tokenVerifier.verify(token, fresh) : { ok: false, reason: 'unknown' }
  }

  /**
   * Drops cached results for a key (revocation, cap exhaustion), and for the OAuth tokens signed
   * in with it: they stop working with the key, at once in this process.
   */
  evictKey(keyId: string): void {
    this.cache.evictKey(keyId)
    this.tokenVerifier?.evictKey(keyId)
  }

  /** Drops cached results for a user's keys (role change). */
  evictUser(userId: string): void {
    this.cache.evictUser(userId)
  }

  /** Resolves when background last-used writes issued so far have finished (tests, shutdown). */
  async idle(): Promise<void> {
    await this.pendingWrites
  }

  private async load(hash: string, now: number): Promise<VerifyResult> {
    const rows = await this.db
      .select({ key: apiKeys, role: memberships.role })
      .from(apiKeys)
      .leftJoin(memberships, and(eq(memberships.orgId, apiKeys.orgId), eq(memberships.userId, apiKeys.userId)))
      .where(eq(apiKeys.secretHash, hash))
      .limit(1)
    const row = rows[0]
    if (!row) return { ok: false, reason: 'unknown' }
    const { key } = row
    const status = effectiveStatus(key.status, key.expiresAtMs, now)
    if (status !== 'active') return { ok: false, reason: status }
    if (!this.lastUsedWritten.has(key.id) && key.lastUsedAtMs !== null) this.lastUsedWritten.set(key.id, key.lastUsedAtMs)
    const principal: Principal = {
      kind: 'api_key',
      keyId: key.id,
      orgId: key.orgId,
      userId: key.userId,
      keyAdmin: key.admin,
      role: row.role,
      expiresAtMs: key.expiresAtMs,
      spendCap: spendCapOf(key.spendCapPeriod, key.spendCapNanos),
    }
    return { ok: true, principal }
  }

  private touch(keyId: string, now: number): void {
    const last = this.lastUsedWritten.get(keyId)
    if (last !== undefined && now - last < LAST_USED_RESOLUTION_MS) return
    this.lastUsedWritten.set(keyId, now)
    const write = this.writer
      .submit({ kind: 'plain', statements: [{ sql: LAST_USED_SQL, args: [now, keyId] }], interpret: () => undefined })
      .catch(error => this.logger.warn('last_used_at write failed', { key_id: keyId, error: String(error) }))
    this.pendingWrites = Promise.all([this.pendingWrites, write])
  }
}

/** A stored `active` key past its expiry reads as `expired` everywhere. */
export function effectiveStatus(status: KeyStatus, expiresAtMs: number | null, nowMs: number): KeyStatus {
  if (status === 'active' && expiresAtMs !== null && expiresAtMs <= nowMs) return 'expired'
  return status
}
