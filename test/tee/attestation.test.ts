import { describe, expect, test } from 'bun:test'
import { bytesToHex, ethAddress, hexToBytes, randomBytes } from '../../src/tee/keys'
import { readQuote } from '../../src/tee/quote'
import { json } from '../support/harness'
import { NEAR_V2, PHALA_V2, startTeeGateway, type TeeGateway, teeGatewayForFile } from '../support/tee'

let t: TeeGateway
let key: string
teeGatewayForFile([
  { id: 'tee-near', proofFormat: NEAR_V2 },
  { id: 'tee-phala', proofFormat: PHALA_V2, sim: { ecdsaAddressCase: 'checksum' } },
], { confidential: ['tee-near'], encrypted: ['tee-near'] }, session => ({ t, key } = session))

const get = (query: string) => t.request('GET', `/api/v1/attestation${query}`, { key })
const nonce = () => bytesToHex(randomBytes(32))

describe('GET /api/v1/attestation: happy', () => {
  test('confidential: the spec 2.4 object, bound to our nonce, no-store, nothing verified', async () => {
    const n = nonce().toUpperCase()
    const response = await get(`?model=sim:confidential&nonce=${n}`)
    expect(response.status).toBe(200)
    expect(response.headers.get('cache-control')).toBe('no-store')
    const body = await json(response)
    const sim = t.sims['tee-near']!
    expect(body).toMatchObject({
      object: 'attestation', model: 'sim:confidential', provider_model_id: 'sim/echo-1', privacy_tier: 'confidential',
      attestation_available: true, attestation_subject: 'sim/echo-1', verified: false, verifier_provenance: '',
      nonce: n.toLowerCase(), proof_format: NEAR_V2, signing_algo: 'ed25519',
    })
    const pub = bytesToHex(sim.keys().ed25519.publicKey)
    expect(body.signing_address).toBe(pub)
    expect(body.model_public_key).toBe(pub)
    expect(body.evidence.request_nonce).toBe(n.toLowerCase())
    expect(body.evidence.all_attestations).toBeUndefined()
    const quote = readQuote(hexToBytes(body.evidence.intel_quote))!
    expect(bytesToHex(quote.reportData.subarray(32))).toBe(n.toLowerCase())
    expect(quote.debug && quote.zeroQeVendor).toBe(true)
    // The backend saw our nonce, never a cached report.
    expect(sim.state.attestations.at(-1)!.get('nonce')).toBe(n.toLowerCase())
  })

  test('a nonce is generated when absent: 64 hex, different each time', async () => {
    const a = await json(await get('?model=sim:confidential'))
    const b = await json(await get('?model=sim:confidential'))
    expect(a.nonce).toMatch(/^[0-9a-f]{64}$/)
    expect(a.nonce).not.toBe(b.nonce)
  })

  test('encrypted + ecdsa: model_public_key is 130 hex 04…, hashing to the signing address; signing_key verbatim', async () => {
    const response = await get(`?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa&nonce=${nonce()}`)
    expect(response.status).toBe(200)
    const body = await json(response)
    expect(body.privacy_tier).toBe('encrypted')
    expect(body.model_public_key).toMatch(/^04[0-9a-f]{128}$/)
    expect(body.signing_key).toMatch(/^[0-9a-f]{128}$/)
    expect(ethAddress(hexToBytes(body.model_public_key))).toBe(body.signing_address)
  })

  test('signing_address is forwarded: the served one answers, another is 404', async () => {
    const address = ethAddress(t.sims['tee-near']!.keys().ecdsa.publicKey)
    expect((await get(`?model=sim:confidential&signing_algo=ecdsa&signing_address=${address.toUpperCase().replace('0X', '0x')}`)).status).toBe(200)
    expect(t.sims['tee-near']!.state.attestations.at(-1)!.get('signing_address')).toBe(address.toUpperCase().replace('0X', '0x'))
    // Without signing_algo, a 0x address is an ecdsa signer's (before: looked for under the
    // backend's first algorithm, ed25519, and 404).
    const implied = await get(`?model=sim:confidential&signing_address=${address}`)
    expect(implied.status).toBe(200)
    expect((await json(implied)).signing_algo).toBe('ecdsa')
    const missing = await get(`?model=sim:confidential&signing_algo=ecdsa&signing_address=0x${'1'.repeat(40)}`)
    expect(missing.status).toBe(404)
    expect((await json(missing)).error.code).toBe('not_found')
  })

  test('without signing_algo, an address that is not 0x is an ed25519 signer\'s, whatever the backend lists first (QA: 404)', async () => {
    const g = await startTeeGateway([{ id: 'ecdsa-first', proofFormat: NEAR_V2, signingAlgos: ['ecdsa', 'ed25519'] }])
    try {
      const ownKey = (await g.createOrg()).adminKey
      const address = bytesToHex(g.sims['ecdsa-first']!.keys().ed25519.publicKey)
      const response = await g.request('GET', `/api/v1/attestation?model=sim:confidential&signing_address=${address}`, { key: ownKey })
      expect(response.status).toBe(200)
      const body = await json(response)
      expect(body.signing_algo).toBe('ed25519')
      expect(body.signing_address).toBe(address)
      expect(g.sims['ecdsa-first']!.state.attestations.at(-1)!.get('signing_algo')).toBe('ed25519')
    } finally {
      await g.stopAll()
    }
  })
})

describe('GET /api/v1/attestation: errors', () => {
  const before = () => t.sims['tee-near']!.state.attestations.length
  test.each([
    ['?model=sim:confidential&extra=1', 'extra'],
    ['?model=sim:confidential&model=sim:confidential', 'model'],
    ['', 'model'],
    ['?model=sim:confidential&nonce=abc', 'nonce'],
    [`?model=sim:confidential&nonce=${'g'.repeat(64)}`, 'nonce'],
    [`?model=sim:confidential&nonce=${'a'.repeat(66)}`, 'nonce'],
    ['?model=sim:confidential&signing_algo=rsa', 'signing_algo'],
    ['?model=sim:confidential&trust_tier=private', 'trust_tier'],
    ['?model=nope:confidential', 'model'],
    ['?model=sim', 'model'],
    ['?model=demo-anonymous', 'model'],
    ['?model=demo-anonymous:confidential', 'model'],
    ['?model=sim:encrypted', 'trust_tier'],
    ['?model=sim:confidential&trust_tier=encrypted', 'trust_tier'],
  ])('%s → 400 naming %s, before any backend call', async (query, param) => {
    const calls = before()
    const response = await get(query)
    expect(response.status).toBe(400)
    const body = await json(response)
    expect(body.error.code).toBe('invalid_request')
    expect(body.error.param).toBe(param)
    expect(before()).toBe(calls)
  })

  test('query names are checked in the same words as every other route (src/http/query.ts)', async () => {
    const unknown = await json(await get('?model=sim:confidential&extra=1'))
    expect(unknown.error.message).toBe('unknown query parameter "extra" (model, trust_tier, nonce, signing_address and signing_algo are accepted)')
    const twice = await json(await get('?model=sim:confidential&nonce=' + nonce() + '&nonce=' + nonce()))
    expect(twice.error).toMatchObject({ param: 'nonce', message: 'nonce may be given once' })
  })

  test('needs a credential', async () => {
    expect((await t.request('GET', '/api/v1/attestation?model=sim:confidential')).status).toBe(401)
  })
})

describe('GET /api/v1/attestation: faults → 503 unavailable', () => {
  const faults = ['echoWrongNonce', 'gpuWrongNonce', 'quoteWrongNonce', 'emptyQuote', 'emptyGpuEvidence', 'omitRequestNonce', 'wrongAlgoEcho', 'keyAddressMismatch', 'status500'] as const
  for (const fault of faults) {
    for (const algo of ['ed25519', 'ecdsa'] as const) {
      test(`${fault} (${algo})`, async () => {
        const sim = t.sims['tee-near']!
        sim.state.faults = { [fault]: true }
        try {
          const response = await get(`?model=sim:confidential&signing_algo=${algo}&nonce=${nonce()}`)
          expect(response.status).toBe(503)
          expect((await json(response)).error.code).toBe('unavailable')
        } finally {
          sim.state.faults = {}
        }
      })
    }
  }

  test('an unreachable backend is 503', async () => {
    const dead = await startTeeGateway([{ id: 'tee-dead', proofFormat: NEAR_V2 }])
    await dead.sims['tee-dead']!.stop()
    const org = await dead.createOrg()
    const response = await dead.request('GET', '/api/v1/attestation?model=sim:confidential', { key: org.adminKey })
    expect(response.status).toBe(503)
    await dead.close()
  })
})

describe('catalog: the suffix levels of attested models', () => {
  test('GET /v1/models?privacy_tier=encrypted|confidential lists them; /api/v1/models shows every level', async () => {
    const encrypted = await json(await t.request('GET', '/v1/models?privacy_tier=encrypted'))
    expect(encrypted.data.map((entry: any) => [entry.id, entry.privacy_level])).toEqual([['sim:encrypted', 'encrypted']])
    const confidential = await json(await t.request('GET', '/v1/models?privacy_tier=confidential'))
    expect(confidential.data.map((entry: any) => entry.id)).toEqual(['sim:confidential'])
    const api = await json(await t.request('GET', '/api/v1/models?privacy_tier=encrypted'))
    expect(api.data.map((entry: any) => [entry.id, entry.privacy_levels])).toEqual([['sim', ['anonymous', 'confidential', 'encrypted']]])
    const all = await json(await t.request('GET', '/v1/models'))
    expect(all.data.map((entry: any) => entry.id)).toEqual(['demo-anonymous', 'sim', 'sim:confidential', 'sim:encrypted'])
  })
})

describe('OpenAPI', () => {
  test('GET /api/v1/attestation is documented with its query parameters and error statuses', async () => {
    const spec = await json(await t.request('GET', '/openapi.json'))
    const operation = spec.paths['/api/v1/attestation'].get
    expect(operation.summary).toBeTruthy()
    expect(operation.parameters.map((parameter: any) => parameter.name)).toEqual(['model', 'trust_tier', 'nonce', 'signing_address', 'signing_algo', 'X-Org-ID'])
    expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '404', '503']))
    expect(spec.paths['/v1/chat/completions'].post.description).toContain('svc-encrypted')
  })
})
