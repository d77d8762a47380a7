import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'
import { buildConfiguredApp, eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'
import { codeFlowTokens, MemoryOAuthHost, postForm, REDIRECT } from '../support/oauth'

// A refresh token presented again just after its rotation, by its own client: two refreshes
// racing (the MCP SDK refreshes once per request that got 401, so a host's parallel calls after
// the access token expired each send it), or a retry whose 200 was lost. Before, the second
// presentation revoked the whole authorization, the winner's new tokens included, and the person
// had to sign in again. Now each gets a new pair, for 30 s after the rotation and five exchanges
// in all; later, or more often, a spent token still revokes everything (theft detection).

describe('a refresh token presented again within 30 s of its rotation', () => {
  let t: TestApp
  let org: TestOrg
  eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

  const chat = (token: string) => t.request('POST', '/v1/chat/completions', { key: token, body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] } })
  const refresh = (refreshToken: string, clientId: string) => postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId })

  test('two identical refreshes at the same moment: both get a pair, and both pairs keep working', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    const answers = await Promise.all([refresh(tokens.refresh_token, tokens.clientId), refresh(tokens.refresh_token, tokens.clientId)])
    expect(answers.map(answer => answer.status)).toEqual([200, 200])
    const [first, second] = await Promise.all(answers.map(json))
    expect(first.refresh_token).not.toBe(second.refresh_token)
    for (const pair of [first, second]) expect((await chat(pair.access_token)).status).toBe(200)
    // Each successor rotates on, and the other still works after.
    const next = await json(await refresh(first.refresh_token, tokens.clientId))
    expect((await refresh(second.refresh_token, tokens.clientId)).status).toBe(200)
    expect((await chat(next.access_token)).status).toBe(200)
  })

  test('a retry 29 s after the rotation (its answer lost) gets a pair; the first pair stays valid', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    const lost = await json(await refresh(tokens.refresh_token, tokens.clientId))
    t.clock.advance(29_000)
    const retried = await refresh(tokens.refresh_token, tokens.clientId)
    expect(retried.status).toBe(200)
    expect((await chat((await json(retried)).access_token)).status).toBe(200)
    expect((await chat(lost.access_token)).status).toBe(200)
    expect((await refresh(lost.refresh_token, tokens.clientId)).status).toBe(200)
  })

  test('the window runs from the rotation: at 30 s, or on a sixth exchange, reuse revokes everything', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    const rotated = await json(await refresh(tokens.refresh_token, tokens.clientId))
    t.clock.advance(20_000)
    expect((await refresh(tokens.refresh_token, tokens.clientId)).status).toBe(200)
    t.clock.advance(10_000)
    expect((await json(await refresh(tokens.refresh_token, tokens.clientId))).error).toBe('invalid_grant')
    expect((await chat(rotated.access_token)).status).toBe(401)

    const again = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    const five = await Promise.all(Array.from({ length: 5 }, () => refresh(again.refresh_token, again.clientId)))
    expect(five.map(answer => answer.status)).toEqual([200, 200, 200, 200, 200])
    const sixth = await refresh(again.refresh_token, again.clientId)
    expect(await json(sixth)).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('already used') })
    expect((await chat((await json(five[0]!)).access_token)).status).toBe(401)
  })

  test('seven at once: the guarded update lets five through, and the rest revoke the authorization', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    const answers = await Promise.all(Array.from({ length: 7 }, () => refresh(tokens.refresh_token, tokens.clientId)))
    expect(answers.filter(answer => answer.status === 200)).toHaveLength(5)
    expect(answers.filter(answer => answer.status === 400)).toHaveLength(2)
    const row = await t.deps.database.client.execute('select revoked_at_ms from oauth_grants')
    expect(row.rows[0]!.revoked_at_ms).not.toBeNull()
  })

  test('another client presenting it in the window is refused, and revokes nothing', async () => {
    const tokens = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    const rotated = await json(await refresh(tokens.refresh_token, tokens.clientId))
    const other = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    expect((await json(await refresh(tokens.refresh_token, other.clientId))).error).toBe('invalid_grant')
    expect((await chat(rotated.access_token)).status).toBe(200)
  })
})

describe('MCP SDK client: parallel calls after the access token expired', () => {
  let t: TestApp
  let base: string

  beforeAll(async () => {
    t = await buildConfiguredApp([
      'providers: [{ id: demo, type: demo, retention: none }]',
      'models:',
      '  - { id: demo-anonymous, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 4096 }',
      'plans: { payg: { monthly_allowance: "0", fusion: false } }',
      'oauth: { access_token_ttl_s: 60 }',
    ])
    base = t.listen()
  })

  afterAll(() => t.close())

  test('each call refreshes with the same refresh token; all three succeed and the host stays signed in', async () => {
    const tokens = await codeFlowTokens(t, (await t.createOrg()).adminKey)
    const host = new MemoryOAuthHost(REDIRECT, { tokens: { access_token: tokens.access_token, token_type: 'Bearer', refresh_token: tokens.refresh_token }, clientId: tokens.clientId, issuer: base })
    // The three refreshes are held until all three were sent, so all three carry the same refresh
    // token whatever the timing (the SDK reads the stored tokens just before it refreshes).
    let refreshes = 0
    const allSent = Promise.withResolvers<void>()
    const fetchHeld: FetchLike = async (input, init) => {
      if (String(input).endsWith('/oauth/token')) {
        if (++refreshes === 3) allSent.resolve()
        await allSent.promise
      }
      return fetch(input, init)
    }
    const client = new Client({ name: 'host', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: host, fetch: fetchHeld }))
    t.clock.advance(61_000)
    const results = await Promise.allSettled([client.listTools(), client.listTools(), client.callTool({ name: 'svc.list_models', arguments: {} })])
    expect(results.map(result => (result.status === 'rejected' ? String(result.reason) : result.status))).toEqual(['fulfilled', 'fulfilled', 'fulfilled'])
    expect(refreshes).toBe(3)
    // The host's stored pair (the last refresh's) works, and so does its next refresh.
    expect((await client.listTools()).tools.length).toBeGreaterThan(0)
    t.clock.advance(61_000)
    expect((await client.listTools()).tools.length).toBeGreaterThan(0)
    await client.close()
  })
})
