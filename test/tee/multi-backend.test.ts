import { describe, expect, test } from 'bun:test'
import { contextFor, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { createLogger } from '../../src/observability/logger'
import { bytesToHex, ethAddress, randomBytes } from '../../src/tee/keys'
import { json } from '../support/harness'
import { startTeeGateway, type TeeGateway, teeGatewayForFile, TWO_NEAR_BACKENDS } from '../support/tee'

// A model bound to several attested backends: key pinning routes Encrypted requests only to the
// backend attested with the client's key; Confidential calls and attestation pass over a dead one.

let t: TeeGateway
let key: string
teeGatewayForFile(TWO_NEAR_BACKENDS, {}, session => ({ t, key } = session))

describe('several attested backends', () => {
  test('an Encrypted request goes to the backend whose attested key the client encrypted to', async () => {
    const addressB = ethAddress(t.sims.b!.keys().ecdsa.publicKey)
    const attestation: Attestation = await json(await t.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa&signing_address=${addressB}`, { key }))
    expect(attestation.signing_address).toBe(addressB)
    const ctx = contextFor(attestation, generateClientKeys('ecdsa'))
    const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages: [{ role: 'user', content: 'to b' }] }, ctx)
    const seenA = t.sims.a!.state.seen.length
    const response = await t.request('POST', '/v1/chat/completions', { key, body, headers })
    expect(response.status).toBe(200)
    expect(t.sims.a!.state.seen.length).toBe(seenA)
    expect(t.sims.b!.state.seen.at(-1)!.plain.messages[0].content).toBe('to b')
  })

  test('a dead first backend: attestation and Confidential chat use the next one', async () => {
    t.sims.a!.state.faults = { status500: true }
    try {
      const attestation = await json(await t.request('GET', '/api/v1/attestation?model=sim:confidential&signing_algo=ed25519', { key }))
      expect(attestation.signing_address).toBe(bytesToHex(t.sims.b!.keys().ed25519.publicKey))
      const response = await t.request('POST', '/v1/chat/completions', { key, body: { model: 'sim:confidential', messages: [{ role: 'user', content: 'fallback' }] } })
      expect(response.status).toBe(200)
      expect((await json(response)).choices[0].message.content).toBe('echo: fallback')
    } finally {
      t.sims.a!.state.faults = {}
    }
  })

  test('contradicting evidence from the first backend is 503, never hidden by the next', async () => {
    // The dead-backend test above cooled `a` down; once that has passed, `a` is asked first again.
    t.clock.advance(30_000)
    t.sims.a!.state.faults = { quoteWrongNonce: true }
    try {
      expect((await t.request('GET', `/api/v1/attestation?model=sim:confidential&nonce=${bytesToHex(randomBytes(32))}`, { key })).status).toBe(503)
    } finally {
      t.sims.a!.state.faults = {}
    }
  })
})

describe('which backend a refused call names', () => {
  test('a dead first backend, then evidence rejected by the next: the log names the one that rejected, metrics count the dead one', async () => {
    // Before: the log line named no backend (or, after a stream's fallback, the first one), and the
    // first backend's failure was not counted: only an upstream's failure was traced to its backend.
    const lines: Array<Record<string, unknown>> = []
    const g = await startTeeGateway(TWO_NEAR_BACKENDS, { logger: createLogger('info', line => lines.push(JSON.parse(line))) })
    try {
      const orgKey = (await g.createOrg()).adminKey
      g.sims.a!.state.faults = { status500: true }
      g.sims.b!.state.faults = { echoWrongNonce: true }
      const response = await g.request('POST', '/v1/chat/completions', { key: orgKey, body: { model: 'sim:confidential', messages: [{ role: 'user', content: 'hi' }] } })
      expect(response.status).toBe(503)
      expect((await json(response)).error.message).toContain('attestation evidence rejected')
      const line = lines.find(entry => entry.msg === 'request' && entry.route === '/v1/chat/completions')
      expect(line).toMatchObject({ status: 503, backend: `attested:b/${g.sims.b!.modelName}` })
      expect(g.deps.metrics!.upstreamErrors.cell('attested:a', 'server', 'before-first-event').value).toBe(1)
    } finally {
      await g.stopAll()
    }
  })
})

describe('other report shapes', () => {
  test('TLS-fingerprint binding and the aggregator shape (model_attestations) are accepted through the gateway', async () => {
    const fingerprint = bytesToHex(randomBytes(32))
    const g = await startTeeGateway([{ id: 'tls', proofFormat: 'dstack-tdx-nvgpu.tlsfp-nonce.e2ee-nearai.v2', sim: { tlsFingerprint: fingerprint, aggregated: true } }])
    try {
      const orgKey = (await g.createOrg()).adminKey
      const response = await g.request('GET', '/api/v1/attestation?model=sim:confidential&signing_algo=ecdsa', { key: orgKey })
      expect(response.status).toBe(200)
      const body = await json(response)
      expect(body.evidence.tls_cert_fingerprint).toBe(fingerprint)
      expect(g.sims.tls!.state.attestations.at(-1)!.get('include_tls_fingerprint')).toBe('true')
      const chat = await g.request('POST', '/v1/chat/completions', { key: orgKey, body: { model: 'sim:confidential', messages: [{ role: 'user', content: 'tls' }] } })
      expect(chat.status).toBe(200)
    } finally {
      await g.stopAll()
    }
  })
})
