// Key helpers shared by the gateway, the simulated backend and the client library
// (TEE-PROTOCOL.md A1, A2). All cryptography is @noble/*.

import { ed25519, x25519 } from '@noble/curves/ed25519.js'
import { secp256k1 } from '@noble/curves/secp256k1.js'
import { keccak_256 } from '@noble/hashes/sha3.js'
import { bytesToHex, hexToBytes, randomBytes } from '@noble/hashes/utils.js'

export { bytesToHex, hexToBytes, randomBytes }

export type SigningAlgo = 'ed25519' | 'ecdsa'
export const SIGNING_ALGOS: readonly SigningAlgo[] = ['ed25519', 'ecdsa']

// Linear: a pattern of hex pairs, (?:[0-9a-f]{2})+, cost ~90 ms per million characters and JSC's
// matcher gave up on valid hex past a few million (evidence may be megabytes, ciphertext more).
const HEX = /^[0-9a-fA-F]*$/

/** Strict hex (even length, no prefix), optionally of exactly `bytes` bytes. */
export function isHex(text: unknown, bytes?: number): text is string {
  if (typeof text !== 'string' || text.length === 0 || text.length % 2 !== 0 || !HEX.test(text)) return false
  return bytes === undefined || text.length === bytes * 2
}

/** `0x` + the last 20 bytes of keccak256(x‖y): the Ethereum address of a secp256k1 key. */
export function ethAddress(publicKey: Uint8Array): string {
  const xy = publicKey.length === 65 ? publicKey.subarray(1) : publicKey
  if (xy.length !== 64) throw new Error('secp256k1 public key must be 64 or 65 bytes')
  return `0x${bytesToHex(keccak_256(xy).subarray(12))}`
}

/**
 * A secp256k1 public key as hex, 64 bytes (x‖y) or 65 bytes (04‖x‖y), checked to be on the
 * curve → the 65-byte uncompressed form, or null.
 */
export function normalizeSecpPublicKey(hex: string): Uint8Array | null {
  if (!isHex(hex)) return null
  let bytes = hexToBytes(hex)
  if (bytes.length === 64) bytes = Uint8Array.from([4, ...bytes])
  if (bytes.length !== 65 || bytes[0] !== 4) return null
  try {
    secp256k1.Point.fromBytes(bytes).assertValidity()
    return bytes
  } catch {
    return null
  }
}

/** An Ed25519 public key as 64 hex that decodes to a curve point → its bytes, or null. */
export function parseEd25519PublicKey(hex: string): Uint8Array | null {
  if (!isHex(hex, 32)) return null
  try {
    // A small-order point (the identity, or one of the other seven torsion points) gives an X25519
    // shared secret anyone can compute: libsodium's ed25519→curve25519 conversion refuses them too.
    if (ed25519.Point.fromBytes(hexToBytes(hex)).isSmallOrder()) return null
    return hexToBytes(hex)
  } catch {
    return null
  }
}

/** Ed25519 public key → X25519 (u = (1+y)/(1−y)), as libsodium crypto_sign_ed25519_pk_to_curve25519. */
export function toX25519Public(edPublicKey: Uint8Array): Uint8Array {
  return ed25519.utils.toMontgomery(edPublicKey)
}

/** Ed25519 seed → X25519 secret (SHA-512(seed)[0..32], clamped), as libsodium's sk_to_curve25519. */
export function toX25519Secret(seed: Uint8Array): Uint8Array {
  return ed25519.utils.toMontgomerySecret(seed)
}

/** A key pair of either algorithm: `publicKey` is what goes on the wire (ed25519 32 B; ecdsa 65 B uncompressed). */
export interface KeyPair {
  readonly algo: SigningAlgo
  readonly secretKey: Uint8Array
  readonly publicKey: Uint8Array
}

export function keyPairFrom(algo: SigningAlgo, secretKey: Uint8Array): KeyPair {
  const publicKey = algo === 'ed25519' ? ed25519.getPublicKey(secretKey) : secp256k1.getPublicKey(secretKey, false)
  return { algo, secretKey, publicKey }
}

export function generateKeyPair(algo: SigningAlgo): KeyPair {
  return keyPairFrom(algo, algo === 'ed25519' ? ed25519.utils.randomSecretKey() : secp256k1.utils.randomSecretKey())
}

/**
 * The backend's signing identity as it reports it: ed25519 address = public key = 64 hex;
 * ecdsa address = Ethereum address, signing_public_key = x‖y as 128 hex (no 04).
 */
export function signingIdentity(pair: KeyPair): { address: string; publicKeyHex: string } {
  if (pair.algo === 'ed25519') return { address: bytesToHex(pair.publicKey), publicKeyHex: bytesToHex(pair.publicKey) }
  return { address: ethAddress(pair.publicKey), publicKeyHex: bytesToHex(pair.publicKey.subarray(1)) }
}

export { x25519, ed25519, secp256k1 }
