import type { CacheHint, CacheTtl, ChatRequest } from './canonical'

/**
 * The longest lifetime any cache hint of the request asks for (`1h` over `5m`; a hint without a
 * ttl is `5m`, Anthropic's default), or undefined when it has none: which cache-write price the
 * call may incur at most (the reservation's estimate, meter.ts), and how an upstream's writes
 * are read when it does not say which lifetime they were for (the Anthropic adapter).
 */
export function longestCacheTtl(request: ChatRequest): CacheTtl | undefined {
  let longest: CacheTtl | undefined
  const see = (hint: CacheHint | undefined) => {
    if (hint !== undefined && longest !== '1h') longest = hint.ttl === '1h' ? '1h' : '5m'
  }
  see(request.cache)
  for (const tool of request.tools) see(tool.cache)
  for (const message of request.messages) for (const part of message.parts) if (part.type !== 'reasoning') see(part.cache)
  return longest
}
