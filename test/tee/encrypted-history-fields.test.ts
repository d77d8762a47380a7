import { describe, expect, test } from 'bun:test'
import { contextFor, encryptChatRequest, encryptField, generateClientKeys, type Attestation, type E2eeContext } from '../../src/client/tee'
import { json } from '../support/harness'
import { NEAR_V2, PHALA_V1, PHALA_V2, gatewaysPerFormat, type FormatGateway } from '../support/tee'

// History fields besides content (reasoning_content, reasoning, refusal) go only where the
// backend decrypts them (TEE-PROTOCOL.md A2): Phala decrypts only content, NEAR `refusal` only
// with all-fields. Before, the gateway and the client library sent them as ciphertext to every
// family, so a Phala model read hex as the previous turn's reasoning; and the simulator never
// decrypted a NEAR all-fields `refusal`.

type Json = Record<string, any>
type Setup = FormatGateway
const setups = gatewaysPerFormat([['near2', NEAR_V2], ['phala2', PHALA_V2], ['phala1', PHALA_V1]] as const)

async function context(name: string): Promise<E2eeContext> {
  const s = setups[name]!
  const attestation: Attestation = await json(await s.t.request('GET', '/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa', { key: s.key }))
  return contextFor(attestation, generateClientKeys('ecdsa'))
}

const history = (assistant: Json): Json[] => [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello', ...assistant }, { role: 'user', content: 'again' }]

async function send(name: string, body: Json, headers: Record<string, string>) {
  const s = setups[name]!
  const seen = s.t.sims[name]!.state.seen.length
  const before = (await s.t.deps.balance(s.orgId)).availableNanos
  const response = await s.t.request('POST', '/v1/chat/completions', { key: s.key, body, headers })
  return { response, body: await json(response), reached: s.t.sims[name]!.state.seen.length > seen, charged: (await s.t.deps.balance(s.orgId)).availableNanos !== before }
}

describe('Encrypted history fields the backend does not decrypt', () => {
  for (const name of ['phala2', 'phala1']) {
    for (const field of ['reasoning_content', 'reasoning', 'refusal']) {
      test(`${name}: a ciphertext ${field} is refused by the gateway, naming it, before the backend`, async () => {
        const ctx = await context(name)
        // What a client that encrypts every field sends (the library did, for reasoning).
        const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages: history({}) }, ctx)
        body.messages[1][field] = encryptField('I thought about it', ctx, { messageIndex: 1 })
        const sent = await send(name, body, headers)
        expect(sent.response.status).toBe(400)
        expect(sent.body.error).toMatchObject({ code: 'invalid_request', param: `messages.1.${field}` })
        expect(sent.body.error.message).toMatch(/Phala-family backends decrypt only message content.*omit it/)
        expect([sent.reached, sent.charged]).toEqual([false, false])
      })
    }
  }

  test('phala2: the client library refuses them too, and passes a null refusal (as SDK replies carry)', async () => {
    const ctx = await context('phala2')
    for (const field of ['reasoning_content', 'reasoning', 'refusal']) {
      expect(() => encryptChatRequest({ model: 'sim:encrypted', messages: history({ [field]: 'thought' }) }, ctx)).toThrow(`messages[1].${field} cannot be sent: Phala-family backends decrypt only message content`)
    }
    const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages: history({ refusal: null }) }, ctx)
    const sent = await send('phala2', body, headers)
    expect(sent.response.status).toBe(200)
    expect(setups.phala2!.t.sims.phala2!.state.seen.at(-1)!.plain.messages[1]).toEqual({ role: 'assistant', content: 'hello', refusal: null })
  })

  test('near2: refusal needs all-fields, in the gateway and in the client library', async () => {
    const ctx = await context('near2')
    expect(() => encryptChatRequest({ model: 'sim:encrypted', messages: history({ refusal: 'no' }) }, ctx)).toThrow('messages[1].refusal cannot be sent: NEAR-family backends decrypt refusal only with svc-encrypted-encrypt-all-fields: 1')
    const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages: history({}) }, ctx)
    body.messages[1].refusal = encryptField('no', ctx)
    const sent = await send('near2', body, headers)
    expect(sent.response.status).toBe(400)
    expect(sent.body.error).toMatchObject({ code: 'invalid_request', param: 'messages.1.refusal' })
    expect([sent.reached, sent.charged]).toEqual([false, false])
  })

  test('near2 with all-fields: the library encrypts refusal and the backend reads it; reasoning always', async () => {
    const ctx = await context('near2')
    const messages = history({ reasoning_content: 'mulling', reasoning: 'mulling', refusal: 'I would rather not' })
    const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages }, ctx, { encryptAllFields: true })
    expect(body.messages[1].refusal).toMatch(/^04[0-9a-f]+$/)
    const sent = await send('near2', body, headers)
    expect(sent.response.status).toBe(200)
    expect(setups.near2!.t.sims.near2!.state.seen.at(-1)!.plain.messages[1]).toEqual({ role: 'assistant', ...messages[1] })
    // Without all-fields NEAR still decrypts the reasoning fields.
    const plain = encryptChatRequest({ model: 'sim:encrypted', messages: history({ reasoning_content: 'mulling' }) }, ctx)
    expect((await send('near2', plain.body, plain.headers)).response.status).toBe(200)
    expect(setups.near2!.t.sims.near2!.state.seen.at(-1)!.plain.messages[1]).toEqual({ role: 'assistant', content: 'hello', reasoning_content: 'mulling' })
  })
})
