import ipaddr from 'ipaddr.js'
import { ApiError, UpstreamRefusal } from '../http/errors'
import { UpstreamError } from '../providers/types'

// What in an upstream's message can name the operator's network (SECURITY-NOTES.md §1.2's local
// names among them): URLs, IP literals, `host:port`, and local-use names. Public names (a docs link)
// go too: the gateway cannot tell them apart, and the client needs the problem, not the address.
const URL_PATTERN = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]*[^\s"'<>`.,;:)\]]/gi
const IPV6_PATTERN = /\[[0-9a-f:.]*:[0-9a-f:.]*\](?::\d{1,5})?/gi
// An IPv6 literal without brackets (`connect to 2001:db8::5 failed`, `fe80::1%eth0`): a run of
// hex groups and colons not inside a word, replaced only when it is a valid address, so a time
// ("10:30:00") or a MAC address is kept.
const BARE_IPV6_PATTERN = /(?<![0-9a-z:.%])[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}(?::?\d{1,3}(?:\.\d{1,3}){3})?(?:%[0-9a-z._-]+)?(?![0-9a-z:]|\.\d)/gi
const IPV4_PATTERN = /\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b/g
// `name:port` whose name has a letter (checked apart: "10:30" is a time), a single label
// (`inference:8000`) too. It may be followed by a colon, as Go's net errors write it ("dial tcp
// inference:8000: connect: connection refused"), but not by `:` and a digit: "T10:30:00" is a
// time. Like the name and URL patterns, it is quadratic on a long run of labels ("a-a-a-…"):
// what it reads is the upstream's message, cut to 500 bytes by the adapters (review).
const HOST_PORT_PATTERN = /\b[a-z0-9-]+(?:\.[a-z0-9-]+)*:\d{2,5}\b(?!:\d)/gi
// The whole name, labels after the local-use one too (`gw.corp.example.com`: before, only
// `gw.corp` went, leaving the organization's domain); labels may hold `_`.
const LOCAL_NAME_PATTERN = /\b(?:[\w-]+\.)+(?:internal|local|localdomain|lan|intranet|corp|home\.arpa)(?:\.[\w-]+)*(?![\w-])|\blocalhost\b/gi
// A URL quoted percent-encoded (in a query string), once or more, its `://` whole or in part:
// `http%3A%2F%2F…`, `http%253A%252F%252F…`, Python's quote() `https%3A//…`. One wholly literal is URL_PATTERN's.
const ENCODED_URL_PATTERN = /\b[a-z][a-z0-9+.-]*(?::|%(?:25)*3a)(?:\/|%(?:25)*2f){2}[^\s"'<>`]*[^\s"'<>`.,;:)\]]/gi

/**
 * A request no backend's adapter would send (UpstreamError phase `adapter`), as the client gets
 * it: no provider was called (Router.open ends on such a refusal only when none was).
 */
export class AdapterRefusal extends ApiError {}

/** Longest Retry-After passed on from an upstream (one day). */
const MAX_RETRY_AFTER_S = 86_400

/** `text` without the network addresses it names. */
export function withoutAddresses(text: string): string {
  return text.replace(ENCODED_URL_PATTERN, url => (url.includes('%') ? '[url]' : url)).replace(URL_PATTERN, '[url]').replace(IPV6_PATTERN, '[host]').replace(BARE_IPV6_PATTERN, bareIpv6).replace(IPV4_PATTERN, '[host]').replace(HOST_PORT_PATTERN, hostPort => (/[a-z]/i.test(hostPort.slice(0, hostPort.lastIndexOf(':'))) ? '[host]' : hostPort)).replace(LOCAL_NAME_PATTERN, '[host]')
}

function bareIpv6(candidate: string): string {
  const address = candidate.split('%')[0]!
  return /[0-9a-f]/i.test(address) && ipaddr.IPv6.isValid(address) ? '[host]' : candidate
}

/**
 * How an upstream failure before any output reaches the client: the upstream's rate limit is
 * passed on as 429 with its Retry-After; a request the upstream rejected as malformed is the
 * caller's 400, with the upstream's own message (never its raw body, nor the addresses it names);
 * everything else is 502 provider_error. Upstream text never carries our credentials (adapters scrub them).
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error
  if (!(error instanceof UpstreamError)) return new ApiError('provider_error', 'the upstream provider failed')
  // No evidence, no call: a Confidential or Encrypted backend that cannot be attested is unavailable.
  if (error.details.phase === 'attestation') {
    const status = error.status ? ` (HTTP ${error.status})` : ''
    return new ApiError('unavailable', `the attested backend's evidence could not be fetched: ${error.kind}${status}`)
  }
  if (error.kind === 'rate-limited') {
    // Capped at a day: an absurd wait (a far date, a number past 1e21) would print as "Infinity" or "1e+23", no delta-seconds.
    const seconds = Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil((error.details.retryAfterMs ?? 1000) / 1000)))
    return new UpstreamRefusal('rate_limited', 'the upstream provider is rate limiting requests; retry later', undefined, { 'retry-after': String(seconds) })
  }
  if (error.kind === 'bad-request') {
    const { upstreamMessage, bodySnippet, status } = error.details
    if (upstreamMessage) return new ApiError('invalid_request', `the upstream provider rejected the request: ${withoutAddresses(upstreamMessage).slice(0, 300)}`)
    // A body that is not an error object (a proxy's page) is not shown: it names servers, not the problem.
    if (bodySnippet !== undefined || status !== undefined) return new ApiError('invalid_request', `the upstream provider rejected the request${status ? ` (HTTP ${status})` : ''}`)
    // Without an upstream answer the refusal is the adapter's own (a request its wire cannot carry): say why.
    return new AdapterRefusal('invalid_request', error.message, error.details.param)
  }
  const status = error.status ? ` (HTTP ${error.status})` : ''
  return new ApiError('provider_error', `the upstream provider failed: ${error.kind}${status}`)
}
