import type { CacheHint, Part } from '../../canonical'

/** A `cache_control` as the Messages schema admits it: absent, null, or ephemeral with an optional ttl. */
export type CacheControlWire = { type: 'ephemeral'; ttl?: '5m' | '1h' } | null | undefined

// Shared and frozen: most hints are alike, and nothing changes a hint once decoded.
const DEFAULT_TTL: CacheHint = Object.freeze({})
const HINTS: Readonly<Record<string, CacheHint>> = { '5m': Object.freeze({ ttl: '5m' }), '1h': Object.freeze({ ttl: '1h' }) }

/**
 * A Messages `cache_control` → the canonical hint; null is none, as Anthropic reads it. The ttl
 * stays as written: absent is sent absent, so the upstream applies its own default (5 minutes).
 */
export function cacheHint(control: CacheControlWire): CacheHint | undefined {
  if (control === undefined || control === null) return undefined
  return control.ttl === undefined ? DEFAULT_TTL : HINTS[control.ttl]
}

/** `part` with the hint of the block it was decoded from (reasoning parts carry none: Anthropic caches no thinking block by itself). */
export function hinted(part: Part, block: object): Part {
  const hint = 'cache_control' in block ? cacheHint(block.cache_control as CacheControlWire) : undefined
  return hint === undefined || part.type === 'reasoning' ? part : { ...part, cache: hint }
}

/** Of blocks in prompt order, the one whose hint lives longest (`1h` over `5m` or none given), the latest on a tie; undefined when none has one. */
export function longestHinted<B extends { cache_control?: CacheControlWire }>(blocks: readonly B[]): B | undefined {
  let chosen: B | undefined
  for (const block of blocks) {
    if (block.cache_control == null) continue
    if (chosen === undefined || block.cache_control.ttl === '1h' || chosen.cache_control?.ttl !== '1h') chosen = block
  }
  return chosen
}
