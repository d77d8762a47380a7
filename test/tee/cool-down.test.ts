import { describe, expect, test } from 'bun:test'
import { contextFor, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { COOL_DOWN_MS } from '../../src/providers/router'
import { bytesToHex } from '../../src/tee/keys'
import { json } from '../support/harness'
import { type TeeGateway, teeGatewayForFile, TWO_NEAR_BACKENDS } from '../support/tee'

// The router's cool-down applies to every way the gateway reaches an attested backend: a backend
// that failed retryably (here: answering 500) is passed over for COOL_DOWN_MS by Confidential chat,
// GET /api/v1/attestation and the Encrypted relay's key pinning alike, while key pinning still
// reaches it when the client's key is its own (a cooling backend is a last resort, never skipped).

let t: TeeGateway
let key: string
teeGatewayForFile(TWO_NEAR_BACKENDS, {}, session => ({ t, key } = session))

/** Failed attestation fetches of backend `a` (every fetch it answers 500 counts here). */
const failuresOfA = () => {
  const series = 'svc_attestation_failures_total{provider="attested:a",kind="server"} '
  const line = t.deps.metrics.registry.render().split('\n').find(candidate => candidate.startsWith(series))
  return line === undefined ? 0 : Number(line.slice(series.length))
}
const backendA = () => ({ provider: 'a', model: t.sims.a!.modelName })
const confidential = (content: string) => t.request('POST', '/v1/chat/completions', { key, body: { model: 'sim:confidential', messages: [{ role: 'user', content }] } })

async function encryptedTo(attestation: Attestation, content: string): Promise<Response> {
  const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages: [{ role: 'user', content }] }, contextFor(attestation, generateClientKeys('ed25519')))
  return t.request('POST', '/v1/chat/completions', { key, body, headers })
}

describe('cool-down across Confidential chat, attestation and the Encrypted relay', () => {
  test('a backend failing once is passed over by all three until the cool-down ends', async () => {
    t.sims.a!.state.faults = { status500: true }
    // Confidential chat finds `a` failing and falls back to `b`; `a` cools down.
    expect((await confidential('first')).status).toBe(200)
    expect(failuresOfA()).toBe(1)
    expect(t.deps.router.isCoolingDown(backendA())).toBe(true)

    // Nobody asks `a` while it cools: not chat, not the attestation route, not key pinning.
    expect((await confidential('second')).status).toBe(200)
    const attestation: Attestation = await json(await t.request('GET', '/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ed25519', { key }))
    expect(attestation.signing_address).toBe(bytesToHex(t.sims.b!.keys().ed25519.publicKey))
    expect((await encryptedTo(attestation, 'to b')).status).toBe(200)
    expect(t.sims.b!.state.seen.at(-1)!.encrypted).toBe(true)
    expect(failuresOfA()).toBe(1)

    // After the cool-down, `a` is first again (still failing: one more failure, then cooled again).
    t.clock.advance(COOL_DOWN_MS)
    expect((await confidential('third')).status).toBe(200)
    expect(failuresOfA()).toBe(2)
    t.sims.a!.state.faults = {}
  })

  test("key pinning still reaches a cooling backend when the client's key is its own, and its answer ends the cool-down", async () => {
    t.clock.advance(COOL_DOWN_MS)
    // A client attests `a` (by its address) and encrypts to its key.
    const address = bytesToHex(t.sims.a!.keys().ed25519.publicKey)
    const attestation: Attestation = await json(await t.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ed25519&signing_address=${address}`, { key }))
    expect(attestation.signing_address).toBe(address)
    // Then `a` fails once (through the attestation route this time) and comes back while cooling.
    t.sims.a!.state.faults = { status500: true }
    expect((await t.request('GET', '/api/v1/attestation?model=sim:confidential', { key })).status).toBe(200)
    expect(t.deps.router.isCoolingDown(backendA())).toBe(true)
    t.sims.a!.state.faults = {}

    // Key pinning attests the ready `b` first, which does not hold the key, then the cooling `a`,
    // which does and serves.
    const seenA = t.sims.a!.state.seen.length
    const attestedB = t.sims.b!.state.attestations.length
    expect((await encryptedTo(attestation, 'to a')).status).toBe(200)
    expect(t.sims.a!.state.seen.length).toBe(seenA + 1)
    expect(t.sims.a!.state.seen.at(-1)!.plain.messages[0].content).toBe('to a')
    expect(t.sims.b!.state.attestations.length).toBe(attestedB + 1)
    expect(t.deps.router.isCoolingDown(backendA())).toBe(false)
  })

  test('a relay that fails retryably cools its backend down (no fallback: the ciphertext is for that key)', async () => {
    t.clock.advance(COOL_DOWN_MS)
    const attestation: Attestation = await json(await t.request('GET', '/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ed25519', { key }))
    expect(attestation.signing_address).toBe(bytesToHex(t.sims.a!.keys().ed25519.publicKey))
    // The backend attests, then fails the chat: the sim's 500 switch is flipped after the challenge.
    const original = t.sims.a!.state.attestations.push.bind(t.sims.a!.state.attestations)
    t.sims.a!.state.attestations.push = (...items: URLSearchParams[]) => {
      t.sims.a!.state.faults = { status500: true }
      return original(...items)
    }
    try {
      const seenB = t.sims.b!.state.seen.length
      const response = await encryptedTo(attestation, 'to a')
      expect(response.status).toBe(502)
      expect(t.sims.b!.state.seen.length).toBe(seenB)
    } finally {
      t.sims.a!.state.attestations.push = original
      t.sims.a!.state.faults = {}
    }
    expect(t.deps.router.isCoolingDown(backendA())).toBe(true)
  })
})
