import { cacheWritePrice } from '../billing/pricing'
import type { Price } from '../catalog/types'
import type { Nanos } from '../lib/money'
import type { CacheHint, CacheTtl, ChatRequest } from './canonical'

/**
 * The dearest prompt-cache write a request's hints may incur at `price`, or undefined when it
 * has none: the price the reservation holds its input at (meter.ts estimateCharge), and the
 * lifetime an upstream's writes are read as when it does not say which they were for (the
 * Anthropic adapter), so the gateway never settles above its reservation nor bills less than
 * the upstream may.
 *
 * Any hint may write for 5 minutes (a hint without a ttl is 5m, Anthropic's default, and an
 * upstream that does not split its writes by lifetime may not know the 1-hour one either); a
 * 1-hour hint may write for an hour too. Which of those is dearer is the configured prices' say,
 * not the lifetime's: an operator may price 5-minute writes above 1-hour ones. On a tie the
 * longer lifetime is named, as Anthropic would bill it.
 */
export function dearestCacheWrite(request: ChatRequest, price: Price): { readonly ttl: CacheTtl; readonly price: Nanos } | undefined {
  let hinted = false
  let hour = false
  const see = (hint: CacheHint | undefined) => {
    if (hint === undefined) return
    hinted = true
    if (hint.ttl === '1h') hour = true
  }
  see(request.cache)
  for (const tool of request.tools) see(tool.cache)
  for (const message of request.messages) for (const part of message.parts) if (part.type !== 'reasoning') see(part.cache)
  if (!hinted) return undefined
  const fiveMinutes = cacheWritePrice(price, '5m')
  if (!hour) return { ttl: '5m', price: fiveMinutes }
  const oneHour = cacheWritePrice(price, '1h')
  return oneHour >= fiveMinutes ? { ttl: '1h', price: oneHour } : { ttl: '5m', price: fiveMinutes }
}
