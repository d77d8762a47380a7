// The simulated backend's attestation report (TEE-PROTOCOL.md B5): the real report shapes
// around a fake quote that binds address and nonce and is marked so no real verifier accepts it
// (zero QE vendor id, DEBUG attribute, no signature data).

import { sha256, sha384 } from '@noble/hashes/sha2.js'
import { buildReportData, expectedBindingHalf } from '../binding'
import { keccak_256 } from '@noble/hashes/sha3.js'
import { bytesToHex, generateKeyPair, hexToBytes, randomBytes, signingIdentity, type SigningAlgo } from '../keys'
import type { KeyPair } from '../keys'
import { TD10 } from '../quote'
import type { SimFaults } from './types'

const utf8 = new TextEncoder()
const hash384 = (label: string) => sha384(utf8.encode(label))

export const SIM_APP_COMPOSE = JSON.stringify({
  docker_compose_file: `services:\n  sim: {image: sim@sha256:${'0'.repeat(64)}}\n`,
  manifest_version: 2,
  name: 'sim',
  runner: 'docker-compose',
})
export const SIM_COMPOSE_HASH = bytesToHex(sha256(utf8.encode(SIM_APP_COMPOSE)))

/** 636 bytes: v4 header, TD10 body, a zero signature-data length. */
export function simulatedQuote(reportData: Uint8Array): Uint8Array {
  const quote = new Uint8Array(TD10.HEADER + TD10.BODY_SIZE + 4)
  const view = new DataView(quote.buffer)
  view.setUint16(0, 4, true) // version
  view.setUint16(2, 2, true) // attestation key type: ECDSA-P256
  view.setUint32(4, 0x81, true) // TEE type: TDX
  // qe_svn, pce_svn 0; qe_vendor_id (12..28) all zero: a real Intel QE id is not.
  quote.set(utf8.encode('SIMULATED-TEE-QUOTE'), 28) // user_data, NUL padded to 20 bytes
  const body = TD10.HEADER
  quote[body + TD10.TD_ATTRIBUTES] = 1 // DEBUG: any real policy fails closed
  quote.set(hash384('sim-mrtd'), body + TD10.MRTD)
  quote.set(Uint8Array.from([1, ...hexToBytes(SIM_COMPOSE_HASH)]), body + TD10.MR_CONFIG_ID)
  for (let index = 0; index < 4; index++) quote.set(hash384(`sim-rtmr${index}`), body + TD10.RTMR0 + index * 48)
  quote.set(reportData, body + TD10.REPORT_DATA)
  return quote
}

export interface ReportInput {
  readonly family: 'nearai' | 'phala'
  readonly modelName: string
  readonly algo: SigningAlgo
  readonly keys: KeyPair
  readonly nonce: string
  readonly tlsFingerprint?: string
  readonly eventLogAs: 'array' | 'string'
  /** ecdsa addresses: lowercase (NEAR) or EIP-55 mixed case (as Phala writes them). */
  readonly addressCase: 'lower' | 'checksum'
  readonly faults: SimFaults
}

function base64(text: string): string {
  return Buffer.from(text).toString('base64')
}

/** One flat backend report (NEAR-proxy / Phala-proxy shape), faults applied. */
export function buildReport(input: ReportInput): Record<string, unknown> {
  const { faults } = input
  let identity = signingIdentity(input.keys)
  const otherNonce = bytesToHex(randomBytes(32))
  const binding = input.tlsFingerprint ? 'tlsfp' : 'addr'
  const reportData = buildReportData(
    expectedBindingHalf(binding, input.algo, identity.address, input.tlsFingerprint)!,
    hexToBytes(faults.quoteWrongNonce ? otherNonce : input.nonce),
  )
  if (faults.keyAddressMismatch) {
    // The key reported is not the one the address (and so the quote) names.
    const other = signingIdentity(generateKeyPair(input.algo))
    identity = { address: identity.address, publicKeyHex: other.publicKeyHex }
  }
  const gpuNonce = faults.gpuWrongNonce ? otherNonce : input.nonce
  const nvidia = faults.emptyGpuEvidence
    ? JSON.stringify({ nonce: gpuNonce, evidence_list: [], arch: 'HOPPER' })
    : JSON.stringify({ nonce: gpuNonce, evidence_list: [{ certificate: base64('SIMULATED'), evidence: base64('SIMULATED'), arch: 'HOPPER' }], arch: 'HOPPER' })
  const eventLog = [{ imr: 3, event_type: 134217729, digest: SIM_COMPOSE_HASH.padEnd(96, '0'), event: 'compose-hash', event_payload: SIM_COMPOSE_HASH }]
  const tcb = {
    mrtd: bytesToHex(hash384('sim-mrtd')),
    rtmr0: bytesToHex(hash384('sim-rtmr0')),
    rtmr1: bytesToHex(hash384('sim-rtmr1')),
    rtmr2: bytesToHex(hash384('sim-rtmr2')),
    rtmr3: bytesToHex(hash384('sim-rtmr3')),
    mr_aggregated: bytesToHex(hash384('sim-aggregated')),
    os_image_hash: bytesToHex(sha256(utf8.encode('sim-os'))),
    compose_hash: SIM_COMPOSE_HASH,
    device_id: bytesToHex(sha256(utf8.encode('sim-device'))),
    app_compose: SIM_APP_COMPOSE,
    event_log: JSON.stringify(eventLog),
  }
  const quoteHex = faults.emptyQuote ? '' : bytesToHex(simulatedQuote(reportData))
  const report: Record<string, unknown> = {
    signing_address: input.addressCase === 'checksum' && input.algo === 'ecdsa' ? checksumAddress(identity.address) : identity.address,
    signing_algo: faults.wrongAlgoEcho ? (input.algo === 'ecdsa' ? 'ed25519' : 'ecdsa') : input.algo,
    signing_public_key: identity.publicKeyHex,
    request_nonce: faults.echoWrongNonce ? otherNonce : input.nonce,
    intel_quote: quoteHex,
    nvidia_payload: nvidia,
    event_log: input.eventLogAs === 'array' ? eventLog : JSON.stringify(eventLog),
    info: {
      app_id: 'sim-app-0001',
      instance_id: 'sim-instance-0001',
      app_name: 'sim',
      device_id: tcb.device_id,
      compose_hash: SIM_COMPOSE_HASH,
      key_provider_info: '{}',
      app_cert: '',
      tcb_info: tcb,
    },
  }
  if (faults.omitRequestNonce) delete report.request_nonce
  if (input.family === 'nearai') report.model_name = input.modelName
  if (input.tlsFingerprint) report.tls_cert_fingerprint = input.tlsFingerprint
  if (input.family === 'phala') {
    report.quote = quoteHex
    report.vm_config = JSON.stringify({ spec_version: 1, os_image_hash: tcb.os_image_hash })
  }
  return report
}


/** EIP-55 mixed-case form, as the Phala family writes addresses. */
function checksumAddress(address: string): string {
  const lower = address.slice(2).toLowerCase()
  const hash = bytesToHex(keccak_256(utf8.encode(lower)))
  return `0x${[...lower].map((char, index) => (parseInt(hash[index]!, 16) >= 8 ? char.toUpperCase() : char)).join('')}`
}
