/**
 * Organization API key secrets: `z_sk_` + 43 base62 characters (32 random bytes) + a 6-character
 * base62 CRC32 of those 43 characters. The checksum lets secret scanners (and our auth path)
 * tell a real-looking key from a typo offline, without a database lookup.
 */
export const KEY_PREFIX = 'z_sk_'
const BODY_LENGTH = 43
const CHECKSUM_LENGTH = 6
const KEY_LENGTH = KEY_PREFIX.length + BODY_LENGTH + CHECKSUM_LENGTH
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const BASE62 = /^[0-9A-Za-z]+$/

function toBase62(value: bigint, width: number): string {
  let out = ''
  while (value > 0n) {
    out = ALPHABET[Number(value % 62n)] + out
    value /= 62n
  }
  return out.padStart(width, '0')
}

function checksum(body: string): string {
  return toBase62(BigInt(Bun.hash.crc32(body)), CHECKSUM_LENGTH)
}

/**
 * Whether `secret` ends in the checksum of its body, compared digit by digit in plain numbers (a
 * CRC32 is below 2^32): building the string with BigInt division cost ~1% of a chat request's
 * CPU, and this runs on every authenticated request.
 */
function checksumMatches(secret: string): boolean {
  let value = Bun.hash.crc32(secret.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH))
  for (let at = KEY_LENGTH - 1; at >= KEY_LENGTH - CHECKSUM_LENGTH; at -= 1) {
    const digit = value % 62
    if (secret.charCodeAt(at) !== ALPHABET.charCodeAt(digit)) return false
    value = (value - digit) / 62
  }
  return true
}

/** A fresh secret from 32 bytes of CSPRNG output. */
export function generateKeySecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32))
  const body = toBase62(BigInt(`0x${Buffer.from(bytes).toString('hex')}`), BODY_LENGTH)
  return `${KEY_PREFIX}${body}${checksum(body)}`
}

/** Shape and checksum check: true only for strings that could have been issued by generateKeySecret. */
export function isWellFormedKeySecret(secret: string): boolean {
  if (secret.length !== KEY_LENGTH || !secret.startsWith(KEY_PREFIX)) return false
  if (!BASE62.test(secret.slice(KEY_PREFIX.length))) return false
  return checksumMatches(secret)
}

/** What the database stores: hex SHA-256 of the whole secret. */
export function hashSecret(secret: string): string {
  return Bun.SHA256.hash(secret, 'hex') as string
}
