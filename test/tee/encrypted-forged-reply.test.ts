import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { encryptedChat } from '../../src/client/tee'
import type { SigningAlgo } from '../../src/tee/keys'
import { FORGED, startForgingRelay, type ForgingRelay, type Forgery } from '../support/forging-relay'
import { NEAR_V2, PHALA_V2, gatewaysPerFormat } from '../support/tee'

// QA: a reply is encrypted to the client's public key, which every relay sees, so anyone on the
// path (the gateway included) can write one that decrypts. encryptedChat took such a forgery
// as the model's answer. Only the backend's signature, by the attested address over the exact
// request and reply bytes, shows the TEE wrote it: a non-streamed call now asks for it and
// refuses a reply it does not cover.

const setups = gatewaysPerFormat([['near2', NEAR_V2], ['phala2', PHALA_V2]] as const)

const relays: Record<string, ForgingRelay> = {}
beforeAll(() => {
  for (const [name, format] of [['near2', NEAR_V2], ['phala2', PHALA_V2]] as const) relays[name] = startForgingRelay(setups[name]!.t.listen(), format, setups[name]!.t.sims[name]!.modelName)
})
afterAll(() => {
  for (const relay of Object.values(relays)) relay.stop()
})

function chatVia(name: string, forgery: Forgery, algo: SigningAlgo, stream = false) {
  const relay = relays[name]!
  relay.state.forgery = forgery
  return encryptedChat({ baseUrl: relay.url, apiKey: setups[name]!.key, model: 'sim:encrypted', algo, stream, messages: [{ role: 'user', content: 'the real question' }] })
}

describe('encryptedChat through a relay that forges the reply', () => {
  for (const name of ['near2', 'phala2']) {
    for (const algo of ['ecdsa', 'ed25519'] as const) {
      test(`${name} ${algo}: an honest relay's reply verifies and is the backend's`, async () => {
        const result = await chatVia(name, 'none', algo)
        expect(result).toMatchObject({ authenticated: true, content: 'echo: the real question' })
        expect(setups[name]!.t.sims[name]!.state.seen.at(-1)!.headers['x-request-hash']).toMatch(/^[0-9a-f]{64}$/)
      })

      test(`${name} ${algo}: a forged reply is refused, with the evidence forged to match, signed by another key, or stripped`, async () => {
        await expect(chatVia(name, 'reply-and-evidence', algo)).rejects.toThrow('the reply is not authenticated, so it was refused: the signed response hash is not that of the reply bytes')
        await expect(chatVia(name, 'own-signature', algo)).rejects.toThrow(/^the reply is not authenticated, so it was refused: it is signed by \S+, not the attested signing address /)
        await expect(chatVia(name, 'strip-evidence', algo)).rejects.toThrow('the reply is not authenticated, so it was refused: it carries no svc_response_evidence')
      })

      test(`${name} ${algo}: a reply forged outside the evidence is ignored: the signed bytes are what is decrypted`, async () => {
        expect((await chatVia(name, 'reply', algo)).content).toBe('echo: the real question')
      })

      test(`${name} ${algo}: the backend's genuine, signed answer to the relay's own question is refused`, async () => {
        await expect(chatVia(name, 'question', algo)).rejects.toThrow('the signed request hash is not that of the request sent')
        expect(setups[name]!.t.sims[name]!.state.seen.at(-1)!.plain.messages.at(-1).content).toBe('FORGED QUESTION')
      })
    }
  }

  test('a backend without a signature for the reply: refused, naming why', async () => {
    const sim = setups.near2!.t.sims.near2!
    sim.state.faults = { dropSignature: true }
    try {
      await expect(chatVia('near2', 'none', 'ecdsa')).rejects.toThrow("the backend's signature is not available (the backend has no signature for this response)")
    } finally {
      sim.state.faults = {}
    }
  })

  test('a stream cannot be checked: a forged one is read as it comes, and the result says it is not authenticated', async () => {
    const result = await chatVia('near2', 'reply', 'ed25519', true)
    expect(result).toMatchObject({ authenticated: false, content: FORGED })
  })
})
