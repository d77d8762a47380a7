// Per-response signatures (TEE-PROTOCOL.md A3): ecdsa is EIP-191 personal_sign encoded
// 0x‖r‖s‖v (v = 27/28); ed25519 is a plain signature over the UTF-8 text, as 128 hex.

import { keccak_256 } from '@noble/hashes/sha3.js'
import { bytesToHex, ed25519, ethAddress, hexToBytes, isHex, secp256k1, type SigningAlgo } from './keys'

const utf8 = new TextEncoder()

/** keccak256("\x19Ethereum Signed Message:\n" + len(text) + text). */
export function eip191Hash(text: string): Uint8Array {
  const message = utf8.encode(text)
  return keccak_256(new Uint8Array([...utf8.encode(`\x19Ethereum Signed Message:\n${message.length}`), ...message]))
}

export function signText(algo: SigningAlgo, text: string, secretKey: Uint8Array): string {
  if (algo === 'ed25519') return bytesToHex(ed25519.sign(utf8.encode(text), secretKey))
  // noble puts the recovery byte first; Ethereum wants r ‖ s ‖ v with v = 27 + recovery.
  const recovered = secp256k1.sign(eip191Hash(text), secretKey, { prehash: false, format: 'recovered' })
  return `0x${bytesToHex(recovered.subarray(1))}${(27 + recovered[0]!).toString(16)}`
}

/**
 * Whether `signature` over `text` was made by `address` (ecdsa: recover and compare
 * case-insensitively; ed25519: the address is the public key).
 */
export function verifyText(algo: SigningAlgo, text: string, signature: string, address: string): boolean {
  try {
    if (algo === 'ed25519') return isHex(signature, 64) && isHex(address, 32) && ed25519.verify(hexToBytes(signature), utf8.encode(text), hexToBytes(address))
    const hex = signature.startsWith('0x') ? signature.slice(2) : signature
    if (!isHex(hex, 65)) return false
    const bytes = hexToBytes(hex)
    const v = bytes[64]!
    const recovery = v >= 27 ? v - 27 : v
    if (recovery > 1) return false
    const pub = secp256k1.recoverPublicKey(Uint8Array.from([recovery, ...bytes.subarray(0, 64)]), eip191Hash(text), { prehash: false })
    return ethAddress(secp256k1.Point.fromBytes(pub).toBytes(false)) === address.toLowerCase()
  } catch {
    return false
  }
}
