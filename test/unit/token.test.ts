import { describe, expect, spyOn, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { generateKeySecret, hashSecret, isWellFormedKeySecret, KEY_PREFIX } from '../../src/keys/token'

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
// z_sk_ + 43 base62 body characters + 6 base62 checksum characters.
const SHAPE = /^z_sk_[0-9A-Za-z]{49}$/

function fromBase62(text: string): bigint {
  let value = 0n
  for (const char of text) value = value * 62n + BigInt(ALPHABET.indexOf(char))
  return value
}

function replaceAt(text: string, index: number, char: string): string {
  return text.slice(0, index) + char + text.slice(index + 1)
}

describe('generateKeySecret', () => {
  test('has the z_sk_ prefix, 54 characters, base62 after the prefix', () => {
    expect(KEY_PREFIX).toBe('z_sk_')
    for (let i = 0; i < 200; i++) {
      const secret = generateKeySecret()
      expect(secret).toMatch(SHAPE)
      expect(secret.length).toBe(54)
      expect(isWellFormedKeySecret(secret)).toBe(true)
    }
  })

  test('is unique across many draws, and so are the hashes', () => {
    const secrets = new Set<string>()
    const hashes = new Set<string>()
    const bodies = new Set<string>()
    for (let i = 0; i < 5000; i++) {
      const secret = generateKeySecret()
      secrets.add(secret)
      hashes.add(hashSecret(secret))
      bodies.add(secret.slice(5, 5 + 43))
    }
    expect(secrets.size).toBe(5000)
    expect(hashes.size).toBe(5000)
    expect(bodies.size).toBe(5000)
  })

  test('the last 6 characters are the base62 CRC32 of the 43-character body', () => {
    for (let i = 0; i < 100; i++) {
      const secret = generateKeySecret()
      const body = secret.slice(5, 48)
      expect(fromBase62(secret.slice(48))).toBe(BigInt(Bun.hash.crc32(body)))
    }
  })

  test('uses all base62 characters (the body is not, say, hex)', () => {
    const seen = new Set<string>()
    for (let i = 0; i < 300; i++) for (const char of generateKeySecret().slice(5, 48)) seen.add(char)
    expect(seen.size).toBe(62)
  })

  test('the extremes of 32 random bytes still fit 43 characters (all zero, all 0xff)', () => {
    const spy = spyOn(crypto, 'getRandomValues')
    try {
      spy.mockImplementation(<T extends ArrayBufferView | null>(array: T): T => {
        ;(array as unknown as Uint8Array).fill(0)
        return array
      })
      const zero = generateKeySecret()
      expect(zero).toMatch(SHAPE)
      expect(zero.slice(5, 48)).toBe('0'.repeat(43))
      expect(isWellFormedKeySecret(zero)).toBe(true)

      spy.mockImplementation(<T extends ArrayBufferView | null>(array: T): T => {
        ;(array as unknown as Uint8Array).fill(0xff)
        return array
      })
      const max = generateKeySecret()
      expect(max).toMatch(SHAPE)
      expect(isWellFormedKeySecret(max)).toBe(true)
      // 2^256 - 1 in base62 takes all 43 places; the leading digit is not a pad zero.
      expect(max[5]).not.toBe('0')
      expect(fromBase62(max.slice(5, 48))).toBe(2n ** 256n - 1n)
    } finally {
      spy.mockRestore()
    }
  })
})

describe('isWellFormedKeySecret', () => {
  const secret = generateKeySecret()

  test('rejects every single-character substitution after the prefix (body and checksum)', () => {
    let checked = 0
    for (let index = KEY_PREFIX.length; index < secret.length; index++) {
      for (const char of ALPHABET) {
        if (char === secret[index]) continue
        expect(isWellFormedKeySecret(replaceAt(secret, index, char))).toBe(false)
        checked++
      }
    }
    expect(checked).toBe(49 * 61)
  })

  test('rejects adjacent transpositions', () => {
    for (let index = KEY_PREFIX.length; index < secret.length - 1; index++) {
      if (secret[index] === secret[index + 1]) continue
      const swapped = secret.slice(0, index) + secret[index + 1] + secret[index] + secret.slice(index + 2)
      expect(isWellFormedKeySecret(swapped)).toBe(false)
    }
  })

  test('rejects a changed or missing prefix', () => {
    const rest = secret.slice(KEY_PREFIX.length)
    for (const prefix of ['Z_sk_', 'z_SK_', 'z-sk-', 'z_pk_', 'sk_', 'z_sk', 'z_sk__', '']) {
      expect(isWellFormedKeySecret(prefix + rest)).toBe(false)
    }
  })

  test('rejects wrong lengths and non-base62 characters', () => {
    expect(isWellFormedKeySecret(secret.slice(0, -1))).toBe(false)
    expect(isWellFormedKeySecret(`${secret}0`)).toBe(false)
    expect(isWellFormedKeySecret(`${secret.slice(0, 20)}${secret.slice(21)}`)).toBe(false)
    expect(isWellFormedKeySecret('')).toBe(false)
    expect(isWellFormedKeySecret(KEY_PREFIX)).toBe(false)
    for (const char of ['-', '_', '+', '/', '=', ' ', '.', 'é', 'Ａ', '\u0000']) {
      expect(isWellFormedKeySecret(replaceAt(secret, 20, char))).toBe(false)
    }
    // Leading or trailing whitespace makes it a different string; the auth layer trims, not this.
    expect(isWellFormedKeySecret(` ${secret}`)).toBe(false)
    expect(isWellFormedKeySecret(`${secret}\n`)).toBe(false)
  })
})

describe('hashSecret', () => {
  test('is lowercase hex SHA-256 of the whole secret', () => {
    const secret = generateKeySecret()
    const hash = hashSecret(secret)
    expect(hash).toMatch(/^[0-9a-f]{64}$/)
    expect(hash).toBe(createHash('sha256').update(secret, 'utf8').digest('hex'))
  })

  test('matches the FIPS 180-2 test vector', () => {
    expect(hashSecret('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
    expect(hashSecret('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')
  })

  test('is deterministic and covers the prefix (a different prefix hashes differently)', () => {
    const secret = generateKeySecret()
    expect(hashSecret(secret)).toBe(hashSecret(secret))
    expect(hashSecret(secret)).not.toBe(hashSecret(`Z${secret.slice(1)}`))
    expect(hashSecret(secret)).not.toBe(hashSecret(secret.slice(KEY_PREFIX.length)))
  })

})
