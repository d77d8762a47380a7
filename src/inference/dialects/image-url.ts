import { ApiError } from '../../http/errors'
import { checkUrlTarget, type UrlRule } from '../../web/url-guard'

// An image part by URL is fetched by the backend, not by the gateway: a self-hosted backend
// (vLLM and the like) fetches it from inside the operator's network, so a URL naming a private,
// loopback, link-local or metadata address is an SSRF through the backend. Every dialect checks
// image URLs here, at decode time (before anything is reserved or sent), with the web fetch's own
// rules (checkUrlTarget: scheme, userinfo, ports, local-use names, IP literals).
// Names are not resolved (the gateway never connects to the URL), and
// web.fetch.unsafe_test_allow_cidrs does not apply: it never covers literal IPs. The same rule
// holds for every backend, Anthropic's included, so a request means the same wherever it is served.
//
// Unlike the fetch, any spelling the WHATWG parser reads is taken (`HTTPS://CDN.Example.com:443/фото.jpg`,
// as OpenAI and Anthropic take it): the rules are applied to the parsed URL, and that URL's href
// is what every provider encoder sends (`data.href`), so the backend fetches exactly the string
// that was checked. Whitespace, control characters and backslashes, which the parser drops or
// reads as something else, are still refused.

/** What the request schemas (and so /openapi.json) say about an image URL field. */
export const IMAGE_URL_RULES =
  'An http(s) URL the model\'s backend fetches itself, so it must name a public host: private, loopback, link-local, ' +
  'metadata and reserved IP literals (in any notation), local-use names (localhost, .local, .internal…), userinfo ' +
  'and blocked ports are a 400 naming this field, before anything is billed or sent, as are whitespace, control ' +
  'characters and backslashes (percent-encode them: a space as %20). Any other spelling is forwarded in its WHATWG ' +
  'canonical form (host lower-cased, IDNs as xn--, default port dropped, dot segments resolved, other characters ' +
  'percent-encoded). Names are not resolved by the gateway.'

/** Refusals of how the URL is written, not of where it points: the public-host advice does not apply. */
const SPELLING_RULES: ReadonlySet<UrlRule> = new Set(['syntax', 'canonical', 'numeric-host', 'length'])

/**
 * `input` (an image URL a client sent, not a data URL) as the URL to forward, or a 400 naming
 * `param`. Encoders send its `href` (the form that was checked), never `input`.
 */
export function imageUrl(input: string, param: string): URL {
  const target = checkUrlTarget(input, 'parsed')
  if (target.ok) return target.parsed
  const advice = SPELLING_RULES.has(target.rule)
    ? ''
    : '. Image URLs are fetched by the model\'s backend, so they must be public http(s) URLs; send a private image inline (base64) instead'
  throw new ApiError('invalid_request', `${param}: ${target.message}${advice}`, param)
}
