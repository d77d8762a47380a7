import { describe, expect, test } from 'bun:test'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { json } from '../support/harness'
import { codeFlowTokens } from '../support/oauth'
import { NEAR_V2, type TeeGateway, teeGatewayForFile } from '../support/tee'
import { connectMcp } from '../support/mcp'

// Encrypted exists only on POST /v1/chat/completions (spec §4.10, issue 8 point 5). Every other
// inference surface refuses an `:encrypted` model and the svc-encrypted headers with 400, on a
// catalog whose `sim:encrypted` and `sim:confidential` are real attested entries bound to the
// simulated TEE backend: nothing is attested, nothing reaches the backend, nothing is billed.
// (The body rules of Encrypted chat itself, including hosted web tools, `uncensored` and
// file/image parts, are in encrypted-rules.test.ts.)

/** What an Encrypted client sends; the shapes are valid, so only the route can refuse them. */
const ENCRYPTED_HEADERS = { 'svc-encrypted': '1', 'svc-encrypted-signing-algo': 'ed25519', 'svc-encrypted-client-pub-key': 'ab'.repeat(32), 'svc-encrypted-model-pub-key': 'cd'.repeat(32) }

let t: TeeGateway
let baseUrl: string
let key: string
let orgId: string
teeGatewayForFile([{ id: 'tee-near', proofFormat: NEAR_V2 }], { models: ['sim', 'other'] }, session => ({ t, key, orgId, baseUrl } = session))

const sim = () => t.sims['tee-near']!

/** Runs `send`, then checks nothing was attested, chatted or billed. */
async function untouched<T>(send: () => Promise<T>): Promise<T> {
  const attested = sim().state.attestations.length
  const seen = sim().state.seen.length
  const before = (await t.deps.balance(orgId)).availableNanos
  const result = await send()
  expect(sim().state.attestations.length).toBe(attested)
  expect(sim().state.seen.length).toBe(seen)
  expect((await t.deps.balance(orgId)).availableNanos).toBe(before)
  return result
}

const ROUTES: Array<{ path: string; body: (model: string) => Record<string, unknown>; anthropic: boolean }> = [
  { path: '/v1/responses', body: model => ({ model, input: 'hello' }), anthropic: false },
  { path: '/v1/responses', body: model => ({ model, input: 'hello', stream: true }), anthropic: false },
  { path: '/v1/messages', body: model => ({ model, max_tokens: 64, messages: [{ role: 'user', content: 'hello' }] }), anthropic: true },
  { path: '/v1/messages', body: model => ({ model, max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'hello' }] }), anthropic: true },
  { path: '/v1/messages/count_tokens', body: model => ({ model, messages: [{ role: 'user', content: 'hello' }] }), anthropic: true },
  { path: '/api/v1/chat/fusion', body: model => ({ models: [model, 'other:confidential'], messages: [{ role: 'user', content: 'hello' }] }), anthropic: false },
]

describe('Encrypted refused outside /v1/chat/completions', () => {
  for (const route of ROUTES) {
    const name = `${route.path}${route.body('m').stream ? ' (stream)' : ''}`
    const cases: Array<[string, string, Record<string, string>, RegExp]> = [
      ['an :encrypted model', 'sim:encrypted', {}, /Encrypted/],
      ['the svc-encrypted headers on a Confidential model', 'sim:confidential', ENCRYPTED_HEADERS, /svc-encrypted headers/],
      ['the svc-encrypted headers on an :encrypted model', 'sim:encrypted', ENCRYPTED_HEADERS, /Encrypted/],
    ]
    for (const [what, model, headers, message] of cases) {
      test(`${name}: ${what} → 400`, async () => {
        const response = await untouched(() => t.request('POST', route.path, { key, body: route.body(model), headers }))
        expect(response.status).toBe(400)
        const body = await json(response)
        if (route.anthropic) {
          expect(body.type).toBe('error')
          expect(body.error.type).toBe('invalid_request_error')
        } else {
          expect(body.error.code).toBe('invalid_request')
        }
        expect(body.error.message).toMatch(message)
      })
    }
  }

  // Before: each answered as if the headers were absent (a page fetched, a file parsed) and billed.
  const PLATFORM: Array<[string, () => unknown]> = [
    ['/api/v1/web/fetch', () => ({ urls: ['https://example.com/'] })],
    ['/api/v1/web/search', () => ({ query: 'bun' })],
    ['/api/v1/attachments/parse', () => {
      const form = new FormData()
      form.append('file', new File(['plain notes'], 'notes.txt'))
      return form
    }],
  ]
  for (const [path, body] of PLATFORM) {
    test(`${path}: the svc-encrypted headers → 400, before any work`, async () => {
      const response = await untouched(() => t.request('POST', path, { key, body: body(), headers: ENCRYPTED_HEADERS }))
      expect(response.status).toBe(400)
      const error = (await json(response)).error
      expect(error.code).toBe('invalid_request')
      expect(error.message).toContain(`not on POST ${path}: remove the svc-encrypted headers`)
    })
  }

  test('the catalog entries are real: the same ids attest and chat where they belong', async () => {
    const attested = await t.request('GET', '/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted', { key })
    expect(attested.status).toBe(200)
    const confidential = await t.request('POST', '/v1/responses', { key, body: { model: 'sim:confidential', input: 'hello' } })
    expect(confidential.status).toBe(200)
    expect(JSON.stringify((await json(confidential)).output)).toContain('echo: hello')
  })
})

describe('MCP svc.chat', () => {
  async function connect(headers: Record<string, string> = {}): Promise<Client> {
    const token = (await codeFlowTokens(t, key)).access_token
    return connectMcp(baseUrl, token, headers)
  }
  const text = (result: Record<string, unknown>) => (result.content as Array<{ text: string }>)[0]!.text

  test('an :encrypted model is refused; the Confidential one of the same model answers', async () => {
    const client = await connect()
    const refused = await untouched(() => client.callTool({ name: 'svc.chat', arguments: { model: 'sim:encrypted', prompt: 'hello' } }))
    expect(refused.isError).toBe(true)
    expect(text(refused)).toContain('encrypted models are not available through MCP')
    const answered = await client.callTool({ name: 'svc.chat', arguments: { model: 'sim:confidential', prompt: 'hello' } })
    expect(answered.isError).toBeFalsy()
    expect((answered.structuredContent as { text: string }).text).toBe('echo: hello')
    await client.close()
  })

  test('a request carrying the svc-encrypted headers is refused, whatever the model', async () => {
    const client = await connect(ENCRYPTED_HEADERS)
    for (const model of ['sim:confidential', 'sim:encrypted', 'demo-anonymous']) {
      const refused = await untouched(() => client.callTool({ name: 'svc.chat', arguments: { model, prompt: 'hello' } }))
      expect(refused.isError).toBe(true)
      expect(text(refused)).toContain('remove the svc-encrypted headers')
    }
    await client.close()
  })

  test('the svc-encrypted headers are refused by every tool, not only svc.chat (QA: svc.chat_fusion ran and billed)', async () => {
    const client = await connect(ENCRYPTED_HEADERS)
    const calls: Array<[string, Record<string, unknown>]> = [
      ['svc.chat_fusion', { models: ['sim:confidential', 'other:confidential'], judge: 'sim:confidential', request_id: crypto.randomUUID(), prompt: 'hello' }],
      ['svc.web_fetch', { urls: ['https://example.com/'] }],
      ['svc.web_search', { query: 'hello' }],
      ['svc.list_models', {}],
    ]
    for (const [name, args] of calls) {
      const refused = await untouched(() => client.callTool({ name, arguments: args }))
      expect(refused.isError).toBe(true)
      expect(text(refused)).toContain(`not on MCP (${name}): remove the svc-encrypted headers`)
    }
    await client.close()
  })
})
