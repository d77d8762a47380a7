import { describe, expect, test } from 'bun:test'
import type { AuthMode } from '../../src/http/auth'
import { generateKeySecret } from '../../src/keys/token'
import { buildTestApp, json, type TestApp } from './harness'

export interface AuthedRoute {
  method: string
  path: string
  mode: Exclude<AuthMode, 'public'>
  /** A valid body, so that only credentials decide the outcome. */
  body?: unknown
  /** Status a valid credential gets (to prove the suite's credentials are otherwise fine). */
  okStatus: number
  /** The route consumes no bucket (GET /api/v1/rate-limits). */
  rateLimited?: false
}

/**
 * The shared security suite every authenticated route runs (ARCHITECTURE.md §1.8): missing,
 * malformed, unknown, revoked and expired credentials → 401; MCP tokens off /mcp → 401; CLI
 * OAuth tokens accepted on inference and admin routes (owner or admin only) but not management;
 * X-Org-ID mismatch → 403; admin routes refuse ordinary keys and demoted owners → 403, each
 * spending from the credential's buckets; cookies never authenticate.
 */
export function runAuthSuite(route: AuthedRoute): void {
  const name = `${route.method} ${route.path} auth (${route.mode})`
  describe(name, () => {
    const send = (t: TestApp, headers: Record<string, string>) =>
      t.request(route.method, route.path, { body: route.body, headers })

    const withApp = (fn: (t: TestApp) => Promise<void>) => async () => {
      const t = await buildTestApp()
      try {
        await fn(t)
      } finally {
        await t.close()
      }
    }

    const expect401 = async (response: Response) => {
      expect(response.status).toBe(401)
      const body = await json(response)
      expect(route.path.startsWith('/v1/') ? body.error.type : body.error.code).toBe(
        route.path.startsWith('/v1/') ? 'authentication_error' : 'unauthorized',
      )
      expect(response.headers.get('x-request-id')).toBeTruthy()
    }

    test('a valid credential is accepted (Bearer and X-API-Key)', withApp(async t => {
      const org = await t.createOrg()
      expect((await send(t, { authorization: `Bearer ${org.adminKey}` })).status).toBe(route.okStatus)
      expect((await send(t, { 'x-api-key': org.adminKey })).status).toBe(route.okStatus)
      // An empty or blank X-API-Key beside a Bearer is absent, as it is alone (not "different credentials").
      expect((await send(t, { authorization: `Bearer ${org.adminKey}`, 'x-api-key': '' })).status).toBe(route.okStatus)
      expect((await send(t, { authorization: `Bearer ${org.adminKey}`, 'x-api-key': ' \t ' })).status).toBe(route.okStatus)
      expect((await send(t, { authorization: `bearer ${org.adminKey}`, 'x-org-id': org.orgId })).status).toBe(route.okStatus)
      // Organization ids are UUIDs, case-insensitive on input (RFC 9562 §4), as key ids are.
      expect((await send(t, { authorization: `Bearer ${org.adminKey}`, 'x-org-id': org.orgId.toUpperCase() })).status).toBe(route.okStatus)
    }))

    test('missing, malformed and unknown credentials are 401', withApp(async t => {
      const org = await t.createOrg()
      await expect401(await send(t, {}))
      await expect401(await send(t, { 'x-api-key': '' }))
      await expect401(await send(t, { authorization: org.adminKey }))
      await expect401(await send(t, { authorization: `Basic ${btoa(`x:${org.adminKey}`)}` }))
      await expect401(await send(t, { authorization: 'Bearer ' }))
      await expect401(await send(t, { authorization: 'Bearer sk-openai-style-key' }))
      await expect401(await send(t, { authorization: `Bearer ${org.adminKey.slice(0, -1)}${org.adminKey.endsWith('x') ? 'y' : 'x'}` }))
      await expect401(await send(t, { authorization: `Bearer ${generateKeySecret()}` }))
      await expect401(await send(t, { authorization: 'Bearer svc_cli_abcdefghijklmnopqrstuvwxyz012345' }))
      await expect401(await send(t, { authorization: `Bearer ${org.adminKey}`, 'x-api-key': generateKeySecret() }))
    }))

    test('cookies never authenticate', withApp(async t => {
      const org = await t.createOrg()
      await expect401(await send(t, { cookie: `session=${org.adminKey}; api_key=${org.adminKey}` }))
    }))

    test('svc_mcp_ tokens are refused off /mcp', withApp(async t => {
      await expect401(await send(t, { authorization: 'Bearer svc_mcp_abcdefghijklmnopqrstuvwxyz012345' }))
    }))

    test('OAuth tokens: svc_mcp_ never; svc_cli_ of an owner on inference and admin routes, not on management', withApp(async t => {
      const org = await t.createOrg()
      // Signed in with an admin key (the owner's, or the member's own): the token is bounded by it.
      const issue = (scope: 'mcp:inference' | 'cli:inference', userId = org.ownerUserId, keyId = org.adminKeyId) =>
        t.deps.oauth.tokens.issue({ clientId: 'svc-cli', userId, orgId: org.orgId, scope, resource: null, keyId }).then(grant => grant.tokens.access_token)
      await expect401(await send(t, { authorization: `Bearer ${await issue('mcp:inference')}` }))
      const cli = await issue('cli:inference')
      if (route.mode === 'management') await expect401(await send(t, { authorization: `Bearer ${cli}` }))
      else expect((await send(t, { authorization: `Bearer ${cli}` })).status).toBe(route.okStatus)
      if (route.mode === 'admin') {
        const member = await t.createMember(org, 'member', { admin: true })
        expect((await send(t, { authorization: `Bearer ${await issue('cli:inference', member.userId, member.keyId)}` })).status).toBe(403)
      }
    }))

    test('revoked and expired keys are 401', withApp(async t => {
      const org = await t.createOrg()
      const member = await t.createMember(org, 'owner', { admin: true })
      await t.deps.keys.revoke(org.orgId, member.keyId)
      await expect401(await send(t, { authorization: `Bearer ${member.key}` }))
      const { secret } = await t.deps.keys.create({
        orgId: org.orgId, userId: org.ownerUserId, name: 'short', admin: true, expiresAtMs: t.clock.now() + 60_000, spendCap: null,
      })
      expect((await send(t, { authorization: `Bearer ${secret}` })).status).toBe(route.okStatus)
      t.clock.advance(60_000)
      await expect401(await send(t, { authorization: `Bearer ${secret}` }))
    }))

    test('X-Org-ID of another organization is 403', withApp(async t => {
      const org = await t.createOrg('one')
      const other = await t.createOrg('two')
      const response = await send(t, { authorization: `Bearer ${org.adminKey}`, 'x-org-id': other.orgId })
      expect(response.status).toBe(403)
    }))

    // A known credential's 403 is a request like any other: it spends from its buckets (an
    // admin route's check reads the database each time), so hammering one ends in 429s.
    if (route.rateLimited !== false) test('a refused known credential spends from its buckets', withApp(async t => {
      const org = await t.createOrg('one')
      const other = await t.createOrg('two')
      const surface = route.mode === 'inference' ? 'inference' : 'management'
      const remaining = () => t.deps.limits.snapshot({ orgId: org.orgId, keyId: org.adminKeyId })[surface].key.remaining
      const before = remaining()
      expect((await send(t, { authorization: `Bearer ${org.adminKey}`, 'x-org-id': other.orgId })).status).toBe(403)
      expect(remaining()).toBe(before - 1)
      if (route.mode === 'admin') {
        const plain = await t.createMember(org, 'owner', { admin: false })
        const plainRemaining = () => t.deps.limits.snapshot({ orgId: org.orgId, keyId: plain.keyId }).management.key.remaining
        const start = plainRemaining()
        expect((await send(t, { authorization: `Bearer ${plain.key}` })).status).toBe(403)
        expect(plainRemaining()).toBe(start - 1)
      }
    }))

    if (route.mode === 'admin') {
      test('admin routes refuse non-admin keys and keys of members without admin role', withApp(async t => {
        const org = await t.createOrg()
        const plain = await t.createMember(org, 'owner', { admin: false })
        expect((await send(t, { authorization: `Bearer ${plain.key}` })).status).toBe(403)
        const member = await t.createMember(org, 'member', { admin: true })
        expect((await send(t, { authorization: `Bearer ${member.key}` })).status).toBe(403)
        const admin = await t.createMember(org, 'admin', { admin: true })
        expect((await send(t, { authorization: `Bearer ${admin.key}` })).status).toBe(route.okStatus)
      }))

      test('demoting the key owner removes admin authority at once', withApp(async t => {
        const org = await t.createOrg()
        const admin = await t.createMember(org, 'admin', { admin: true })
        expect((await send(t, { authorization: `Bearer ${admin.key}` })).status).toBe(route.okStatus)
        await t.deps.orgs.setRole({ orgId: org.orgId, userId: admin.userId, role: 'member' })
        expect((await send(t, { authorization: `Bearer ${admin.key}` })).status).toBe(403)
      }))
    }
  })
}
