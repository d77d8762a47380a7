import { ApiError } from './errors'

export const KiB = 1024
export const MiB = 1024 * KiB

/**
 * An Elysia `parse` hook that reads a JSON body of at most `limit` bytes. Content-Length is
 * trusted when present (HTTP framing bounds the body, and it is the fast path); a chunked
 * body is counted as it streams and cancelled past the cap, so nothing oversized is buffered.
 */
export function jsonBody(limit: number) {
  return async ({ request }: { request: Request }): Promise<unknown> => {
    const type = request.headers.get('content-type')
    if (type !== null && !/^application\/([a-z0-9.+-]*\+)?json\b/i.test(type)) {
      throw new ApiError('invalid_request', `Content-Type must be application/json, got "${type.slice(0, 100)}"`)
    }
    const declared = request.headers.get('content-length')
    let text: string
    if (declared !== null) {
      if (Number(declared) > limit) throw tooLarge(limit)
      text = await request.text()
    } else {
      text = await readCapped(request, limit)
    }
    if (text.length === 0) throw new ApiError('invalid_request', 'request body is empty; a JSON object is required')
    try {
      return JSON.parse(text)
    } catch {
      throw new ApiError('invalid_request', 'request body is not valid JSON')
    }
  }
}

function tooLarge(limit: number): ApiError {
  return new ApiError('payload_too_large', `request body exceeds ${limit} bytes`)
}

async function readCapped(request: Request, limit: number): Promise<string> {
  if (request.body === null) return ''
  const reader = request.body.getReader()
  const parts: Uint8Array[] = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > limit) {
      await reader.cancel()
      throw tooLarge(limit)
    }
    parts.push(value)
  }
  return Buffer.concat(parts).toString('utf8')
}
