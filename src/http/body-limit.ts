import { ApiError } from './errors'
import { duplicateMember } from './json-members'

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
 * An Elysia `parse` hook that reads a JSON body of at most `limit` bytes (`readCapped`: a
 * declared length is checked, then trusted; a chunked body is counted as it streams).
 * `uniqueNames` refuses a member name given twice in one object (admin bodies, whose fields
 * grant authority; the inference routes take JSON as the OpenAI and Anthropic APIs do).
 */
export function jsonBody(limit: number, uniqueNames = false) {
  return async ({ request }: { request: Request }): Promise<unknown> => {
    const type = request.headers.get('content-type')
    if (type !== null && !/^application\/([a-z0-9.+-]*\+)?json\b/i.test(type)) {
      throw new ApiError('invalid_request', `Content-Type must be application/json, got "${type.slice(0, 100)}"`)
    }
    const charset = type === null ? undefined : foreignCharset(type)
    if (charset !== undefined) throw new ApiError('invalid_request', `charset "${charset.slice(0, 50)}" is not supported: JSON bodies must be UTF-8 (RFC 8259 §8.1)`)
    refuseContentCoding(request)
    // readCapped's rule, inline: the chat routes' common case costs no extra async frame.
    const bytes = declaredWithin(request, limit) ? await request.bytes() : await readCappedBytes(request, limit)
    if (request.headers.has('svc-encrypted')) rawBodies.set(request, bytes)
    const text = utf8Text(bytes)
    if (text.length === 0) throw new ApiError('invalid_request', 'request body is empty; a JSON object is required')
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      throw new ApiError('invalid_request', 'request body is not valid JSON')
    }
    const twice = uniqueNames ? duplicateMember(text) : undefined
    if (twice !== undefined) throw new ApiError('invalid_request', `request body names "${twice.slice(0, 100)}" twice in one object; each member may be given once`, twice.slice(0, 100))
    // Schema validation of a pathologically nested body takes seconds before it overflows the
    // stack; refuse it here, in time linear in the number of containers.
    if (nestedDeeperThan(value, MAX_DEPTH)) throw new ApiError('invalid_request', `request body is nested more than ${MAX_DEPTH} levels deep`)
    return value
  }
}

/** The deepest a JSON body may nest (its root object is level 1). */
export const MAX_DEPTH = 64

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i

/**
 * The charset a JSON Content-Type names when it is not UTF-8, else undefined. JSON is UTF-8
 * (RFC 8259 §8.1), and the body is decoded so: another charset would be decoded wrongly. A
 * plain `application/json` (no parameters) costs one indexOf.
 */
export function foreignCharset(type: string): string | undefined {
  if (type.indexOf(';') === -1) return undefined
  const charset = CHARSET.exec(type)?.[1]
  if (charset === undefined) return undefined
  const lower = charset.toLowerCase()
  return lower === 'utf-8' || lower === 'utf8' ? undefined : charset
}

const UTF8 = new TextDecoder('utf-8', { fatal: true })

/**
 * A body's bytes as text, refused (400) unless they are UTF-8 (RFC 8259 §8.1): a lenient decode
 * would turn each invalid byte into U+FFFD, and a key's name, say, would be stored other than
 * sent. A leading byte-order mark is dropped (the decoder's default), as the RFC allows.
 */
function utf8Text(bytes: Uint8Array): string {
  try {
    return UTF8.decode(bytes)
  } catch {
    throw new ApiError('invalid_request', 'request body is not valid UTF-8 (RFC 8259 §8.1)')
  }
}

/** Whether arrays and objects in `value` nest deeper than `limit` (iterative: no recursion to overflow). */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
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

/**
 * Refuses a body sent with a content coding (gzip, br…): no route decodes one (RFC 9110 §8.4.1
 * lets a server refuse what it cannot decode), and read as it is a gzip JSON body was "not valid
 * UTF-8" and a br-labelled plain one passed with its label ignored (QA).
 */
function refuseContentCoding(request: Request): void {
  const coding = request.headers.get('content-encoding')
  if (coding === null) return
  // A list (RFC 9110 §8.4), its empty elements ignored (§5.6.1): only identity codings pass.
  for (const element of coding.split(',')) {
    const name = element.trim()
    if (name !== '' && name.toLowerCase() !== 'identity') {
      throw new ApiError('invalid_request', `Content-Encoding "${name.slice(0, 50)}" is not supported: send the body uncompressed`)
    }
  }
}

function tooLarge(limit: number): ApiError {
  return new ApiError('payload_too_large', `request body exceeds ${limit} bytes`)
}

/**
 * Whether the body's length is declared (Content-Length), refusing one past `limit` with 413.
 * A declared length is then trusted: HTTP framing bounds the body (Bun refuses a request that
 * also says chunked), and Bun's whole-body read is the fast path. Only a chunked body is counted
 * as it streams, and never buffered whole first. Bun's stream reader is the slow path on purpose:
 * in Bun 1.4 a request body read through it triggered ~20× the collections of a whole read (64
 * against 2–5 per 1,500 uploads of the document fixtures), and on the event loop a collection
 * pauses every other request (bench/README.md, twenty-sixth session).
 */
function declaredWithin(request: Request, limit: number): boolean {
  const declared = request.headers.get('content-length')
  if (declared === null) return false
  if (Number(declared) > limit) throw tooLarge(limit)
  return true
}

/** A body of at most `limit` bytes as UTF-8 text (see declaredWithin): 413 `payload_too_large`, 400 when not UTF-8. */
export async function readCapped(request: Request, limit: number): Promise<string> {
  return utf8Text(await readCappedBytes(request, limit))
}

/** The body's bytes, at most `limit` (see declaredWithin): 413 `payload_too_large`. */
export async function readCappedBytes(request: Request, limit: number): Promise<Uint8Array> {
  if (request.body === null) return new Uint8Array(0)
  refuseContentCoding(request)
  if (declaredWithin(request, limit)) return await request.bytes()
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

/**
 * The parts of a multipart body (RFC 2046 §5.1.1): its delimiter lines, `--boundary` at the start
 * of a line, less the closing one (`--boundary--`); undefined without a closing delimiter. A
 * boundary never occurs inside a part, by definition.
 */
function partCount(bytes: Uint8Array, boundary: string): number | undefined {
  const body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const delimiter = Buffer.from(`--${boundary}`, 'latin1')
  let count = 0
  let closed = false
  for (let at = body.indexOf(delimiter); at !== -1; at = body.indexOf(delimiter, at + delimiter.length)) {
    if (at !== 0 && body[at - 1] !== 0x0a) continue
    const end = at + delimiter.length
    if (body[end] === 0x2d && body[end + 1] === 0x2d) {
      closed = true
      break
    }
    count += 1
  }
  return closed ? count : undefined
}

// RFC 2046 §5.1.1: a boundary is 1 to 70 characters.
const BOUNDARY = /;\s*boundary=(?:"([^"]{1,200})"|([^;\s]{1,200}))/i

/**
 * An Elysia `parse` hook for a multipart/form-data upload of exactly one file in `field`
 * (spec §4.8): the body is capped while it is read (Content-Length first, then counted as it
 * streams), and a missing field, a second part, any other field, or a plain-text value is a
 * 400. Returns `{ [field]: File }`.
 */
export function singleFileBody(limit: number, field: string) {
  return async ({ request }: { request: Request }): Promise<Record<string, File>> => {
    const type = request.headers.get('content-type') ?? ''
    if (!/^multipart\/form-data\b/i.test(type)) {
      throw new ApiError('invalid_request', `Content-Type must be multipart/form-data with one "${field}" file part, got "${type.slice(0, 100) || 'none'}"`)
    }
    const boundary = BOUNDARY.exec(type)
    const value = boundary?.[1] ?? boundary?.[2]
    if (!value) throw new ApiError('invalid_request', 'the multipart Content-Type has no boundary parameter')
    if (value.length > 70) throw new ApiError('invalid_request', 'the multipart boundary is longer than 70 characters (RFC 2046)')
    const bytes = await readCappedBytes(request, limit)
    let form: Awaited<ReturnType<Response['formData']>>
    try {
      form = await new Response(bytes, { headers: { 'content-type': type } }).formData()
    } catch {
      throw new ApiError('invalid_request', 'the multipart body is malformed (check the boundary and the part headers)')
    }
    const entries = [...form.entries()]
    // Bun's parser drops a part with an empty name or no Content-Disposition: counted here, so that
    // "exactly one part" holds of the body as sent, not only of what the parser kept.
    const parts = partCount(bytes, value)
    if (parts === undefined) throw new ApiError('invalid_request', 'the multipart body has no closing boundary (was the upload cut short?)')
    if (parts !== entries.length) {
      throw new ApiError('invalid_request', `the form has ${parts} parts, of which ${entries.length} named: send exactly one part, Content-Disposition: form-data; name="${field}"; filename="…"`, field)
    }
    const names = [...new Set(entries.map(([name]) => name))].filter(name => name !== field)
    if (names.length > 0) throw new ApiError('invalid_request', `unexpected form field(s) ${names.slice(0, 5).map(name => `"${name.slice(0, 50)}"`).join(', ')}: only "${field}" is accepted`, names[0])
    if (entries.length === 0) throw new ApiError('invalid_request', `the form has no "${field}" part; send the document as a file in "${field}"`, field)
    if (entries.length > 1) throw new ApiError('invalid_request', `send exactly one "${field}" part (got ${entries.length})`, field)
    const file = entries[0]![1]
    if (typeof file === 'string') throw new ApiError('invalid_request', `"${field}" must be a file part (with a filename), not a text value`, field)
    return { [field]: file }
  }
}
