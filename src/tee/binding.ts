// report_data binding (TEE-PROTOCOL.md A1): [32..64] = the nonce, [0..32] = the signing address
// padded to 32 bytes, or SHA-256(address ‖ TLS fingerprint) for the tlsfp formats.

import { sha256 } from '@noble/hashes/sha2.js'
import { hexToBytes, isHex, type SigningAlgo } from './keys'

/** The address bytes: ecdsa 20 (from `0x…`, any case), ed25519 32; null when malformed. */
export function addressBytes(algo: SigningAlgo, address: string): Uint8Array | null {
  if (algo === 'ecdsa') {
    const hex = address.startsWith('0x') || address.startsWith('0X') ? address.slice(2) : ''
    return isHex(hex, 20) ? hexToBytes(hex) : null
  }
  return isHex(address, 32) ? hexToBytes(address) : null
}

/** The expected report_data[0..32] for an address, or null when the inputs are malformed. */
export function expectedBindingHalf(binding: 'addr' | 'tlsfp', algo: SigningAlgo, address: string, tlsFingerprint?: string): Uint8Array | null {
  const bytes = addressBytes(algo, address)
  if (bytes === null) return null
  if (binding === 'tlsfp') {
    if (!isHex(tlsFingerprint ?? '', 32)) return null
    return sha256(new Uint8Array([...bytes, ...hexToBytes(tlsFingerprint!)]))
  }
  const padded = new Uint8Array(32)
  padded.set(bytes)
  return padded
}

/** The full 64 bytes a backend asks its quote to carry. */
export function buildReportData(half: Uint8Array, nonce: Uint8Array): Uint8Array {
  const out = new Uint8Array(64)
  out.set(half)
  out.set(nonce, 32)
  return out
}
