import type { VerifyResult } from './principal'

interface Entry {
  result: VerifyResult
  fetchedAtMs: number
}

function unexpired(result: VerifyResult, nowMs: number): VerifyResult {
  if (result.ok && result.principal.expiresAtMs !== null && result.principal.expiresAtMs <= nowMs) return { ok: false, reason: 'expired' }
  return result
}

/**
 * secret hash → verification result, so the auth path does not read the database on every
 * request. Entries live `ttlMs` (the bound on how stale another process's revocation or
 * demotion can be here); this process's own revocations and role changes evict at once.
 * Bounded: the oldest entries go first when full.
 */
export class VerifyCache {
  private readonly entries = new Map<string, Entry>()
  /** Counts evictions: a read that overlapped one may have seen the row before the change. */
  private evictions = 0

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries: number,
  ) {}

  get(hash: string, nowMs: number): VerifyResult | undefined {
    const entry = this.entries.get(hash)
    if (entry === undefined) return undefined
    if (nowMs - entry.fetchedAtMs >= this.ttlMs || nowMs < entry.fetchedAtMs) {
      this.entries.delete(hash)
      return undefined
    }
    return entry.result
  }

  set(hash: string, result: VerifyResult, nowMs: number): void {
    if (this.ttlMs === 0) return
    this.entries.delete(hash)
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next().value
      if (oldest !== undefined) this.entries.delete(oldest)
    }
    this.entries.set(hash, { result, fetchedAtMs: nowMs })
  }

  /**
   * The verification of `hash`: cached (unless `fresh`: admin routes read the current row and
   * role), else `load()`'s result, cached. Expiry is applied on every call, after the cache, so
   * a cached principal stops working the moment it expires. A hit is returned as is, not as a
   * promise: the auth step awaits nothing on its hot path.
   */
  resolve(hash: string, nowMs: number, fresh: boolean, load: () => Promise<VerifyResult>): VerifyResult | Promise<VerifyResult> {
    const hit = fresh ? undefined : this.get(hash, nowMs)
    if (hit !== undefined) return unexpired(hit, nowMs)
    const evictions = this.evictions
    return load().then(result => {
      // A revocation or role change evicted while this read was in flight: its result may be the
      // row from before the change, and cached it would undo the eviction for the whole TTL.
      // Read again, and leave the caching to the next request (evictions are rare).
      if (this.evictions !== evictions) return load().then(again => unexpired(again, nowMs))
      this.set(hash, result, nowMs)
      return unexpired(result, nowMs)
    })
  }

  /** Drops cached results of one API key (principal.keyId): the key itself, or the OAuth tokens signed in with it. */
  evictKey(keyId: string): void {
    this.evictWhere(result => result.ok && result.principal.keyId === keyId)
  }

  /** Drops cached results of every credential of a user (role change). */
  evictUser(userId: string): void {
    this.evictWhere(result => result.ok && result.principal.userId === userId)
  }

  /** Drops every entry for which `match` holds (revocation, role change: rare, so a scan is fine). */
  evictWhere(match: (result: VerifyResult) => boolean): void {
    this.evictions += 1
    for (const [hash, entry] of this.entries) if (match(entry.result)) this.entries.delete(hash)
  }

  get size(): number {
    return this.entries.size
  }
}
