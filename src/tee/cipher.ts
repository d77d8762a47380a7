// Field ciphers of the E2EE protocols (TEE-PROTOCOL.md A2): every encrypted field is one
// lowercase hex blob carrying its own ephemeral public key. Used by the simulated backend and
// the client library; the gateway itself never encrypts or decrypts.

import { gcm } from '@noble/ciphers/aes.js'
import { hchacha, xchacha20, xchacha20poly1305 } from '@noble/ciphers/chacha.js'
import { poly1305 } from '@noble/ciphers/_poly1305.js'
import { hsalsa, xsalsa20poly1305 } from '@noble/ciphers/salsa.js'
import { hkdf } from '@noble/hashes/hkdf.js'
import { sha256 } from '@noble/hashes/sha2.js'
import { equalBytes } from '@noble/ciphers/utils.js'
import { bytesToHex, hexToBytes, isHex, randomBytes, secp256k1, toX25519Public, toX25519Secret, x25519, type SigningAlgo } from './keys'
import type { E2eeFamily } from './proof-format'
import { minBlobBytes } from './blob-size'

export interface Variant {
  readonly family: E2eeFamily
  readonly version: 1 | 2
}

/** NEAR v1 ed25519 has two secretbox ciphers in the wild (A2): the NaCl one and the XChaCha one. */
export type NearV1Cipher = 'xsalsa' | 'xchacha-box'

const utf8 = new TextEncoder()
const fromUtf8 = new TextDecoder('utf-8', { fatal: true })

/** Phala v2 request AAD (`_build_request_aad`), exactly. */
export function requestAad(a: { algo: SigningAlgo; model: string; messageIndex: number; contentIndex?: number; nonce: string; timestamp: number }): Uint8Array {
  return utf8.encode(`v2|req|algo=${a.algo}|model=${a.model}|m=${a.messageIndex}|c=${a.contentIndex ?? '-'}|n=${a.nonce}|ts=${a.timestamp}`)
}

/** Phala v2 response AAD (`_build_response_aad`): `choice` is the array position, not choice.index. */
export function responseAad(a: { algo: SigningAlgo; model: string; id: string; choice: number; field: string; nonce: string; timestamp: number }): Uint8Array {
  return utf8.encode(`v2|resp|algo=${a.algo}|model=${a.model}|id=${a.id}|choice=${a.choice}|field=${a.field}|n=${a.nonce}|ts=${a.timestamp}`)
}

function hkdfKey(ikm: Uint8Array, algo: SigningAlgo): Uint8Array {
  return hkdf(sha256, ikm, undefined, utf8.encode(algo === 'ecdsa' ? 'ecdsa_encryption' : 'ed25519_encryption'), 32)
}

/** 32 little-endian words (hsalsa/hchacha take and give Uint32Array). */
function words(bytes: Uint8Array): Uint32Array {
  const out = new Uint32Array(bytes.length / 4)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  for (let index = 0; index < out.length; index++) out[index] = view.getUint32(index * 4, true)
  return out
}

function wordBytes(input: Uint32Array): Uint8Array {
  const out = new Uint8Array(input.length * 4)
  const view = new DataView(out.buffer)
  for (let index = 0; index < input.length; index++) view.setUint32(index * 4, input[index]!, true)
  return out
}

const SIGMA = words(utf8.encode('expand 32-byte k'))

/** NaCl crypto_box_beforenm (HSalsa20) or its XChaCha twin (HChaCha20) of an X25519 secret. */
function beforenm(shared: Uint8Array, core: 'salsa' | 'chacha'): Uint8Array {
  const out = new Uint32Array(8)
  ;(core === 'salsa' ? hsalsa : hchacha)(SIGMA, words(shared), new Uint32Array(4), out)
  return wordBytes(out)
}

/** libsodium's XChaCha20-Poly1305 *secretbox* (not IETF): tag ‖ ct, poly key = stream[0..32]. */
function xchachaBoxSeal(key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array): Uint8Array {
  const stream = xchacha20(key, nonce, new Uint8Array(32 + plaintext.length))
  const ct = plaintext.map((byte, index) => byte ^ stream[32 + index]!)
  const tag = poly1305(ct, stream.subarray(0, 32))
  return concat(tag, ct)
}

function xchachaBoxOpen(key: Uint8Array, nonce: Uint8Array, sealed: Uint8Array): Uint8Array {
  const tag = sealed.subarray(0, 16)
  const ct = sealed.subarray(16)
  const stream = xchacha20(key, nonce, new Uint8Array(32 + ct.length))
  if (!equalBytes(poly1305(ct, stream.subarray(0, 32)), tag)) throw new Error('authentication failed')
  return ct.map((byte, index) => byte ^ stream[32 + index]!)
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0))
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}

/** An ephemeral sender key: reused for every response field of one Phala request, fresh per field otherwise. */
export interface Ephemeral {
  readonly secretKey: Uint8Array
  /** ecdsa: 65 B uncompressed; ed25519: the 32 B X25519 public key. */
  readonly publicKey: Uint8Array
}

export function newEphemeral(algo: SigningAlgo): Ephemeral {
  if (algo === 'ecdsa') {
    const secretKey = secp256k1.utils.randomSecretKey()
    return { secretKey, publicKey: secp256k1.getPublicKey(secretKey, false) }
  }
  const secretKey = x25519.utils.randomSecretKey()
  return { secretKey, publicKey: x25519.getPublicKey(secretKey) }
}

/**
 * Encrypts one field to `recipient` (ed25519: its Ed25519 public key, 32 B; ecdsa: 64 or 65 B).
 * Empty strings are never encrypted (both families leave "" as it is).
 */
export function encryptField(
  plaintext: string,
  variant: Variant,
  algo: SigningAlgo,
  recipient: Uint8Array,
  options: { aad?: Uint8Array; ephemeral?: Ephemeral; nearV1Cipher?: NearV1Cipher } = {},
): string {
  if (plaintext === '') return ''
  const data = utf8.encode(plaintext)
  const eph = options.ephemeral ?? newEphemeral(algo)
  if (algo === 'ecdsa') {
    const pub = recipient.length === 64 ? concat(Uint8Array.of(4), recipient) : recipient
    const key = hkdfKey(secp256k1.getSharedSecret(eph.secretKey, pub, true).subarray(1), algo)
    const nonce = randomBytes(12)
    return bytesToHex(concat(eph.publicKey, nonce, gcm(key, nonce, options.aad).encrypt(data)))
  }
  const shared = x25519.getSharedSecret(eph.secretKey, toX25519Public(recipient))
  if (variant.family === 'phala') {
    const nonce = randomBytes(12)
    return bytesToHex(concat(eph.publicKey, nonce, gcm(hkdfKey(shared, algo), nonce, options.aad).encrypt(data)))
  }
  const nonce = randomBytes(24)
  if (variant.version === 2) return bytesToHex(concat(eph.publicKey, nonce, xchacha20poly1305(hkdfKey(shared, algo), nonce).encrypt(data)))
  const sealed = (options.nearV1Cipher ?? 'xsalsa') === 'xsalsa' ? xsalsa20poly1305(beforenm(shared, 'salsa'), nonce).encrypt(data) : xchachaBoxSeal(beforenm(shared, 'chacha'), nonce, data)
  return bytesToHex(concat(eph.publicKey, nonce, sealed))
}

/**
 * Decrypts one field with our secret (ed25519: the 32 B Ed25519 seed; ecdsa: the 32 B secret).
 * Throws on any failure (bad hex, short blob, authentication, non-UTF-8). NEAR v1 ed25519
 * tries both secretbox ciphers, the way current NEAR backends do.
 */
export function decryptField(hex: string, variant: Variant, algo: SigningAlgo, secretKey: Uint8Array, options: { aad?: Uint8Array } = {}): string {
  if (hex === '') return ''
  if (!isHex(hex)) throw new Error('ciphertext is not hex')
  const blob = hexToBytes(hex)
  if (blob.length < minBlobBytes(variant, algo)) throw new Error('ciphertext too short')
  if (algo === 'ecdsa') {
    const epk = blob.subarray(0, 65)
    const key = hkdfKey(secp256k1.getSharedSecret(secretKey, epk, true).subarray(1), algo)
    return fromUtf8.decode(gcm(key, blob.subarray(65, 77), options.aad).decrypt(blob.subarray(77)))
  }
  const shared = x25519.getSharedSecret(toX25519Secret(secretKey), blob.subarray(0, 32))
  if (variant.family === 'phala') return fromUtf8.decode(gcm(hkdfKey(shared, algo), blob.subarray(32, 44), options.aad).decrypt(blob.subarray(44)))
  const nonce = blob.subarray(32, 56)
  const body = blob.subarray(56)
  if (variant.version === 2) return fromUtf8.decode(xchacha20poly1305(hkdfKey(shared, algo), nonce).decrypt(body))
  try {
    return fromUtf8.decode(xsalsa20poly1305(beforenm(shared, 'salsa'), nonce).decrypt(body))
  } catch {
    return fromUtf8.decode(xchachaBoxOpen(beforenm(shared, 'chacha'), nonce, body))
  }
}
