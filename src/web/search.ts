import { ACCEPT_ENCODING, CorruptBody, decodedResponse } from './content-coding'
import { oneLine } from './page-text'
import { readCapped } from './read-page'

/** One web search as the API takes it (POST /api/v1/web/search), backend-neutral. */
export interface SearchQuery {
  query: string
  /** 1–20 results. */
  count: number
  /** Zero-based page of `count` results (Brave's meaning; SearXNG pages are its own). */
  offset: number
  freshness?: 'day' | 'week' | 'month' | 'year'
  /** ISO 3166-1 alpha-2 country code, upper case. */
  country?: string
  safeSearch?: 'off' | 'moderate' | 'strict'
}

/** One result, already in the API's terms. */
export interface SearchResult {
  title: string
  url: string
  description: string
  /** ISO 8601 when the backend knows when the page was published, else null. */
  published: string | null
  siteName: string
}

/**
 * Outcomes as values. `failed`: the backend failed or answered garbage (502).
 */
export type SearchOutcome = { ok: true; results: SearchResult[] } | { ok: false; kind: 'failed'; message: string }

/** A search engine behind the gateway (config `web.search.backend`). */
export interface SearchBackend {
  readonly name: string
  /** Why this backend cannot honour `query` (checked before billing), or null. */
  unsupported(query: SearchQuery): string | null
  search(query: SearchQuery, signal: AbortSignal): Promise<SearchOutcome>
}

// The markup search backends put in snippets (Brave's <strong> highlights): only HTML's inline
// and simple block elements are removed, so text such as `Vec<T>` or `HashMap<K, V>` stays as written.
// Attributes must be name="value" (quoted): `a<b and c>d` is text, not a <b> tag.
const SNIPPET_TAG = /<\/?(?:a|abbr|b|bdi|bdo|br|cite|code|del|dfn|div|em|font|h[1-6]|i|ins|kbd|li|mark|ol|p|q|s|samp|small|span|strong|sub|sup|time|u|ul|var|wbr)(?:\s+[\w:-]{1,40}\s*=\s*(?:"[^"<>]{0,200}"|'[^'<>]{0,200}'))*\s*\/?>/gi

/**
 * Strips tags and decodes the few entities search snippets carry (Brave marks matches with
 * <strong>), on one line (oneLine: a result's fields are quoted one a line).
 */
export function plainSnippet(text: string): string {
  return oneLine(text.replace(SNIPPET_TAG, '').replace(/&(amp|lt|gt|quot|#39|#x27|apos|nbsp);/g, (_, name: string) => ENTITIES[name] ?? ''))
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", '#x27': "'", apos: "'", nbsp: ' ' }

/**
 * A result's URL as the WHATWG URL parser writes it, when it is an http(s) URL; else null (the
 * result is dropped). The scheme is case-insensitive (RFC 3986 §3.1): `HTTPS://A.com/x` is
 * `https://a.com/x`.
 */
export function resultUrl(value: unknown): string | null {
  if (typeof value !== 'string') return null
  try {
    const parsed = new URL(value)
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.href : null
  } catch {
    return null
  }
}

/** The host part of a result URL, for `site_name` when the backend names no site. */
export function hostOf(url: string): string {
  try {
    return new URL(url).hostname.replace(/^www\./, '')
  } catch {
    return ''
  }
}

// A page of at most 20 results is tens of KiB; anything near this is not a search answer.
const MAX_ANSWER_BYTES = 4 * 1024 * 1024

/**
 * GET a backend's JSON within its deadline and size cap: parsed body, or a failure message. The
 * cap is on the decoded answer: its content codings are decoded as it is read (content-coding.ts),
 * not by fetch, which would inflate a compression bomb ahead of the reader.
 */
export async function getJson(url: string, headers: Record<string, string>, timeoutMs: number, signal: AbortSignal, backend: string): Promise<{ ok: true; body: unknown } | { ok: false; message: string }> {
  const deadline = AbortSignal.timeout(timeoutMs)
  try {
    const combined = AbortSignal.any([signal, deadline])
    const response = await fetch(url, {
      headers: { accept: 'application/json', 'accept-encoding': ACCEPT_ENCODING, ...headers },
      signal: combined,
      redirect: 'error',
      decompress: false,
    })
    if (!response.ok) {
      await response.body?.cancel()
      return { ok: false, message: `the ${backend} search backend answered HTTP ${response.status}` }
    }
    const decoded = await decodedResponse(response, `the ${backend} search backend's answer`)
    if (!decoded.ok) return decoded
    // Read one byte past the cap, so an answer that reaches it is refused rather than cut.
    let bytes: Uint8Array
    try {
      bytes = await readCapped(decoded.body, MAX_ANSWER_BYTES + 1, combined)
    } catch (error) {
      if (error instanceof CorruptBody) return { ok: false, message: `the ${backend} search backend's answer: ${error.message}` }
      throw error
    }
    if (bytes.byteLength > MAX_ANSWER_BYTES) return { ok: false, message: `the ${backend} search backend answered more than ${MAX_ANSWER_BYTES} bytes` }
    const text = new TextDecoder().decode(bytes)
    try {
      return { ok: true, body: JSON.parse(text) }
    } catch {
      return { ok: false, message: `the ${backend} search backend answered something that is not JSON` }
    }
  } catch (error) {
    if (deadline.aborted) return { ok: false, message: `the ${backend} search backend did not answer within ${timeoutMs} ms` }
    return { ok: false, message: `the ${backend} search backend is unreachable (${(error as { code?: string }).code ?? (error as Error).message})` }
  }
}
