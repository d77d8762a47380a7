import { ApiError } from './errors'

export const KiB = 1024
export const MiB = 1024 * KiB

/**
 * The exact body bytes of Encrypted chat requests (`svc-encrypted` header), which the backend's
 * signature must bind (X-Request-Hash). Kept only for those; released with the request.
 */
const rawBodies = new WeakMap<Request, Uint8Array>()

/** The exact body bytes of a request read by `jsonBody` that carried `svc-encrypted`. */
export function rawBodyOf(request: Request): Uint8Array | undefined {
  return rawBodies.get(request)
}

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
    if (declared !== null && Number(declared) > limit) throw tooLarge(limit)
    if (request.headers.has('svc-encrypted')) {
      const bytes = declared !== null ? new Uint8Array(await request.arrayBuffer()) : await readCappedBytes(request, limit)
      rawBodies.set(request, bytes)
      text = new TextDecoder().decode(bytes)
    } else if (declared !== null) {
      text = await request.text()
    } else {
      text = await readCapped(request, limit)
    }
    if (text.length === 0) throw new ApiError('invalid_request', 'request body is empty; a JSON object is required')
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      throw new ApiError('invalid_request', 'request body is not valid JSON')
    }
    // Schema validation of a pathologically nested body takes seconds before it overflows the
    // stack; refuse it here, in time linear in the number of containers.
    if (nestedDeeperThan(value, MAX_DEPTH)) throw new ApiError('invalid_request', `request body is nested more than ${MAX_DEPTH} levels deep`)
    return value
  }
}

const MAX_DEPTH = 64

/** Whether arrays and objects in `value` nest deeper than `limit` (iterative: no recursion to overflow). */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  if (typeof value !== 'object' || value === null) return false
  const stack: Array<[object, number]> = [[value, 1]]
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (depth > limit) return true
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1])
    }
  }
  return false
}

function tooLarge(limit: number): ApiError {
  return new ApiError('payload_too_large', `request body exceeds ${limit} bytes`)
}

async function readCapped(request: Request, limit: number): Promise<string> {
  return Buffer.from(await readCappedBytes(request, limit)).toString('utf8')
}

async function readCappedBytes(request: Request, limit: number): Promise<Uint8Array> {
  if (request.body === null) return new Uint8Array(0)
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
  return new Uint8Array(Buffer.concat(parts))
}
