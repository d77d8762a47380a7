import type { CacheHint, CacheTtl } from '../../inference/canonical'

/** Anthropic's prompt-cache breakpoint (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching). */
export interface AnthropicCacheControl {
  type: 'ephemeral'
  /** As the client wrote it; absent, Anthropic's default (5 minutes). */
  ttl?: CacheTtl
}

/**
 * A client's hint as Anthropic's `cache_control`, sent where the client set it: on the system
 * block, content block or tool it came with, or at the top level (automatic caching). How many a
 * request may carry (4), and that 1-hour ones come before 5-minute ones, is Anthropic's to
 * judge: its 400 reaches the client with its own message (upstream-errors.ts), and the gateway
 * does not keep a copy of rules the upstream may change.
 */
export function cacheControl(hint: CacheHint): AnthropicCacheControl {
  return hint.ttl === undefined ? { type: 'ephemeral' } : { type: 'ephemeral', ttl: hint.ttl }
}

