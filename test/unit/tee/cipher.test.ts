import { describe, expect, test } from 'bun:test'
import nacl from 'tweetnacl'
import { minBlobBytes } from '../../../src/tee/blob-size'
import { decryptField, encryptField, requestAad, type Variant } from '../../../src/tee/cipher'
import { bytesToHex, ed25519, ethAddress, generateKeyPair, hexToBytes, keyPairFrom, toX25519Public, toX25519Secret, x25519 } from '../../../src/tee/keys'
import { signText, verifyText } from '../../../src/tee/signature'

const VARIANTS: Variant[] = [
  { family: 'nearai', version: 1 },
  { family: 'nearai', version: 2 },
  { family: 'phala', version: 1 },
  { family: 'phala', version: 2 },
]

describe('TEE key vectors', () => {
  test('RFC 8032 test-1 seed: Ed25519 public key and its X25519 conversions (libsodium values)', () => {
    const seed = hexToBytes('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60')
    const pub = ed25519.getPublicKey(seed)
    expect(bytesToHex(pub)).toBe('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a')
    expect(bytesToHex(toX25519Secret(seed))).toBe('307c83864f2833cb427a2ef1c00a013cfdff2768d980c0a3a520f006904de94f')
    expect(bytesToHex(toX25519Public(pub))).toBe('d85e07ec22b0ad881537c2f44d662d1a143cf830c57aca4305d85c7a90f6b62e')
    expect(bytesToHex(x25519.getPublicKey(toX25519Secret(seed)))).toBe(bytesToHex(toX25519Public(pub)))
  })

  test('secp256k1 secret 1 has the well-known Ethereum address', () => {
    const pair = keyPairFrom('ecdsa', hexToBytes('0'.repeat(63) + '1'))
    expect(ethAddress(pair.publicKey)).toBe('0x7e5f4552091a69125d5dfcb7b8c2659029395bdf')
  })
})

describe('field ciphers', () => {
  for (const variant of VARIANTS) {
    for (const algo of ['ed25519', 'ecdsa'] as const) {
      test(`${variant.family} v${variant.version} ${algo}: round trip, min length, tamper fails`, () => {
        const pair = generateKeyPair(algo)
        const aad = variant.family === 'phala' && variant.version === 2 ? requestAad({ algo, model: 'm', messageIndex: 0, nonce: 'n'.repeat(16), timestamp: 1 }) : undefined
        const blob = encryptField('héllo wörld', variant, algo, pair.publicKey, { aad })
        expect(blob).toMatch(/^[0-9a-f]+$/)
        expect(blob.length / 2).toBe(minBlobBytes(variant, algo) + Buffer.byteLength('héllo wörld'))
        expect(decryptField(blob, variant, algo, pair.secretKey, { aad })).toBe('héllo wörld')
        const flipped = blob.slice(0, -2) + (blob.endsWith('00') ? '01' : '00')
        expect(() => decryptField(flipped, variant, algo, pair.secretKey, { aad })).toThrow()
        expect(encryptField('', variant, algo, pair.publicKey)).toBe('')
        if (aad) {
          const other = requestAad({ algo, model: 'other', messageIndex: 0, nonce: 'n'.repeat(16), timestamp: 1 })
          expect(() => decryptField(blob, variant, algo, pair.secretKey, { aad: other })).toThrow()
        }
      })
    }
  }

  test('NEAR v1 ed25519 XSalsa20 blobs are tweetnacl boxes, both ways', () => {
    const seed = ed25519.utils.randomSecretKey()
    const recipient = ed25519.getPublicKey(seed)
    const blob = hexToBytes(encryptField('secret', { family: 'nearai', version: 1 }, 'ed25519', recipient))
    const opened = nacl.box.open(blob.subarray(56), blob.subarray(32, 56), blob.subarray(0, 32), toX25519Secret(seed))
    expect(new TextDecoder().decode(opened!)).toBe('secret')
    const eph = nacl.box.keyPair()
    const nonce = nacl.randomBytes(24)
    const boxed = nacl.box(new TextEncoder().encode('from nacl'), nonce, toX25519Public(recipient), eph.secretKey)
    const hex = bytesToHex(new Uint8Array([...eph.publicKey, ...nonce, ...boxed]))
    expect(decryptField(hex, { family: 'nearai', version: 1 }, 'ed25519', seed)).toBe('from nacl')
  })

  test('NEAR v1 ed25519 XChaCha secretbox replies decrypt too', () => {
    const pair = generateKeyPair('ed25519')
    const blob = encryptField('xchacha', { family: 'nearai', version: 1 }, 'ed25519', pair.publicKey, { nearV1Cipher: 'xchacha-box' })
    expect(decryptField(blob, { family: 'nearai', version: 1 }, 'ed25519', pair.secretKey)).toBe('xchacha')
  })
})

describe('response signatures', () => {
  test('ecdsa EIP-191 r‖s‖v and ed25519 verify against the address, and fail on other text', () => {
    for (const algo of ['ecdsa', 'ed25519'] as const) {
      const pair = generateKeyPair(algo)
      const address = algo === 'ecdsa' ? ethAddress(pair.publicKey) : bytesToHex(pair.publicKey)
      const signature = signText(algo, 'm:a:b', pair.secretKey)
      if (algo === 'ecdsa') expect(signature).toMatch(/^0x[0-9a-f]{128}(1b|1c)$/)
      expect(verifyText(algo, 'm:a:b', signature, address)).toBe(true)
      expect(verifyText(algo, 'm:a:c', signature, address)).toBe(false)
    }
  })
})
