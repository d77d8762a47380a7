import { afterAll, describe, expect, test } from 'bun:test'
import { checkBinding, type Attestation } from '../../src/client/tee'
import { checkEvidence } from '../../src/providers/attested/evidence'
import { bytesToHex, hexToBytes, normalizeSecpPublicKey, randomBytes } from '../../src/tee/keys'
import { parseProofFormat } from '../../src/tee/proof-format'
import { startSimTeeBackend, type SimFaults } from '../../src/tee/sim/server'

// The client library's checkBinding against the simulator's own reports (no gateway in between,
// so faulty evidence reaches it): it passes on good evidence and fails on every fault.

const sims = [
  startSimTeeBackend({ family: 'nearai' }),
  startSimTeeBackend({ family: 'phala', ecdsaAddressCase: 'checksum' }),
  startSimTeeBackend({ family: 'nearai', tlsFingerprint: bytesToHex(randomBytes(32)), aggregated: true }),
]
afterAll(() => Promise.all(sims.map(sim => sim.stop())))

async function report(sim: (typeof sims)[number], algo: 'ed25519' | 'ecdsa', nonce: string, tls = false) {
  const query = new URLSearchParams({ signing_algo: algo, nonce, ...(tls ? { include_tls_fingerprint: 'true' } : {}) })
  const body = (await (await fetch(`${sim.url}/attestation/report?${query}`, { headers: { authorization: `Bearer ${sim.token}` } })).json()) as Record<string, any>
  return body.model_attestations ? body.model_attestations[0] : body
}

function asAttestation(raw: Record<string, any>, nonce: string, proofFormat: string, algo: 'ed25519' | 'ecdsa'): Attestation {
  const key = algo === 'ecdsa' ? bytesToHex(normalizeSecpPublicKey(raw.signing_public_key) ?? hexToBytes('00')) : raw.signing_public_key
  return {
    object: 'attestation', model: 'm:encrypted', provider_model_id: 'sim/echo-1', privacy_tier: 'encrypted', attestation_available: true, attestation_subject: 'x',
    verified: false, verifier_provenance: '', nonce, proof_format: proofFormat, signing_algo: algo, signing_address: raw.signing_address, signing_key: raw.signing_public_key,
    model_public_key: key, evidence: raw,
  }
}

const FORMATS = ['dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2', 'dstack-tdx-nvgpu.addr-nonce.e2ee-phala.v2', 'dstack-tdx-nvgpu.tlsfp-nonce.e2ee-nearai.v2']

describe('checkBinding', () => {
  for (const [index, format] of FORMATS.entries()) {
    for (const algo of ['ed25519', 'ecdsa'] as const) {
      test(`${format} ${algo}: bound on good evidence, simulated, never hardware-verified; the gateway's checks agree`, async () => {
        const nonce = bytesToHex(randomBytes(32))
        const raw = await report(sims[index]!, algo, nonce, index === 2)
        const result = await checkBinding(asAttestation(raw, nonce, format, algo), nonce)
        expect(result.steps.filter(step => !step.ok)).toEqual([])
        expect(result).toMatchObject({ bound: true, simulated: true, hardwareVerified: false })
        expect(checkEvidence(raw, { nonce, algo, proofFormat: parseProofFormat(format)! }).signingAddress).toBe(raw.signing_address)
        // Another nonce is never bound.
        expect((await checkBinding(asAttestation(raw, nonce, format, algo), bytesToHex(randomBytes(32)))).bound).toBe(false)
      })
    }
  }

  const faults: Array<keyof SimFaults> = ['echoWrongNonce', 'gpuWrongNonce', 'quoteWrongNonce', 'emptyQuote', 'emptyGpuEvidence', 'omitRequestNonce', 'keyAddressMismatch']
  for (const fault of faults) {
    test(`${fault}: not bound, and the gateway's evidence check refuses it too`, async () => {
      const sim = sims[0]!
      sim.state.faults = { [fault]: true }
      try {
        const nonce = bytesToHex(randomBytes(32))
        const raw = await report(sim, 'ecdsa', nonce)
        expect((await checkBinding(asAttestation(raw, nonce, FORMATS[0]!, 'ecdsa'), nonce)).bound).toBe(false)
        expect(() => checkEvidence(raw, { nonce, algo: 'ecdsa', proofFormat: parseProofFormat(FORMATS[0]!)! })).toThrow(/attestation evidence rejected/)
      } finally {
        sim.state.faults = {}
      }
    })
  }

  test('a missing or non-string signing_address: not bound, with a reason naming it, never a TypeError (ecdsa and ed25519)', async () => {
    for (const algo of ['ecdsa', 'ed25519'] as const) {
      const nonce = bytesToHex(randomBytes(32))
      const good = asAttestation(await report(sims[0]!, algo, nonce), nonce, FORMATS[0]!, algo)
      for (const signingAddress of [undefined, null, 42, { hex: good.signing_address }]) {
        const attestation = { ...good, signing_address: signingAddress } as unknown as Attestation
        const result = await checkBinding(attestation, nonce)
        expect(result.bound).toBe(false)
        expect(result.steps.find(step => step.name === 'signing address present')).toEqual({ name: 'signing address present', ok: false, reason: 'signing_address is missing or not a string' })
      }
    }
  })

  test('hardwareVerified needs both injected verifiers to accept', async () => {
    const nonce = bytesToHex(randomBytes(32))
    const attestation = asAttestation(await report(sims[0]!, 'ed25519', nonce), nonce, FORMATS[0]!, 'ed25519')
    expect((await checkBinding(attestation, nonce, { verifyQuote: async () => true, verifyGpu: async () => true })).hardwareVerified).toBe(true)
    expect((await checkBinding(attestation, nonce, { verifyQuote: async () => true })).hardwareVerified).toBe(false)
  })

  test('the tlsfp binding is refused by an addr format, and the reverse', async () => {
    const nonce = bytesToHex(randomBytes(32))
    const raw = await report(sims[2]!, 'ecdsa', nonce, true)
    expect(() => checkEvidence(raw, { nonce, algo: 'ecdsa', proofFormat: parseProofFormat(FORMATS[0]!)! })).toThrow(/does not bind the signing address/)
    const plain = await report(sims[0]!, 'ecdsa', nonce)
    expect(() => checkEvidence(plain, { nonce, algo: 'ecdsa', proofFormat: parseProofFormat(FORMATS[2]!)! })).toThrow(/does not bind/)
  })
})
