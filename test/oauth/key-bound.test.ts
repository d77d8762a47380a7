import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import type { SpendCapPeriod } from '../../src/db/schema'
import { loadConfig } from '../../src/config/load'
import { buildTestApp, json, type TestApp, type TestOrg } from '../support/harness'
import { approveDevice, codeFlowTokens, deviceFlowTokens, pollDevice, postForm } from '../support/oauth'

// A token obtained by presenting an API key on the sign-in page can never do more than that key
// (spec §2.1 "a spend cap is the way to bound a key", §3.1 revocation "immediate and permanent",
// §5 "key spend caps apply to every billed call made with the key"): no admin authority from a
// non-admin key, the key's own spend cap, and nothing left once the key is revoked or expired.
// For svc_cli_ (code and device flows) and svc_mcp_ (valid on /mcp only).

// Pay-as-you-go (no allowance) and a dear model, so a few calls use up a small cap.
const YAML = `
providers: [{ id: demo, type: demo, retention: none }]
models:
  - { id: demo-anonymous, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1000", output_per_mtok: "1000" }, context_length: 32768, max_output_tokens: 4096 }
plans: { payg: { monthly_allowance: "0", fusion: false } }
`
// A few calls' worth at ~0.001 USD per token with max_tokens 20.
const CAP = 200_000_000n

let t: TestApp
let org: TestOrg

beforeEach(async () => {
  const env = { SVC_CONFIG: '/virtual/gateway.yaml' }
  t = await buildTestApp(env, loadConfig(env, () => YAML))
  org = await t.createOrg('acme')
})
afterEach(() => t.close())

/** A key of the organization's owner (an owner: only the key's own flag decides admin authority). */
async function ownerKey(options: { admin?: boolean; expiresAtMs?: number; cap?: { period: SpendCapPeriod; nanos: bigint } } = {}) {
  const { key, secret } = await t.deps.keys.create({
    orgId: org.orgId, userId: org.ownerUserId, name: 'signs in', admin: options.admin ?? false, expiresAtMs: options.expiresAtMs ?? null, spendCap: options.cap ?? null,
  })
  return { keyId: key.id, secret }
}

const chat = (credential: string) =>
  t.request('POST', '/v1/chat/completions', { key: credential, body: { model: 'demo-anonymous', max_tokens: 20, messages: [{ role: 'user', content: 'hello' }] } })

/** One JSON-RPC call on /mcp (stateless: no initialize needed). */
const mcp = (token: string, method: string, params?: unknown) =>
  t.request('POST', '/mcp', { key: token, body: { jsonrpc: '2.0', id: 1, method, params }, headers: { accept: 'application/json, text/event-stream' } })
const mcpChat = (token: string) => mcp(token, 'tools/call', { name: 'svc.chat', arguments: { model: 'demo-anonymous', prompt: 'hello', max_tokens: 20 } })

const refresh = async (flow: { refresh_token: string; clientId: string }) =>
  json(await postForm(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: flow.refresh_token, client_id: flow.clientId }))

/** Calls `call` until it is refused (at most 30 times); the refusal's response. */
async function untilRefused(call: () => Promise<Response>, refused: (response: Response, body: any) => boolean): Promise<{ served: number; body: any; status: number }> {
  for (let served = 0; served < 30; served++) {
    const response = await call()
    const body = await json(response)
    if (refused(response, body)) return { served, body, status: response.status }
  }
  throw new Error('never refused')
}

/** Settled amounts per key id, and what key_spend holds for `keyId`. */
async function books(keyId: string): Promise<{ settledByKey: Record<string, bigint>; keySpend: bigint }> {
  const entries = await t.deps.database.client.execute({ sql: "select key_id, sum(amount_nanos) as total from ledger_entries where org_id = ? and kind = 'settle' group by key_id", args: [org.orgId] })
  const spend = await t.deps.database.client.execute({ sql: 'select coalesce(sum(spent_nanos), 0) as spent from key_spend where key_id = ?', args: [keyId] })
  return { settledByKey: Object.fromEntries(entries.rows.map(row => [String(row.key_id), BigInt(row.total as bigint)])), keySpend: BigInt(spend.rows[0]!.spent as bigint) }
}

describe('admin authority is the key’s', () => {
  test('svc_cli_ signed in with a non-admin key of an owner: 403 on key management and balance, inference still works', async () => {
    const plain = await ownerKey()
    for (const flow of [await codeFlowTokens(t, plain.secret, 'cli:inference'), await deviceFlowTokens(t, plain.secret)]) {
      const created = await t.request('POST', '/api/v1/api-keys', { key: flow.access_token, body: { name: 'escalated' } })
      expect(created.status).toBe(403)
      expect((await json(created)).error.code).toBe('forbidden')
      expect((await t.request('GET', '/api/v1/api-keys', { key: flow.access_token })).status).toBe(403)
      expect((await t.request('GET', '/api/v1/billing/balance', { key: flow.access_token })).status).toBe(403)
      expect((await chat(flow.access_token)).status).toBe(200)
    }
    // Signed in with the owner's admin key: the token may manage keys, as the key may.
    const admin = await deviceFlowTokens(t, org.adminKey)
    expect((await t.request('POST', '/api/v1/api-keys', { key: admin.access_token, body: { name: 'from the cli' } })).status).toBe(201)
  })
})

describe('spend caps are the key’s', () => {
  test('svc_cli_ from a capped key: its calls count toward the key’s cap; once used, token and key get 429 insufficient_quota', async () => {
    const capped = await ownerKey({ cap: { period: 'daily', nanos: CAP } })
    const cli = (await codeFlowTokens(t, capped.secret, 'cli:inference')).access_token
    expect((await chat(capped.secret)).status).toBe(200)
    const refusal = await untilRefused(() => chat(cli), response => response.status !== 200)
    expect(refusal.served).toBeGreaterThan(0)
    expect(refusal.status).toBe(429)
    expect(refusal.body.error.code).toBe('insufficient_quota')
    expect(refusal.body.error.message).toContain('daily spend cap')
    // One cap: the key that signed in is refused as well.
    expect((await json(await chat(capped.secret))).error.code).toBe('insufficient_quota')
    // Every settlement, the key's and the token's, is on the key's books, within its cap.
    const { settledByKey, keySpend } = await books(capped.keyId)
    expect(Object.keys(settledByKey)).toEqual([capped.keyId])
    expect(keySpend).toBe(settledByKey[capped.keyId]!)
    expect(keySpend).toBeLessThanOrEqual(CAP)
  })

  test('a cap used up through the key refuses the token (svc_cli_ on chat, svc_mcp_ on /mcp with -32002)', async () => {
    const capped = await ownerKey({ cap: { period: 'daily', nanos: CAP } })
    const cli = (await codeFlowTokens(t, capped.secret, 'cli:inference')).access_token
    const mcpToken = (await codeFlowTokens(t, capped.secret)).access_token
    expect((await json(await mcpChat(mcpToken))).result.isError).toBeFalsy()
    await untilRefused(() => chat(capped.secret), response => response.status === 429)
    const refusedChat = await chat(cli)
    expect(refusedChat.status).toBe(429)
    expect((await json(refusedChat)).error.code).toBe('insufficient_quota')
    const refused = await json(await mcpChat(mcpToken))
    expect(refused.error.code).toBe(-32002)
    expect(refused.error.data.code).toBe('insufficient_quota')
    const { settledByKey } = await books(capped.keyId)
    expect(Object.keys(settledByKey)).toEqual([capped.keyId])
  })
})

describe('tokens die with the key', () => {
  test('revoking the key: its svc_cli_ and svc_mcp_ tokens get 401 at once, their refresh tokens invalid_grant', async () => {
    const key = await ownerKey()
    const cli = await codeFlowTokens(t, key.secret, 'cli:inference')
    const device = await deviceFlowTokens(t, key.secret)
    const mcpFlow = await codeFlowTokens(t, key.secret)
    // Verified once each, so the results sit in the verify cache.
    expect((await chat(cli.access_token)).status).toBe(200)
    expect((await chat(device.access_token)).status).toBe(200)
    expect((await mcp(mcpFlow.access_token, 'ping')).status).toBe(200)

    expect((await t.request('DELETE', `/api/v1/api-keys/${key.keyId}`, { key: org.adminKey })).status).toBe(204)
    // No clock advance: the revocation evicts the tokens' cached results in this process.
    for (const token of [cli.access_token, device.access_token]) {
      const refused = await chat(token)
      expect(refused.status).toBe(401)
      expect((await json(refused)).error.message).toContain('revoked')
    }
    expect((await mcp(mcpFlow.access_token, 'ping')).status).toBe(401)
    for (const flow of [cli, device, mcpFlow]) {
      const refreshed = await refresh(flow)
      expect(refreshed.error).toBe('invalid_grant')
      expect(refreshed.error_description).toContain('revoked')
    }
  })

  test('an expired key: its tokens get 401 (though the tokens have not expired), and refresh fails', async () => {
    const key = await ownerKey({ expiresAtMs: t.clock.now() + 10 * 60_000 })
    const cli = await codeFlowTokens(t, key.secret, 'cli:inference')
    const mcpFlow = await codeFlowTokens(t, key.secret)
    expect((await chat(cli.access_token)).status).toBe(200)
    expect((await mcp(mcpFlow.access_token, 'ping')).status).toBe(200)
    // Before the key expires, refresh works (and the new pair is bounded the same way).
    const rotated = await refresh(cli)
    expect(rotated.access_token).toMatch(/^svc_cli_/)

    t.clock.advance(10 * 60_000)
    expect((await chat(key.secret)).status).toBe(401)
    for (const token of [cli.access_token, rotated.access_token]) {
      const refused = await chat(token)
      expect(refused.status).toBe(401)
      expect((await json(refused)).error.message).toContain('expired')
    }
    expect((await mcp(mcpFlow.access_token, 'ping')).status).toBe(401)
    expect((await refresh({ ...cli, refresh_token: rotated.refresh_token })).error).toBe('invalid_grant')
    expect((await refresh(mcpFlow)).error).toBe('invalid_grant')
  })

  test('expires_in never promises more than the key has left: code flow, device flow and refresh', async () => {
    // Access tokens live 3600 s by default; this key has 10 minutes.
    const key = await ownerKey({ expiresAtMs: t.clock.now() + 10 * 60_000 })
    const code = await codeFlowTokens(t, key.secret, 'cli:inference')
    expect(code.expires_in).toBe(600)
    const device = await json(await pollDevice(t, await approveDevice(t, key.secret)))
    expect(device.expires_in).toBe(600)
    t.clock.advance(4 * 60_000)
    expect((await refresh(code)).expires_in).toBe(360)
    // A key that outlives the TTL leaves the TTL as it is.
    const lasting = await ownerKey({ expiresAtMs: t.clock.now() + 2 * 3_600_000 })
    expect((await codeFlowTokens(t, lasting.secret)).expires_in).toBe(3600)
  })

  test('a key revoked between approval and the token request issues nothing', async () => {
    const key = await ownerKey()
    const deviceCode = await approveDevice(t, key.secret)
    await t.deps.keys.revoke(org.orgId, key.keyId)
    const response = await pollDevice(t, deviceCode)
    expect(response.status).toBe(400)
    expect((await json(response)).error).toBe('invalid_grant')
  })

  test('a grant from before key-bound sign-in (no key recorded) no longer verifies nor refreshes: sign in again', async () => {
    const flow = await codeFlowTokens(t, org.adminKey, 'cli:inference')
    await t.deps.database.client.execute('update oauth_grants set key_id = null')
    expect(await t.deps.oauth.tokens.verify(flow.access_token, true)).toEqual({ ok: false, reason: 'revoked' })
    expect((await chat(flow.access_token)).status).toBe(401)
    expect((await refresh(flow)).error).toBe('invalid_grant')
  })
})
