import { describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { apiKeys, memberships } from '../../src/db/schema'
import type { Principal, VerifyResult } from '../../src/keys/principal'
import { hashSecret } from '../../src/keys/token'
import { VerifyCache } from '../../src/keys/verify-cache'
import { buildTestApp, eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'

function principal(keyId: string, userId = 'user-1'): Principal {
  return { kind: 'api_key', keyId, orgId: 'org-1', userId, keyAdmin: true, role: 'owner', expiresAtMs: null, spendCap: null }
}

const ok = (keyId: string, userId?: string): VerifyResult => ({ ok: true, principal: principal(keyId, userId) })
const T0 = 1_000_000

describe('VerifyCache', () => {
  test('a miss is undefined; a hit returns the stored result', () => {
    const cache = new VerifyCache(2000, 10)
    expect(cache.get('h1', T0)).toBeUndefined()
    const result = ok('k1')
    cache.set('h1', result, T0)
    expect(cache.get('h1', T0)).toBe(result)
    expect(cache.get('h2', T0)).toBeUndefined()
    expect(cache.size).toBe(1)
  })

  test('negative results are cached too', () => {
    const cache = new VerifyCache(2000, 10)
    cache.set('h1', { ok: false, reason: 'unknown' }, T0)
    cache.set('h2', { ok: false, reason: 'revoked' }, T0)
    expect(cache.get('h1', T0 + 1)).toEqual({ ok: false, reason: 'unknown' })
    expect(cache.get('h2', T0 + 1)).toEqual({ ok: false, reason: 'revoked' })
  })

  test('an entry lives strictly less than the TTL, then is dropped', () => {
    const cache = new VerifyCache(2000, 10)
    cache.set('h1', ok('k1'), T0)
    expect(cache.get('h1', T0 + 1999)).toBeDefined()
    expect(cache.get('h1', T0 + 2000)).toBeUndefined()
    expect(cache.size).toBe(0)
    // Once dropped it stays a miss even if the clock were read earlier again.
    expect(cache.get('h1', T0)).toBeUndefined()
  })

  test('a clock that steps backwards does not serve the entry', () => {
    const cache = new VerifyCache(2000, 10)
    cache.set('h1', ok('k1'), T0)
    expect(cache.get('h1', T0 - 1)).toBeUndefined()
    expect(cache.size).toBe(0)
  })

  test('re-setting refreshes the fetch time', () => {
    const cache = new VerifyCache(2000, 10)
    cache.set('h1', ok('k1'), T0)
    const newer = ok('k1-new')
    cache.set('h1', newer, T0 + 1500)
    expect(cache.get('h1', T0 + 2500)).toBe(newer)
    expect(cache.get('h1', T0 + 3500)).toBeUndefined()
    expect(cache.size).toBe(0)
  })

  test('TTL 0 disables caching entirely', () => {
    const cache = new VerifyCache(0, 10)
    cache.set('h1', ok('k1'), T0)
    expect(cache.size).toBe(0)
    expect(cache.get('h1', T0)).toBeUndefined()
  })

  test('bounded: when full, the oldest insertion is evicted first', () => {
    const cache = new VerifyCache(60_000, 3)
    cache.set('a', ok('ka'), T0)
    cache.set('b', ok('kb'), T0 + 1)
    cache.set('c', ok('kc'), T0 + 2)
    cache.set('d', ok('kd'), T0 + 3)
    expect(cache.size).toBe(3)
    expect(cache.get('a', T0 + 4)).toBeUndefined()
    expect(cache.get('b', T0 + 4)).toBeDefined()
    expect(cache.get('d', T0 + 4)).toBeDefined()
    for (let i = 0; i < 100; i++) cache.set(`x${i}`, ok(`kx${i}`), T0 + 5)
    expect(cache.size).toBe(3)
    expect(cache.get('x99', T0 + 5)).toBeDefined()
    expect(cache.get('x96', T0 + 5)).toBeUndefined()
  })

  test('re-setting an entry moves it to the young end and evicts nothing else', () => {
    const cache = new VerifyCache(60_000, 3)
    cache.set('a', ok('ka'), T0)
    cache.set('b', ok('kb'), T0)
    cache.set('c', ok('kc'), T0)
    cache.set('a', ok('ka'), T0 + 1) // full, but an existing key: nobody is evicted
    expect(cache.size).toBe(3)
    for (const hash of ['a', 'b', 'c']) expect(cache.get(hash, T0 + 2)).toBeDefined()
    cache.set('d', ok('kd'), T0 + 2) // now b is the oldest
    expect(cache.get('b', T0 + 3)).toBeUndefined()
    expect(cache.get('a', T0 + 3)).toBeDefined()
    expect(cache.get('c', T0 + 3)).toBeDefined()
  })

  test('maxEntries 1 keeps only the latest', () => {
    const cache = new VerifyCache(60_000, 1)
    cache.set('a', ok('ka'), T0)
    cache.set('b', ok('kb'), T0)
    expect(cache.size).toBe(1)
    expect(cache.get('a', T0)).toBeUndefined()
    expect(cache.get('b', T0)).toBeDefined()
  })

  test('evictWhere drops exactly the matching entries', () => {
    const cache = new VerifyCache(60_000, 10)
    cache.set('a', ok('k1', 'u1'), T0)
    cache.set('b', ok('k2', 'u1'), T0)
    cache.set('c', ok('k3', 'u2'), T0)
    cache.set('d', { ok: false, reason: 'unknown' }, T0)
    cache.evictWhere(result => result.ok && result.principal.userId === 'u1')
    expect(cache.get('a', T0)).toBeUndefined()
    expect(cache.get('b', T0)).toBeUndefined()
    expect(cache.get('c', T0)).toBeDefined()
    expect(cache.get('d', T0)).toBeDefined()
    expect(cache.size).toBe(2)
    cache.evictWhere(() => true)
    expect(cache.size).toBe(0)
  })

  test('a read in flight across an eviction is read again and not cached: it may predate the change', async () => {
    const cache = new VerifyCache(60_000, 10)
    const reads: Array<(result: VerifyResult) => void> = []
    const load = () => new Promise<VerifyResult>(resolve => reads.push(resolve))
    const resolved = cache.resolve('h1', T0, false, load)
    // The key is revoked (and evicted) while the first read, of the row before, is in flight.
    cache.evictKey('k1')
    reads[0]!(ok('k1'))
    await Promise.resolve()
    expect(reads.length).toBe(2)
    reads[1]!({ ok: false, reason: 'revoked' })
    expect(await resolved).toEqual({ ok: false, reason: 'revoked' })
    expect(cache.get('h1', T0)).toBeUndefined()
    // Without an eviction in between, a read is cached as before.
    const next = cache.resolve('h1', T0, false, load)
    reads[2]!({ ok: false, reason: 'revoked' })
    expect(await next).toEqual({ ok: false, reason: 'revoked' })
    expect(cache.get('h1', T0)).toEqual({ ok: false, reason: 'revoked' })
  })
})

// The cache as KeyService uses it: non-fresh verifies may be served from it for the TTL (the
// bound on how stale another process's change can be); this process's changes evict at once.
describe('KeyService verify caching', () => {
  let t: TestApp
  let org: TestOrg
  eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

  /** Simulates another instance changing the row behind this process's back. */
  async function revokeElsewhere(keyId: string) {
    await t.deps.database.db.update(apiKeys).set({ status: 'revoked', revokedAtMs: t.clock.now() }).where(eq(apiKeys.id, keyId))
  }

  test('a revocation by another process is seen within the TTL, and at once by fresh reads', async () => {
    expect(t.deps.config.auth.cacheTtlMs).toBe(2000)
    expect((await t.deps.keys.verify(org.adminKey)).ok).toBe(true)
    await revokeElsewhere(org.adminKeyId)
    // Cached: still accepted for up to the TTL by non-fresh callers.
    t.clock.advance(1999)
    expect((await t.deps.keys.verify(org.adminKey)).ok).toBe(true)
    // Fresh (admin routes) always re-reads.
    expect(await t.deps.keys.verify(org.adminKey, true)).toEqual({ ok: false, reason: 'revoked' })
    // And the fresh read refreshed the cache.
    expect(await t.deps.keys.verify(org.adminKey)).toEqual({ ok: false, reason: 'revoked' })
  })

  test('the TTL bounds staleness without a fresh read', async () => {
    expect((await t.deps.keys.verify(org.adminKey)).ok).toBe(true)
    await revokeElsewhere(org.adminKeyId)
    t.clock.advance(2000)
    expect(await t.deps.keys.verify(org.adminKey)).toEqual({ ok: false, reason: 'revoked' })
  })

  test("this process's revocation holds against requests in flight across it", async () => {
    const created = await json(await t.request('POST', '/api/v1/api-keys', { key: org.adminKey, body: { name: 'leaked' } }))
    const leaked: string = created.key.token
    // A client keeps using the key (its first uses: nothing cached) while an admin revokes it:
    // a verification that read the row before the revocation must not be cached after it.
    const revoked = t.request('DELETE', `/api/v1/api-keys/${created.key.id}`, { key: org.adminKey })
    await Promise.all(Array.from({ length: 30 }, () => t.request('GET', '/api/v1/rate-limits', { key: leaked })))
    expect((await revoked).status).toBe(204)
    const chat = await t.request('POST', '/v1/chat/completions', { key: leaked, body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] } })
    expect(chat.status).toBe(401)
  })

  test("this process's revocation evicts at once", async () => {
    expect((await t.deps.keys.verify(org.adminKey)).ok).toBe(true)
    expect(await t.deps.keys.revoke(org.orgId, org.adminKeyId)).toBe(true)
    expect(await t.deps.keys.verify(org.adminKey)).toEqual({ ok: false, reason: 'revoked' })
  })

  test('a role change evicts that user’s cached principals at once, and only theirs', async () => {
    const admin = await t.createMember(org, 'admin', { admin: true })
    const first = await t.deps.keys.verify(admin.key)
    expect(first.ok && first.principal.role).toBe('admin')
    // The owner's principal is cached too; change its row behind the cache's back.
    await t.deps.keys.verify(org.adminKey)
    await t.deps.database.db.update(memberships).set({ role: 'admin' }).where(eq(memberships.userId, org.ownerUserId))

    await t.deps.orgs.setRole({ orgId: org.orgId, userId: admin.userId, role: 'member' })
    const second = await t.deps.keys.verify(admin.key)
    expect(second.ok && second.principal.role).toBe('member')
    // The owner's entry survived the eviction: still the cached role.
    const owner = await t.deps.keys.verify(org.adminKey)
    expect(owner.ok && owner.principal.role).toBe('owner')
  })

  test('expiry is checked on every call, even for a cached principal', async () => {
    const { secret } = await t.deps.keys.create({
      orgId: org.orgId, userId: org.ownerUserId, name: 'short', admin: false, expiresAtMs: t.clock.now() + 1000, spendCap: null,
    })
    expect((await t.deps.keys.verify(secret)).ok).toBe(true)
    t.clock.advance(1000) // within the TTL: the principal is still cached
    expect(await t.deps.keys.verify(secret)).toEqual({ ok: false, reason: 'expired' })
  })

  test('unknown secrets are refused and the refusal is cached by hash only', async () => {
    const unknown = `z_sk_${'0'.repeat(49)}`
    expect(await t.deps.keys.verify(unknown)).toEqual({ ok: false, reason: 'unknown' })
    // A row appearing with that hash is seen after the TTL (or by a fresh read).
    const { key } = await t.deps.keys.create({ orgId: org.orgId, userId: org.ownerUserId, name: 'late', admin: false, expiresAtMs: null, spendCap: null })
    await t.deps.database.db.update(apiKeys).set({ secretHash: hashSecret(unknown) }).where(eq(apiKeys.id, key.id))
    expect(await t.deps.keys.verify(unknown)).toEqual({ ok: false, reason: 'unknown' })
    expect((await t.deps.keys.verify(unknown, true)).ok).toBe(true)
  })

  test('with cache_ttl_ms 0 every verify reads the database', async () => {
    const config = t.deps.config
    const uncached = await buildTestApp({}, { ...config, auth: { ...config.auth, cacheTtlMs: 0 } })
    try {
      const other = await uncached.createOrg()
      expect((await uncached.deps.keys.verify(other.adminKey)).ok).toBe(true)
      await uncached.deps.database.db.update(apiKeys).set({ status: 'revoked' }).where(eq(apiKeys.id, other.adminKeyId))
      expect(await uncached.deps.keys.verify(other.adminKey)).toEqual({ ok: false, reason: 'revoked' })
    } finally {
      await uncached.close()
    }
  })
})
