import { looksBinary } from '../documents/text'
import type { ApiError } from '../http/errors'
import { cutText } from '../lib/characters'
import { lazy } from '../lib/lazy'
import { CorruptBody, decodedResponse } from './content-coding'
import { clean, plainText, toIsoDate } from './page-text'
import type { SafeUrl } from './url-guard'

/** One retrieved page (spec §2.5, before the wire names). */
export interface FetchedPage {
  title: string
  /** The URL as requested (redirects are followed, but results are keyed by what was asked). */
  url: string
  content: string
  /** From Last-Modified, else the page's own metadata, else null. */
  lastUpdated: string | null
}

type Kind = 'html' | 'text' | 'pdf'

/** The HTML walk (and htmlparser2 under it), loaded on the first HTML page read. */
const loadHtmlToText = lazy(() => import('./html-to-text'))

/**
 * PDF text through the document extraction pool (src/documents/): the page's bytes never touch
 * the event loop's parser. Resolves to the text, or rejects with a message a person understands.
 */
export type PdfReader = (bytes: Uint8Array, signal: AbortSignal) => Promise<{ ok: true; text: string } | { ok: false; kind: 'rejected' | 'failed'; message: string } | GatewayFailure>

/**
 * A page that arrived but that the gateway itself could not read now: its extraction pool was
 * full (429 with Retry-After), too slow or stopping (503). `error` is what an upload would get.
 */
export interface GatewayFailure {
  ok: false
  kind: 'gateway'
  message: string
  error: ApiError
}

/**
 * Text-like media types, and PDF when a PdfReader is wired; everything else (images, archives,
 * binaries, unlabelled bytes) is refused rather than guessed at. YAML, TOML and JSON Lines have
 * registered application/ types (RFC 9512 for YAML) that servers send for config and data files.
 */
const TEXT_APPLICATION_TYPES = new Set(['application/yaml', 'application/x-yaml', 'application/toml', 'application/jsonl', 'application/x-ndjson'])

function kindOf(mediaType: string): Kind | null {
  if (mediaType === 'text/html' || mediaType === 'application/xhtml+xml') return 'html'
  if (mediaType === 'application/pdf') return 'pdf'
  if (mediaType === 'application/json' || mediaType.endsWith('+json')) return 'text'
  if (mediaType === 'application/xml' || mediaType.endsWith('+xml')) return 'text'
  if (TEXT_APPLICATION_TYPES.has(mediaType) || mediaType.endsWith('+yaml')) return 'text'
  if (mediaType.startsWith('text/') && mediaType !== 'text/javascript' && mediaType !== 'text/css') return 'text'
  return null
}

type ReadResult = { ok: true; page: FetchedPage } | { ok: false; kind: 'rejected' | 'failed'; message: string } | GatewayFailure

/** Reads a final (non-redirect) response into a page, within the byte and text caps. */
export async function readPage(
  requested: SafeUrl,
  final: SafeUrl,
  response: Response,
  limits: { maxBytes: number; maxContentChars: number },
  signal: AbortSignal,
  readPdf?: PdfReader,
): Promise<ReadResult> {
  if (response.status < 200 || response.status > 299) {
    await response.body?.cancel()
    return { ok: false, kind: 'failed', message: `${final} answered HTTP ${response.status}` }
  }
  const contentType = response.headers.get('content-type') ?? ''
  const mediaType = contentType.split(';')[0]!.trim().toLowerCase()
  const kind = kindOf(mediaType)
  if (kind === null || (kind === 'pdf' && readPdf === undefined)) {
    await response.body?.cancel()
    const why = kind === 'pdf' ? 'PDF documents are not read by this gateway (no document extraction pool)'
      : mediaType === '' ? 'the page declares no Content-Type' : `${mediaType.slice(0, 100)} is not a text-like content type`
    return { ok: false, kind: 'rejected', message: `${final}: ${why}; only HTML, plain text, JSON, JSON Lines, XML, YAML, TOML and PDF pages are fetched` }
  }
  const decoded = await decodedResponse(response, 'the page')
  if (!decoded.ok) return { ok: false, kind: 'rejected', message: `${final}: ${decoded.message}` }
  let body: Uint8Array
  try {
    // One byte past the cap tells a page cut there from one that ends there.
    body = await readCapped(decoded.body, limits.maxBytes + 1, signal)
  } catch (error) {
    if (error instanceof CorruptBody) return { ok: false, kind: 'failed', message: `${final}: ${error.message}` }
    throw error
  }
  const cut = body.byteLength > limits.maxBytes
  const bytes = cut ? body.subarray(0, limits.maxBytes) : body
  const headerDate = response.headers.get('last-modified')
  const fallbackTitle = final.replace(/^https?:\/\//, '').slice(0, 200)
  if (kind === 'pdf') {
    // A PDF cut at the byte cap cannot be read (its cross-reference table is at the end): refuse
    // it whole. One of exactly max_bytes is not cut, and is read.
    if (cut) return { ok: false, kind: 'rejected', message: `${final}: the PDF is larger than the ${limits.maxBytes}-byte page limit` }
    const read = await readPdf!(bytes, signal)
    if (!read.ok) return { ...read, message: `${final}: ${read.message}` }
    return { ok: true, page: { title: fallbackTitle, url: requested, content: cutText(clean(read.text), limits.maxContentChars), lastUpdated: headerDate ? toIsoDate(headerDate) : null } }
  }
  // RFC 7303 §3: an XML type without a charset parameter is decoded as its XML declaration says.
  const isXml = mediaType === 'application/xml' || mediaType === 'text/xml' || mediaType.endsWith('+xml')
  const charset = charsetOf(contentType) ?? (isXml ? xmlDeclaredCharset(bytes) : undefined) ?? (kind === 'html' ? sniffCharset(bytes) : undefined)
  const text = decode(bytes, charset, cut)
  // A stray NUL or control character in an HTML page is a slip the HTML walk drops; many are binary.
  if (looksBinary(text, { strayNul: kind === 'html' })) {
    return { ok: false, kind: 'rejected', message: `${final}: the page is labelled ${mediaType.slice(0, 100)} but holds binary data; only HTML, plain text, JSON, JSON Lines, XML, YAML, TOML and PDF pages are fetched` }
  }
  if (kind === 'html') {
    const { htmlToText } = await loadHtmlToText()
    const page = htmlToText(text, limits.maxContentChars, { xhtml: mediaType === 'application/xhtml+xml' })
    return {
      ok: true,
      page: { title: page.title || fallbackTitle, url: requested, content: page.text, lastUpdated: (headerDate && toIsoDate(headerDate)) || page.modified },
    }
  }
  return {
    ok: true,
    page: { title: fallbackTitle, url: requested, content: cutText(plainText(text), limits.maxContentChars), lastUpdated: headerDate ? toIsoDate(headerDate) : null },
  }
}

/**
 * The body up to `maxBytes` (a page's after decoding its content codings): a longer one is cut
 * there, not refused, so a compression bomb or an endless stream costs at most the cap. Leaving
 * the loop cancels the body (and stops its decoders).
 */
export async function readCapped(body: AsyncIterable<Uint8Array> | null, maxBytes: number, signal: AbortSignal): Promise<Uint8Array> {
  if (body === null) return new Uint8Array()
  const parts: Uint8Array[] = []
  let total = 0
  for await (const value of body) {
    if (signal.aborted) throw signal.reason
    const room = maxBytes - total
    const part = value.byteLength > room ? value.subarray(0, room) : value
    parts.push(part)
    total += part.byteLength
    if (total >= maxBytes) break
  }
  return Buffer.concat(parts, total)
}

/** The header's charset when it names an encoding; an unknown label counts as none, so an HTML page's <meta> still decides (as in browsers). */
function charsetOf(contentType: string): string | undefined {
  const label = /;\s*charset="?([A-Za-z0-9._:-]{1,40})"?/i.exec(contentType)?.[1]
  if (label === undefined) return undefined
  try {
    return new TextDecoder(label as 'utf-8').encoding
  } catch {
    return undefined
  }
}

/** The first KiB (the HTML sniffing window), each byte as one character. */
function sniffingWindow(bytes: Uint8Array): string {
  return new TextDecoder('latin1' as 'utf-8').decode(bytes.subarray(0, 1024))
}

/** `<meta charset>` or its http-equiv form, in the sniffing window. */
function sniffCharset(bytes: Uint8Array): string | undefined {
  const label = /<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9._:-]{1,40})/i.exec(sniffingWindow(bytes))?.[1]
  return label === undefined ? undefined : prescanEncoding(label)
}

/**
 * The `encoding` of the XML declaration opening the body, in the sniffing window (XML 1.0 §2.8,
 * §4.3.3). A byte order mark would come first and wins (decode()). Without a declaration, or one
 * without `encoding`, the XML default, UTF-8, applies.
 */
function xmlDeclaredCharset(bytes: Uint8Array): string | undefined {
  const label = /^<\?xml\s[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]{1,40})["']/.exec(sniffingWindow(bytes))?.[1]
  return label === undefined ? undefined : prescanEncoding(label)
}

/**
 * The encoding a label found by reading the bytes as ASCII stands for (a <meta>'s, WHATWG HTML,
 * "prescan a byte stream", step "get an encoding"; an XML declaration's likewise): such a label
 * cannot be in UTF-16, so UTF-16LE/BE labels (`utf-16`, `unicode`, `ucs-2`, …) mean UTF-8;
 * `x-user-defined` means windows-1252. An unknown label is left to decode()'s UTF-8 fallback.
 */
function prescanEncoding(label: string): string {
  let encoding: string
  try {
    encoding = new TextDecoder(label as 'utf-8').encoding
  } catch {
    return label
  }
  if (encoding === 'utf-16le' || encoding === 'utf-16be') return 'utf-8'
  if (encoding === 'x-user-defined') return 'windows-1252'
  return encoding
}

/** The encoding a byte order mark names, which wins over any label (WHATWG Encoding, "decode"). */
function bomEncoding(bytes: Uint8Array): string | undefined {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return 'utf-8'
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return 'utf-16le'
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return 'utf-16be'
  return undefined
}

/**
 * The text of `bytes`. A body `cut` at the byte cap may end inside a character: decoded as a
 * stream, that partial sequence is left out rather than read as a U+FFFD that is not in the page.
 */
function decode(bytes: Uint8Array, charset: string | undefined, cut: boolean): string {
  try {
    // The decoder drops a leading BOM of its own encoding.
    return new TextDecoder((bomEncoding(bytes) ?? charset ?? 'utf-8') as 'utf-8').decode(bytes, { stream: cut })
  } catch {
    // An unknown label: UTF-8 with replacement characters rather than a failure.
    return new TextDecoder('utf-8').decode(bytes, { stream: cut })
  }
}
