import { ApiError } from '../../http/errors'
import { checkUrlTarget } from '../../web/url-guard'

// An image part by URL is fetched by the backend, not by the gateway: a self-hosted backend
// (vLLM and the like) fetches it from inside the operator's network, so a URL naming a private,
// loopback, link-local or metadata address is an SSRF through the backend. Every dialect checks
// image URLs here, at decode time (before anything is reserved or sent), with the web fetch's own
// rules (checkUrlTarget: scheme, userinfo, canonical form, ports, local-use names, IP literals).
// Names are not resolved (the gateway never connects to the URL), and
// web.fetch.unsafe_test_allow_cidrs does not apply: it never covers literal IPs. The same rule
// holds for every backend, Anthropic's included, so a request means the same wherever it is served.

/** What the request schemas (and so /openapi.json) say about an image URL field. */
export const IMAGE_URL_RULES =
  'An http(s) URL the model\'s backend fetches itself, so it must name a public host: private, loopback, link-local, ' +
  'metadata and reserved IP literals (in any notation), local-use names (localhost, .local, .internal…), userinfo, ' +
  'non-canonical spellings and blocked ports are a 400 naming this field, before anything is billed or sent. ' +
  'Names are not resolved by the gateway.'

/** `input` (an image URL a client sent, not a data URL) as the URL to forward, or a 400 naming `param`. */
export function imageUrl(input: string, param: string): URL {
  const target = checkUrlTarget(input)
  if (target.ok) return target.parsed
  throw new ApiError(
    'invalid_request',
    `${param}: ${target.message}. Image URLs are fetched by the model's backend, so they must be public http(s) URLs; send a private image inline (base64) instead`,
    param,
  )
}
