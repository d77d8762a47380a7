import type { Logger } from '../observability/logger'
import { addressProblem, AddressAllowance, dialableAddress } from './address-policy'
import { ACCEPT_ENCODING } from './content-coding'
import { readPage, type FetchedPage, type GatewayFailure, type PdfReader } from './read-page'
import type { Resolver } from './resolver'
import { parseSafeUrl, type SafeUrl } from './url-guard'

/** The fetcher's limits (config `web.fetch`). */
export interface FetchLimits {
  /** The whole page: every hop, the headers and the body. */
  readonly timeoutMs: number
  /** Per hop: connecting and receiving the response headers. */
  readonly connectTimeoutMs: number
  readonly maxBytes: number
  readonly maxRedirects: number
  readonly maxContentChars: number
}

/** A URL whose host resolved to addresses that all passed the policy; the fetch dials `address`. */
export interface FetchTarget {
  readonly url: SafeUrl
  readonly parsed: URL
  readonly host: string
  readonly isIp: boolean
  /** The checked address the connection goes to (never resolved again). */
  readonly address: string
}

/**
 * Outcomes as values. `rejected`: the policy refused (a private answer, a redirect to a
 * forbidden place, a content type that is not text): the caller's problem, never billed.
 * `unresolvable`: the name has no addresses. `failed`: the network or the page failed after
 * the request may have reached it: the outcome is unknown (502 `provider_error`). `gateway`: the
 * page arrived but the gateway could not read it (GatewayFailure).
 */
export type TargetResult = { ok: true; target: FetchTarget } | { ok: false; kind: 'rejected' | 'unresolvable' | 'failed'; message: string }
export type PageResult = { ok: true; page: FetchedPage } | { ok: false; kind: 'rejected' | 'failed'; message: string } | GatewayFailure

/** The HTTP client seam: Bun's fetch in production; tests wrap it to log every outbound call. */
export type Transport = (url: string, init: RequestInit & { tls?: { serverName?: string; ca?: string }; decompress?: boolean }) => Promise<Response>

const USER_AGENT = 'svc-gateway-fetch/1 (+request-local retrieval; no crawling)'
const ACCEPT = 'text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.8,application/xml;q=0.8,application/pdf;q=0.7,text/*;q=0.7'
const REDIRECTS = new Set([301, 302, 303, 307, 308])

/**
 * The pinned fetcher (SECURITY-NOTES.md §1.3). For each hop: resolve once through the Resolver
 * seam, refuse if ANY answer is not global unicast, then connect to the checked address itself,
 * so a second DNS answer (rebinding) can never be used. Bun's fetch ignores a `lookup` option,
 * so the pin is made in the URL: `https://<checked ip>/path` with `tls.serverName` and `Host`
 * set to the real host name, which keeps SNI and certificate verification on the name.
 * Redirects are followed by hand (every Location goes through parseSafeUrl and the resolver
 * again, at most `maxRedirects` hops). No cookies, credentials or client headers are ever
 * sent, so nothing can leak across origins; Set-Cookie is ignored.
 *
 * Probed on Bun 1.4.5: `fetch(url, { lookup })` ignores the hook (the name is resolved by the
 * system); `node:https.request({ lookup })` does honour it; `fetch` with `tls.serverName` to an
 * IP verifies the certificate against that name (ERR_TLS_CERT_ALTNAME_INVALID otherwise), also
 * on a pooled connection. The fetch pin was chosen: one HTTP client for the whole gateway,
 * streaming bodies with abort, and the dialled address is visible in the URL,
 * which is what the egress log records.
 */
export class WebFetcher {
  constructor(
    private readonly resolver: Resolver,
    readonly limits: FetchLimits,
    private readonly options: { allowance?: AddressAllowance; transport?: Transport; tlsCa?: string; readPdf?: PdfReader; logger?: Logger } = {},
  ) {}

  /** Resolves a checked URL's host and checks every address; nothing is connected to. */
  async resolveTarget(url: SafeUrl, signal: AbortSignal): Promise<TargetResult> {
    const checked = parseSafeUrl(url)
    if (!checked.ok) return { ok: false, kind: 'rejected', message: checked.message }
    if (checked.isIp) return { ok: true, target: { url, parsed: checked.parsed, host: checked.host, isIp: true, address: dialableAddress(checked.host) } }
    const answer = await this.resolver.resolve(checked.host, signal)
    if (!answer.ok) return { ok: false, kind: answer.reason === 'not-found' ? 'unresolvable' : 'failed', message: answer.message }
    if (answer.addresses.length === 0) return { ok: false, kind: 'unresolvable', message: `${checked.host} has no addresses` }
    for (const address of answer.addresses) {
      if (this.options.allowance?.allows(address)) continue
      const problem = addressProblem(address)
      // One private answer among public ones is enough to refuse: the connector could pick it.
      if (problem) {
        // The refusal names the kind of address, never the address: it reaches the caller (and a
        // chat's model), is billed nothing, and would map internal DNS for any key (QA). The log keeps it.
        this.options.logger?.info('web fetch refused a name resolving to a non-public address', { host: checked.host, address, reason: problem })
        return { ok: false, kind: 'rejected', message: `${checked.host} resolves to ${problem}; only public addresses are fetched` }
      }
    }
    return { ok: true, target: { url, parsed: checked.parsed, host: checked.host, isIp: false, address: dialableAddress(answer.addresses[0]!) } }
  }

  /**
   * Fetches a resolved target within the time and byte caps, following redirects by hand.
   * `signal` aborts it (client gone); the time cap is the fetcher's own. `refuse` says why a
   * redirect target is not to be followed (a chat client's domain lists), or null.
   */
  async fetchPage(first: FetchTarget, signal: AbortSignal, refuse?: (url: string) => string | null): Promise<PageResult> {
    const deadline = AbortSignal.timeout(this.limits.timeoutMs)
    const combined = AbortSignal.any([signal, deadline])
    let target = first
    let headersLate = false
    try {
      for (let hop = 0; ; hop += 1) {
        // Connect and first byte have their own, shorter deadline, cleared once headers arrive.
        const hopAbort = new AbortController()
        const timer = setTimeout(() => {
          headersLate = true
          hopAbort.abort(new DOMException('no response headers in time', 'TimeoutError'))
        }, this.limits.connectTimeoutMs)
        let response: Response
        try {
          response = await this.send(target, AbortSignal.any([combined, hopAbort.signal]))
        } finally {
          clearTimeout(timer)
        }
        if (!REDIRECTS.has(response.status)) return await readPage(first.url, target.url, response, this.limits, combined, this.pdfReader(signal))
        await response.body?.cancel()
        const location = locationText(response.headers.get('location'))
        if (location === null) return { ok: false, kind: 'failed', message: `${target.url} answered ${response.status} without a Location` }
        if (hop >= this.limits.maxRedirects) return { ok: false, kind: 'rejected', message: `${first.url} redirects more than ${this.limits.maxRedirects} times` }
        let next: string
        try {
          next = new URL(location, target.parsed).href
        } catch {
          return { ok: false, kind: 'rejected', message: `${target.url} redirects to an unparseable Location` }
        }
        const refused = refuse?.(next)
        if (refused) return { ok: false, kind: 'rejected', message: `${target.url} redirects to ${quotedTarget(next)}: ${refused}` }
        const resolved = await this.resolveTarget(next as SafeUrl, combined)
        if (!resolved.ok) {
          const kind = resolved.kind === 'failed' ? 'failed' : 'rejected'
          return { ok: false, kind, message: `${target.url} redirects to ${quotedTarget(next)}: ${resolved.message}` }
        }
        target = resolved.target
      }
    } catch (error) {
      if (deadline.aborted) return { ok: false, kind: 'failed', message: `${first.url} did not answer within ${this.limits.timeoutMs} ms` }
      if (headersLate) return { ok: false, kind: 'failed', message: `${target.url} did not start answering within ${this.limits.connectTimeoutMs} ms` }
      if (signal.aborted) return { ok: false, kind: 'failed', message: 'the request was cancelled' }
      const code = (error as { code?: string }).code
      return { ok: false, kind: 'failed', message: `fetching ${target.url} failed (${code ?? (error as Error).message ?? 'network error'})` }
    }
  }

  /**
   * The PDF reader for one fetch: `timeout_ms` bounds the retrieval (all hops and the body), and
   * the extraction then runs under the pool's own job timeout (its 503 names it), cut only by the
   * caller (the client leaving, the drain). Under the fetch deadline a cold or busy pool read as
   * "did not answer within timeout_ms" about a page that had answered.
   */
  private pdfReader(signal: AbortSignal): PdfReader | undefined {
    const read = this.options.readPdf
    return read && (bytes => read(bytes, signal))
  }

  /** One request, to the checked address, with SNI and Host set to the real host. */
  private send(target: FetchTarget, signal: AbortSignal): Promise<Response> {
    const { parsed } = target
    const literal = target.address.includes(':') ? `[${target.address}]` : target.address
    const pinned = `${parsed.protocol}//${literal}${parsed.port ? `:${parsed.port}` : ''}${pathAndQuery(parsed)}`
    const https = parsed.protocol === 'https:'
    const tls = https ? { ...(target.isIp ? {} : { serverName: target.host }), ...(this.options.tlsCa ? { ca: this.options.tlsCa } : {}) } : undefined
    const transport = this.options.transport ?? (fetch as Transport)
    return transport(pinned, {
      method: 'GET',
      redirect: 'manual',
      signal,
      // The body is decoded under the byte cap by readPage (content-coding.ts), never by fetch.
      decompress: false,
      headers: { host: parsed.host, 'user-agent': USER_AGENT, accept: ACCEPT, 'accept-encoding': ACCEPT_ENCODING },
      ...(tls ? { tls } : {}),
    })
  }
}

/**
 * A Location header's text. Header values are bytes (Fetch); Bun hands them over one character per
 * byte, as Latin-1, so a raw UTF-8 `/café` reads `/cafÃ©` and would be followed to
 * `/caf%C3%83%C2%A9`. Browsers parse Location as UTF-8, so its bytes are read so here when they
 * are valid UTF-8; otherwise the value is left as it came.
 */
function locationText(value: string | null): string | null {
  if (value === null || !/[\u0080-\u00ff]/.test(value) || /[^\u0000-\u00ff]/.test(value)) return value
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(value, character => character.charCodeAt(0)))
  } catch {
    return value
  }
}

/** What a request asks the server for: the fragment is never sent, and an empty query (`/a?`) is sent as none. */
function pathAndQuery(parsed: URL): string {
  return `${parsed.pathname}${parsed.search}`
}

/**
 * Which page a URL names, for refusing duplicates: the origin and the path and query the fetch
 * sends, with percent-encoded unreserved characters decoded and the other escapes' hex digits in
 * upper case (RFC 3986 §6.2.2), so `/a`, `/a?`, `/a#x` and `/%61` are one page.
 */
export function pageKey(parsed: URL): string {
  return `${parsed.origin}${pathAndQuery(parsed).replace(/%[0-9a-fA-F]{2}/g, normalizeEscape)}`
}

function normalizeEscape(escape: string): string {
  const character = String.fromCharCode(Number.parseInt(escape.slice(1), 16))
  return /[A-Za-z0-9\-._~]/.test(character) ? character : escape.toUpperCase()
}

/**
 * A redirect's target as a refusal quotes it (to the client, or in a chat's "Not fetched" note the
 * model reads): without its user:password, query or fragment, any of which may be the secret it is
 * refused for (QA: "…?access_token=…: the query key looks like a credential" quoted the token).
 */
function quotedTarget(href: string): string {
  const url = new URL(href)
  return `${url.protocol}//${url.host}${url.pathname}${url.search !== '' || url.hash !== '' ? '?[redacted]' : ''}`.slice(0, 200)
}
