/**
 * Whether a response declares a body of at most `limit` bytes. Such a body was complete before
 * the answer (a cache, a buffering proxy, a replay; a live model's stream cannot know its
 * length), so the providers read it whole in one call instead of chunk by chunk. A compressed
 * body never counts: its Content-Length is of the compressed bytes, and fetch inflates it (a
 * 100 KB gzip body held a 100 MB answer), so it is read chunk by chunk, where the caps count
 * the inflated bytes.
 */
export function declaresAtMost(headers: Headers, limit: number): boolean {
  const declared = headers.get('content-length')
  if (declared === null || !/^\d+$/.test(declared) || Number(declared) > limit) return false
  const encoding = headers.get('content-encoding')
  return encoding === null || /^\s*(?:identity\s*)?$/i.test(encoding)
}
