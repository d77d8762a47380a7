/**
 * Whether a response declares a body of at most `limit` bytes. Such a body was complete before
 * the answer (a cache, a buffering proxy, a replay; a live model's stream cannot know its
 * length), so the providers read it whole in one call instead of chunk by chunk.
 */
export function declaresAtMost(headers: Headers, limit: number): boolean {
  const declared = headers.get('content-length')
  return declared !== null && /^\d+$/.test(declared) && Number(declared) <= limit
}
