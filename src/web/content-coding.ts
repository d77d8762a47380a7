import { pipeline, Readable, type Transform } from 'node:stream'
import { constants, createBrotliDecompress, createGunzip, createInflate, createInflateRaw, createZstdDecompress } from 'node:zlib'

/**
 * A page's or a search backend's content codings (RFC 9110 §8.4), decoded here rather than by fetch. Bun's fetch
 * inflates ahead of its reader with no backpressure: a 49 KB zstd body (1.6 GB of spaces) or a
 * 2.4 KB brotli one (1 GB) held gigabytes however early the byte cap stopped reading (QA). So
 * pages and search answers are fetched with `decompress: false`, and each layer goes through a node:zlib stream,
 * which in Bun 1.4.5 does wait for its reader: it inflates 16 KiB at a time and stops once its
 * buffer is full (measured: 80 KiB read from a 1 GB brotli, gzip or zstd bomb, and the RSS grew
 * by a few MB). Stopping at `max_bytes` then leaves the rest of the bomb uninflated.
 *
 * Every coding advertised is one decoded that way; its working memory is bounded by the format:
 * a 32 KiB window for gzip and deflate, at most 16 MiB for brotli, and 8 MiB for zstd, the
 * window RFC 9659 sets for HTTP (a frame asking for more is refused, not allocated).
 */
export const ACCEPT_ENCODING = 'gzip, deflate, br, zstd'

type Coding = 'gzip' | 'deflate' | 'br' | 'zstd'

/** The coding names a server may send (`x-gzip` is gzip, RFC 9110 §8.4.1.3), by lower-case name. */
const CODINGS = new Map<string, Coding>([['gzip', 'gzip'], ['x-gzip', 'gzip'], ['deflate', 'deflate'], ['br', 'br'], ['zstd', 'zstd']])

/** A misconfigured server may compress twice (`gzip, br`); each layer is a decoder with its own window, so the stack is held short (curl holds it to 5 since CVE-2022-32206). */
const MAX_CODINGS = 2

const ZSTD_HTTP_WINDOW_LOG = 23

/**
 * A response's body as written: its content codings decoded as it is read (decodedBody; the
 * caller's byte cap stops the decoders), or why they cannot be decoded, the body then cancelled.
 * `what` names the body in that message ("the page").
 */
export async function decodedResponse(response: Response, what: string): Promise<{ ok: true; body: AsyncIterable<Uint8Array> | null } | { ok: false; message: string }> {
  const coded = contentCodings(response.headers.get('content-encoding'), what)
  if (!coded.ok) {
    await response.body?.cancel()
    return coded
  }
  const body = response.body
  return { ok: true, body: body && (coded.codings.length === 0 ? body : decodedBody(body, coded.codings)) }
}

/** The codings of a Content-Encoding header in the order they were applied, or why they cannot be decoded. */
function contentCodings(header: string | null, what: string): { ok: true; codings: Coding[] } | { ok: false; message: string } {
  const codings: Coding[] = []
  // A list (RFC 9110 §8.4), its empty elements ignored (§5.6.1); identity is no coding.
  for (const element of (header ?? '').split(',')) {
    const name = element.trim().toLowerCase()
    if (name === '' || name === 'identity') continue
    const coding = CODINGS.get(name)
    if (coding === undefined) return { ok: false, message: `${what} is sent in the content coding "${element.trim().slice(0, 50)}", which this gateway does not decode (it asks for ${ACCEPT_ENCODING})` }
    codings.push(coding)
  }
  if (codings.length > MAX_CODINGS) return { ok: false, message: `${what} is sent in ${codings.length} stacked content codings (${codings.join(', ')}); at most ${MAX_CODINGS} are decoded` }
  return { ok: true, codings }
}

/** The body's reader (its type spelled through getReader: Bun's global reader type and node:stream/web's differ). */
type BodyReader = ReturnType<typeof readerOf>

function readerOf(body: ReadableStream<Uint8Array>) {
  return body.getReader()
}

/** A body whose content coding does not decode: the page arrived, corrupt or cut short. */
export class CorruptBody extends Error {}

/**
 * The page's bytes as written: `body` decoded through `codings`, last applied first, produced only
 * as fast as they are read. Leaving the loop early (the byte cap) stops every decoder and cancels
 * the body. A decoding failure throws CorruptBody; a network failure is thrown as it came.
 */
async function* decodedBody(body: ReadableStream<Uint8Array>, codings: readonly Coding[]): AsyncGenerator<Uint8Array> {
  const reader = readerOf(body)
  const order = codings.toReversed()
  // HTTP's deflate is the zlib format, but servers also send raw deflate under that name, which
  // browsers (and Bun's own decompression) read: the first two bytes tell them apart. An empty
  // body is no coded data at all (as fetch read it), not a truncated stream.
  const head = await readHead(reader, order[0] === 'deflate' ? 2 : 1)
  if (head.length === 0) return
  const state: { networkError?: unknown } = {}
  const stages: Array<Readable | Transform> = [Readable.from(remaining(reader, head, state), { objectMode: false })]
  for (const [index, coding] of order.entries()) stages.push(decoder(coding, index === 0 && !zlibHeader(head)))
  const output = stages.at(-1) as Readable
  // Any stage failing destroys them all, with that error, which the loop below then throws.
  pipeline(stages, () => {})
  try {
    for await (const chunk of output) yield chunk as Uint8Array
  } catch (error) {
    if ('networkError' in state) throw state.networkError
    const code = (error as { code?: string }).code
    throw new CorruptBody(`its ${codings.join(', ')} content coding does not decode (${code ?? (error as Error).message}): the body is corrupt or cut short`)
  } finally {
    for (const stage of stages) stage.destroy()
  }
}

function decoder(coding: Coding, rawDeflate: boolean): Transform {
  switch (coding) {
    case 'gzip':
      return createGunzip()
    case 'deflate':
      return rawDeflate ? createInflateRaw() : createInflate()
    case 'br':
      return createBrotliDecompress()
    case 'zstd':
      return createZstdDecompress({ params: { [constants.ZSTD_d_windowLogMax]: ZSTD_HTTP_WINDOW_LOG } })
  }
}

/** Whether the first bytes open a zlib stream (RFC 1950 §2.2: method 8, a window of at most 32 KiB, the header a multiple of 31). */
function zlibHeader(head: Uint8Array[]): boolean {
  const bytes = Buffer.concat(head)
  if (bytes.byteLength < 2) return true
  return (bytes[0]! & 0x0f) === 8 && bytes[0]! >> 4 <= 7 && ((bytes[0]! << 8) | bytes[1]!) % 31 === 0
}

/** The body's first chunks, until they hold `size` bytes or the body ends. */
async function readHead(reader: BodyReader, size: number): Promise<Uint8Array[]> {
  const head: Uint8Array[] = []
  let length = 0
  try {
    while (length < size) {
      const { done, value } = await reader.read()
      if (done) break
      if (value.byteLength === 0) continue
      head.push(value)
      length += value.byteLength
    }
  } catch (error) {
    await reader.cancel().catch(() => {})
    throw error
  }
  return head
}

/**
 * `head`, then the rest of the body. A failed read is recorded as the network's (a decoder's
 * failure is thrown into this generator too, by the stream that wraps it, and is not one); the
 * body is cancelled when the decoders stop, early or not.
 */
async function* remaining(reader: BodyReader, head: Uint8Array[], state: { networkError?: unknown }): AsyncGenerator<Uint8Array> {
  try {
    yield* head
    for (;;) {
      let next: Awaited<ReturnType<BodyReader['read']>>
      try {
        next = await reader.read()
      } catch (error) {
        state.networkError = error
        throw error
      }
      if (next.done) return
      yield next.value
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
}
