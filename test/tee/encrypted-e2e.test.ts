import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { encryptedChat } from '../../src/client/tee'
import { NEAR_V1, NEAR_V2, PHALA_V1, PHALA_V2, startTeeGateway, type TeeGateway } from '../support/tee'

// End to end: client library → gateway → simulated TEE backend, for every family × version ×
// algorithm, plain and streamed, with tools where the family takes them. What the client
// decrypts is compared with what the backend saw.

const FORMATS = [
  ['near-v1', NEAR_V1],
  ['near-v2', NEAR_V2],
  ['phala-v1', PHALA_V1],
  ['phala-v2', PHALA_V2],
] as const

const gateways: Record<string, { t: TeeGateway; baseUrl: string; key: string; orgId: string }> = {}
beforeAll(async () => {
  for (const [id, format] of FORMATS) {
    // Phala writes EIP-55 mixed-case addresses; the v1 NEAR backend answers with the XChaCha secretbox current NEAR proxies use.
    const sim = { reasoning: true, ...(id.startsWith('phala') ? { ecdsaAddressCase: 'checksum' as const } : {}), ...(id === 'near-v1' ? { nearV1ResponseCipher: 'xchacha-box' as const } : {}) }
    const t = await startTeeGateway([{ id, proofFormat: format, sim }])
    // Phala v2 timestamps come from the client's real clock.
    t.clock.set(Date.now())
    const org = await t.createOrg()
    gateways[id] = { t, baseUrl: t.listen(), key: org.adminKey, orgId: org.orgId }
  }
})
afterAll(async () => {
  for (const { t } of Object.values(gateways)) await t.stopAll()
})

describe('Encrypted chat end to end', () => {
  for (const [id] of FORMATS) {
    for (const algo of ['ed25519', 'ecdsa'] as const) {
      for (const stream of [false, true]) {
        test(`${id} ${algo} ${stream ? 'streamed' : 'plain'}`, async () => {
          const { t, baseUrl, key, orgId } = gateways[id]!
          const sim = t.sims[id]!
          const before = (await t.deps.balance(orgId)).availableNanos
          const result = await encryptedChat({
            baseUrl, apiKey: key, model: 'sim:encrypted', algo, stream,
            messages: [{ role: 'system', content: 'be terse' }, { role: 'user', content: `secret question ${id} ${algo} ünïcode` }],
          })
          expect(result.binding.bound).toBe(true)
          expect(result.binding.simulated).toBe(true)
          expect(result.binding.hardwareVerified).toBe(false)
          const seen = sim.state.seen.at(-1)!
          expect(seen.encrypted).toBe(true)
          expect(seen.plain.model).toBe('sim/echo-1')
          expect(seen.plain.messages.map((message: any) => message.content)).toEqual(['be terse', `secret question ${id} ${algo} ünïcode`])
          // The ciphertext crossed the gateway: the backend received no plaintext.
          expect(seen.rawBody).not.toContain('secret question')
          expect(result.content).toBe(seen.replyPlain.content)
          expect(result.reasoning).toBe(seen.replyPlain.reasoning!)
          expect(result.usage?.completion_tokens).toBeGreaterThan(0)
          const after = (await t.deps.balance(orgId)).availableNanos
          expect(after).toBeLessThan(before)
        })
      }
    }
  }

  for (const id of ['near-v1', 'near-v2'] as const) {
    for (const algo of ['ed25519', 'ecdsa'] as const) {
      for (const stream of [false, true]) {
        test(`${id} ${algo} ${stream ? 'streamed' : 'plain'} with encrypted function tools`, async () => {
          const { t, baseUrl, key } = gateways[id]!
          const sim = t.sims[id]!
          const result = await encryptedChat({
            baseUrl, apiKey: key, model: 'sim:encrypted', algo, stream,
            messages: [{ role: 'user', content: 'weather in Paris?' }],
            tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }],
          })
          const seen = sim.state.seen.at(-1)!
          expect(seen.plain.tools[0].function).toEqual({ name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { q: { type: 'string' } } } })
          expect(seen.rawBody).not.toContain('get_weather')
          expect(seen.headers['x-encrypt-all-fields']).toBe('true')
          expect(result.toolCalls).toHaveLength(1)
          expect(result.toolCalls[0]).toMatchObject({ name: 'get_weather', arguments: '{"q":"weather in Paris?"}' })
        })
      }
    }
  }
})

describe('Encrypted chat end to end: reasoning sent as `reasoning` (vLLM\'s newer name)', () => {
  // NEAR encrypts `reasoning` as it does reasoning_content; Phala does not encrypt it (TEE-PROTOCOL.md A2).
  const REASONING = [['near-v2', NEAR_V2], ['phala-v2', PHALA_V2]] as const
  const reasoningGateways: Record<string, { t: TeeGateway; baseUrl: string; key: string; orgId: string }> = {}
  beforeAll(async () => {
    for (const [id, format] of REASONING) {
      const t = await startTeeGateway([{ id, proofFormat: format, sim: { reasoning: true, reasoningField: 'reasoning' } }])
      t.clock.set(Date.now())
      const org = await t.createOrg()
      reasoningGateways[id] = { t, baseUrl: t.listen(), key: org.adminKey, orgId: org.orgId }
    }
  })
  afterAll(async () => {
    for (const { t } of Object.values(reasoningGateways)) await t.stopAll()
  })

  for (const [id] of REASONING) {
    for (const algo of ['ed25519', 'ecdsa'] as const) {
      for (const stream of [false, true]) {
        test(`${id} ${algo} ${stream ? 'streamed' : 'plain'}: the client library reads it decrypted`, async () => {
          const { t, baseUrl, key } = reasoningGateways[id]!
          const result = await encryptedChat({ baseUrl, apiKey: key, model: 'sim:encrypted', algo, stream, messages: [{ role: 'user', content: 'think first' }] })
          const seen = t.sims[id]!.state.seen.at(-1)!
          expect(result.reasoning).toBe('thinking about: think first')
          expect(result.reasoning).toBe(seen.replyPlain.reasoning!)
          expect(result.content).toBe(seen.replyPlain.content)
        })
      }
    }
  }

  test('without a usage from the backend, the gateway bills `reasoning` as output (estimated from its ciphertext)', async () => {
    const { t, baseUrl, key, orgId } = reasoningGateways['near-v2']!
    // blankAnswer: content "" and no usage; only the reasoning was output.
    t.sims['near-v2']!.state.faults = { blankAnswer: true }
    try {
      for (const stream of [false, true]) {
        const before = (await t.deps.balance(orgId)).availableNanos
        const result = await encryptedChat({ baseUrl, apiKey: key, model: 'sim:encrypted', stream, messages: [{ role: 'user', content: 'relay me' }] })
        expect(result.reasoning).toBe('thinking about: relay me')
        // Input from the envelope: ceil(8 bytes / 4) + 4 per message = 6 tokens at 1 USD/M; output:
        // the 24 bytes of reasoning, 6 tokens at 2 USD/M (before, 0: only the input was charged).
        expect(before - (await t.deps.balance(orgId)).availableNanos).toBe(6_000n + 12_000n)
      }
    } finally {
      t.sims['near-v2']!.state.faults = {}
    }
  })
})
