// The simulated TEE backend (TEE-PROTOCOL.md B5): `svc dev-tee` and the tests run it on
// loopback. Real keys and real ciphers; a quote that binds address and nonce but that no real
// verifier accepts; switches for every fault the gateway must catch.

import { bytesToHex, ed25519, isHex, keyPairFrom, randomBytes, secp256k1, signingIdentity, type SigningAlgo } from '../keys'
import { handleChat, type ChatDeps } from './chat'
import { buildReport } from './report'
import type { SeenChat, SimKeys, SimOptions, SimState } from './types'

export type { SimFaults, SimOptions, SimState } from './types'

export interface SimTeeBackend {
  /** Base URL including `/v1` (what a provider's base_url is set to). */
  readonly url: string
  readonly token: string
  readonly modelName: string
  readonly family: 'nearai' | 'phala'
  readonly state: SimState
  /** The current keys (they change with rotateKeys). */
  keys(): SimKeys
  stop(): Promise<void>
}

function makeKeys(options: SimOptions): SimKeys {
  return {
    ed25519: keyPairFrom('ed25519', options.ed25519Seed ?? ed25519.utils.randomSecretKey()),
    ecdsa: keyPairFrom('ecdsa', options.secp256k1Secret ?? secp256k1.utils.randomSecretKey()),
  }
}

export function startSimTeeBackend(options: SimOptions = {}): SimTeeBackend {
  const family = options.family ?? 'nearai'
  const modelName = options.modelName ?? 'sim/echo-1'
  const token = options.token ?? bytesToHex(randomBytes(16))
  const now = options.now ?? (() => Date.now())
  let keys = makeKeys(options)
  const seen: SeenChat[] = []
  const attestations: URLSearchParams[] = []
  const state: SimState = {
    faults: { ...options.faults },
    get keys() {
      return keys
    },
    seen,
    attestations,
    rotateKeys() {
      keys = makeKeys({})
    },
  }
  const addresses = () => ({ ed25519: signingIdentity(keys.ed25519).address, ecdsa: signingIdentity(keys.ecdsa).address })
  const chatDeps: ChatDeps = {
    family, modelName, options, now, seen, keys: () => keys, faults: () => state.faults, addresses,
    signatures: new Map(), replay: new Map(), counter: { value: 0 },
  }

  const error = (status: number, message: string) => Response.json({ error: { message, type: status === 404 ? 'not_found' : 'bad_request' } }, { status })

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: options.port ?? 0,
    idleTimeout: 0,
    async fetch(request) {
      const url = new URL(request.url)
      if (state.faults.latencyMs) await Bun.sleep(state.faults.latencyMs)
      if (state.faults.status500) return error(500, 'simulated failure')
      if (request.method === 'GET' && url.pathname === '/v1/models') return Response.json({ object: 'list', data: [{ id: modelName, object: 'model' }] })
      if (request.headers.get('authorization') !== `Bearer ${token}`) return Response.json({ error: { message: 'unauthorized', type: 'auth' } }, { status: 401 })
      if (request.method === 'GET' && url.pathname === '/v1/attestation/report') return attestation(url.searchParams)
      if (request.method === 'POST' && url.pathname === '/v1/chat/completions') return handleChat(chatDeps, request)
      const signature = /^\/v1\/signature\/([^/]+)$/.exec(url.pathname)
      if (request.method === 'GET' && signature) {
        const algo = (url.searchParams.get('signing_algo') ?? 'ecdsa') as SigningAlgo
        const record = chatDeps.signatures.get(decodeURIComponent(signature[1]!))
        if (!record || (algo !== 'ecdsa' && algo !== 'ed25519')) return error(404, 'signature not found')
        return Response.json({ text: record.text, signature: record[algo], signing_address: record.addresses[algo], signing_algo: algo })
      }
      return error(404, 'not found')
    },
  })

  function attestation(query: URLSearchParams): Response {
    attestations.push(query)
    const algo = query.get('signing_algo') ?? 'ecdsa'
    if (algo !== 'ecdsa' && algo !== 'ed25519') return error(400, 'invalid signing_algo')
    const given = query.get('nonce')
    if (given !== null && !isHex(given, 32)) return error(400, 'nonce must be 32 bytes of hex')
    const nonce = (given ?? bytesToHex(randomBytes(32))).toLowerCase()
    const address = signingIdentity(keys[algo]).address
    const asked = query.get('signing_address')
    if (asked !== null && asked.toLowerCase() !== address.toLowerCase()) return error(404, 'signing address not served here')
    const tls = query.get('include_tls_fingerprint') === 'true' ? options.tlsFingerprint : undefined
    const report = buildReport({
      family, modelName, algo, keys: keys[algo], nonce, tlsFingerprint: tls, faults: state.faults,
      eventLogAs: options.eventLogAs ?? (family === 'nearai' ? 'array' : 'string'), addressCase: options.ecdsaAddressCase ?? 'lower',
    })
    if (options.aggregated) return Response.json({ gateway_attestation: { signing_address: '0x' + '0'.repeat(40) }, model_attestations: [report] })
    return Response.json({ ...report, all_attestations: [report] })
  }

  return {
    url: `http://127.0.0.1:${server.port}/v1`,
    token,
    modelName,
    family,
    state,
    keys: () => keys,
    async stop() {
      await server.stop(true)
    },
  }
}

