import type { Variant } from './cipher'
import type { SigningAlgo } from './keys'

/**
 * Smallest decoded blob per (variant, algo): epk + nonce + tag (B3 body rule). Apart from
 * ./cipher.ts so the gateway's request checks, which only need this size, do not load
 * @noble/ciphers at boot.
 */
export function minBlobBytes(variant: Variant, algo: SigningAlgo): number {
  if (algo === 'ecdsa') return 65 + 12 + 16
  return variant.family === 'phala' ? 32 + 12 + 16 : 32 + 24 + 16
}
