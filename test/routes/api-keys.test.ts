import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { apiKeys } from '../../src/db/schema'
import { hashSecret, isWellFormedKeySecret } from '../../src/keys/token'
import { ALWAYS, KEYS, keysApi, MINUTE, NOW_ISO, UUID } from '../support/api-keys'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'

// Key management through HTTP (spec §2.1, §3.1, §4.1–4.3, §5, §7), on the fake clock: the
// lifecycle, organization isolation and admin authority. Expiry, spend caps, hostile input, body
// limits and envelopes are in the other api-keys-*.test.ts files.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))
const { create, createOk, list, listed, revoke, expectApiError, expectCreateRejected, createRejected } = keysApi(() => ({ t, org }))

describe('create → use → list → revoke', () => {
  test('create returns 201 with the key, its token once, and no-store', async () => {
    const response = await create({ name: 'ci-deploy' })
    expect(response.status).toBe(201)
    expect(response.headers.get('cache-control')).toBe('no-store')
    expect(response.headers.get('content-type')).toStartWith('application/json')
    expect(response.headers.get('x-request-id')).toBeTruthy()
    const body = await json(response)
    expect(Object.keys(body)).toEqual(['key'])
    const { key } = body
    expect(Object.keys(key).sort()).toEqual([...ALWAYS, 'token'].sort())
    expect(key.id).toMatch(UUID)
    expect(key.name).toBe('ci-deploy')
    expect(key.status).toBe('active')
    expect(key.created_at).toBe(NOW_ISO)
    expect(key.admin).toBe(false)
    expect(key.token).toStartWith('z_sk_')
    expect(isWellFormedKeySecret(key.token)).toBe(true)
  })

  test('the token is a working credential, with the admin flag it was given', async () => {
    const plain = await createOk({ name: 'plain' })
    const admin = await createOk({ name: 'admin', admin: true })
    // An ordinary key authenticates (403, not 401) but has no admin authority.
    await expectApiError(await t.request('GET', KEYS, { key: plain.token }), 403, 'forbidden')
    // X-API-Key works as well as Bearer.
    const viaHeader = await t.request('GET', KEYS, { headers: { 'x-api-key': admin.token } })
    expect(viaHeader.status).toBe(200)
    // The new admin key can itself create and revoke.
    const child = await createOk({ name: 'child' }, admin.token)
    expect((await revoke(child.id, admin.token)).status).toBe(204)
  })

  test('only the SHA-256 is stored, and neither secret nor hash is ever listed', async () => {
    const created = await createOk({ name: 'secret-check', admin: true })
    const rows = await t.deps.database.db.select({ hash: apiKeys.secretHash }).from(apiKeys).where(sql`${apiKeys.id} = ${created.id}`)
    expect(rows).toEqual([{ hash: hashSecret(created.token) }])
    const response = await t.request('GET', KEYS, { key: created.token })
    const text = await response.text()
    expect(text).not.toContain(created.token)
    expect(text).not.toContain(created.token.slice(5))
    expect(text).not.toContain(hashSecret(created.token))
    expect(text).not.toContain(hashSecret(org.adminKey))
    expect(text).not.toContain(org.adminKey)
    for (const entry of JSON.parse(text).keys) {
      expect(entry).not.toHaveProperty('token')
      expect(entry).not.toHaveProperty('secret_hash')
      expect(entry).not.toHaveProperty('hash')
    }
  })

  test('list fields: the five always-present fields, optional ones only when set', async () => {
    const bare = await createOk({ name: 'bare' })
    t.clock.advance(1000)
    const full = await createOk({ name: 'full', admin: true, expires_in: '7d', spend_cap_period: 'monthly', spend_cap_nanos: '5000000000' })
    const keys = await list()
    expect(keys.map(entry => entry.name)).toEqual(['full', 'bare', 'admin']) // newest first
    const [fullEntry, bareEntry] = keys
    expect(Object.keys(bareEntry!).sort()).toEqual(ALWAYS)
    expect(bareEntry).toEqual({ id: bare.id, name: 'bare', status: 'active', created_at: NOW_ISO, admin: false })
    expect(fullEntry).toEqual({
      id: full.id,
      name: 'full',
      status: 'active',
      created_at: '2026-01-15T12:00:01.000Z',
      admin: true,
      expires_at: '2026-01-22T12:00:01.000Z',
      spend_cap_period: 'monthly',
      spend_cap_nanos: '5000000000',
    })
    // The creation response carries the same fields plus the token.
    const { token, ...withoutToken } = full
    expect(token).toStartWith('z_sk_')
    expect(withoutToken).toEqual(fullEntry!)
  })

  test('list response has no-store and only a keys array', async () => {
    const response = await t.request('GET', KEYS, { key: org.adminKey })
    expect(response.headers.get('cache-control')).toBe('no-store')
    const body = await json(response)
    expect(Object.keys(body)).toEqual(['keys'])
    expect(body.keys).toHaveLength(1)
  })

  test('last_used_at appears after use and advances at most once a minute', async () => {
    const key = await createOk({ name: 'used' })
    await t.deps.keys.idle()
    expect(await listed(key.id)).not.toHaveProperty('last_used_at')

    t.clock.advance(5 * MINUTE)
    await t.request('GET', KEYS, { key: key.token }) // 403, but the key authenticated
    await t.deps.keys.idle()
    expect((await listed(key.id))!.last_used_at).toBe('2026-01-15T12:05:00.000Z')

    t.clock.advance(30_000)
    await t.request('GET', KEYS, { key: key.token })
    await t.deps.keys.idle()
    expect((await listed(key.id))!.last_used_at).toBe('2026-01-15T12:05:00.000Z')

    t.clock.advance(30_000)
    await t.request('GET', KEYS, { key: key.token })
    await t.deps.keys.idle()
    expect((await listed(key.id))!.last_used_at).toBe('2026-01-15T12:06:00.000Z')
  })

  test('a refused credential does not count as use', async () => {
    const key = await createOk({ name: 'short', expires_in: '10m' })
    t.clock.advance(10 * MINUTE)
    expect((await t.request('GET', KEYS, { key: key.token })).status).toBe(401)
    await t.deps.keys.idle()
    expect(await listed(key.id)).not.toHaveProperty('last_used_at')
  })

  test('revoke: 204 without a body, then revoked + revoked_at in the list and 401 at once', async () => {
    const key = await createOk({ name: 'to-revoke', admin: true })
    expect((await t.request('GET', KEYS, { key: key.token })).status).toBe(200) // warm any cache
    t.clock.advance(90_000)
    // A UUID is case-insensitive on input: the id in upper case names the same key.
    const response = await revoke(key.id.toUpperCase())
    expect(response.status).toBe(204)
    expect(await response.text()).toBe('')
    expect(response.headers.get('x-request-id')).toBeTruthy()

    const entry = await listed(key.id)
    expect(entry!.status).toBe('revoked')
    expect(entry!.revoked_at).toBe('2026-01-15T12:01:30.000Z')
    expect(entry!.created_at).toBe(NOW_ISO)
    const error = await expectApiError(await t.request('GET', KEYS, { key: key.token }), 401, 'unauthorized')
    expect(error.message).toContain('revoked')
    expect((await t.request('GET', KEYS, { headers: { 'x-api-key': key.token } })).status).toBe(401)
  })

  test('revoking twice, or a key that never existed, is 404 naming key_id', async () => {
    const key = await createOk({ name: 'once' })
    expect((await revoke(key.id)).status).toBe(204)
    t.clock.advance(MINUTE)
    await expectApiError(await revoke(key.id), 404, 'not_found', 'key_id')
    // The first revocation time is kept.
    expect((await listed(key.id))!.revoked_at).toBe(NOW_ISO)
    await expectApiError(await revoke('00000000-0000-7000-8000-000000000000'), 404, 'not_found', 'key_id')
    await expectApiError(await revoke(crypto.randomUUID()), 404, 'not_found', 'key_id')
  })

  test('a key_id that is not a UUID is 400', async () => {
    for (const id of ['abc', '1', `${org.adminKeyId}x`, 'z_sk_abc', '%27%20OR%201%3D1']) {
      await expectApiError(await revoke(id), 400, 'invalid_request', 'key_id')
    }
    expect((await t.request('GET', KEYS, { key: org.adminKey })).status).toBe(200)
  })

  test('an admin key can revoke itself; it stops working immediately', async () => {
    expect((await revoke(org.adminKeyId)).status).toBe(204)
    await expectApiError(await t.request('GET', KEYS, { key: org.adminKey }), 401, 'unauthorized')
  })

  test('an expired key can still be revoked', async () => {
    const key = await createOk({ name: 'brief', expires_in: '10m' })
    t.clock.advance(11 * MINUTE)
    expect((await listed(key.id))!.status).toBe('expired')
    expect((await revoke(key.id)).status).toBe(204)
    const entry = await listed(key.id)
    expect(entry!.status).toBe('revoked')
    expect(entry!.expires_at).toBe('2026-01-15T12:10:00.000Z')
    expect(entry!.revoked_at).toBe('2026-01-15T12:11:00.000Z')
  })

  test('rotation: create a replacement, switch, revoke the old one', async () => {
    const old = await createOk({ name: 'svc', admin: true })
    const replacement = await createOk({ name: 'svc', admin: true }, old.token)
    expect((await revoke(old.id, replacement.token)).status).toBe(204)
    expect((await t.request('GET', KEYS, { key: old.token })).status).toBe(401)
    expect((await t.request('GET', KEYS, { key: replacement.token })).status).toBe(200)
    // Same name twice is allowed; the two are different keys.
    expect(replacement.id).not.toBe(old.id)
    expect(replacement.token).not.toBe(old.token)
  })
})

describe('organization isolation', () => {
  test("an admin sees only their own organization's keys", async () => {
    const other = await t.createOrg('other')
    const mine = await createOk({ name: 'mine' })
    const theirs = await createOk({ name: 'theirs' }, other.adminKey)
    const myIds = (await list()).map(entry => entry.id)
    const theirIds = (await list(other.adminKey)).map(entry => entry.id)
    expect(myIds.sort()).toEqual([org.adminKeyId, mine.id].sort())
    expect(theirIds.sort()).toEqual([other.adminKeyId, theirs.id].sort())
  })

  test("revoking another organization's key is 404 and that key keeps working", async () => {
    const other = await t.createOrg('other')
    const theirs = await createOk({ name: 'theirs', admin: true }, other.adminKey)
    await expectApiError(await revoke(theirs.id), 404, 'not_found', 'key_id')
    await expectApiError(await revoke(other.adminKeyId), 404, 'not_found', 'key_id')
    expect((await t.request('GET', KEYS, { key: theirs.token })).status).toBe(200)
    expect((await t.request('GET', KEYS, { key: other.adminKey })).status).toBe(200)
    const entry = await listed(theirs.id, other.adminKey)
    expect(entry!.status).toBe('active')
    expect(entry).not.toHaveProperty('revoked_at')
    // The 404 is the same as for a key that does not exist: nothing tells the two apart.
    const missing = await expectApiError(await revoke(crypto.randomUUID()), 404, 'not_found', 'key_id')
    const foreign = await expectApiError(await revoke(theirs.id), 404, 'not_found', 'key_id')
    expect(foreign.message).toBe(missing.message)
  })

  test('the organization comes from the credential, not from the body or a mismatched header', async () => {
    const other = await t.createOrg('other')
    await createRejected({ name: 'x', org_id: other.orgId }, 'org_id')
    const mismatched = await create({ name: 'x' }, org.adminKey, { 'x-org-id': other.orgId })
    await expectApiError(mismatched, 403, 'forbidden')
    const matched = await createOk({ name: 'matched' })
    expect((await list(other.adminKey)).some(entry => entry.id === matched.id)).toBe(false)
    expect(await list(other.adminKey)).toHaveLength(1)
  })
})

describe('admin authority follows the current role', () => {
  test('a demoted owner loses admin at once; re-promoted, gets it back', async () => {
    const owner = await t.createMember(org, 'owner', { admin: true })
    expect((await t.request('GET', KEYS, { key: owner.key })).status).toBe(200)
    await t.deps.orgs.setRole({ orgId: org.orgId, userId: owner.userId, role: 'member' })
    await expectApiError(await t.request('GET', KEYS, { key: owner.key }), 403, 'forbidden')
    await expectCreateRejected(() => create({ name: 'x' }, owner.key), 403, 'forbidden')
    await expectApiError(await revoke(org.adminKeyId, owner.key), 403, 'forbidden')
    await t.deps.orgs.setRole({ orgId: org.orgId, userId: owner.userId, role: 'owner' })
    expect((await t.request('GET', KEYS, { key: owner.key })).status).toBe(200)
    // Demoting to admin keeps authority.
    await t.deps.orgs.setRole({ orgId: org.orgId, userId: owner.userId, role: 'admin' })
    expect((await t.request('GET', KEYS, { key: owner.key })).status).toBe(200)
  })

  test('admin keys created through the API follow their creator’s role', async () => {
    const admin = await t.createMember(org, 'admin', { admin: true })
    const child = await createOk({ name: 'child', admin: true }, admin.key)
    expect((await t.request('GET', KEYS, { key: child.token })).status).toBe(200)
    await t.deps.orgs.setRole({ orgId: org.orgId, userId: admin.userId, role: 'member' })
    await expectApiError(await t.request('GET', KEYS, { key: child.token }), 403, 'forbidden')
    // The owner's keys are unaffected.
    expect((await t.request('GET', KEYS, { key: org.adminKey })).status).toBe(200)
  })
})
