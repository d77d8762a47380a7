import { addressProblem } from './address-policy'
import { cutText } from '../lib/characters'

// parseSafeUrl: the only way to make a URL the fetcher accepts (SECURITY-NOTES.md §1.3, steps
// 1–7). Pure, no I/O. The WHATWG parser (the one the connector uses) decides what the host is,
// and input that parser would rewrite is refused, so the check and the connection can never
// read the same string differently.
//
// checkUrlTarget is its part that says where a URL points (steps 2–4, 6 and 7, plus ports),
// without the fetch's own limits (length, credential query keys). It is also the guard for URLs
// the gateway forwards for a backend to fetch (image parts): one set of address rules for both.
// Those are forwarded as their parsed href, never as written, so they are judged with
// `spelling: 'parsed'`: any spelling the parser reads is taken, and every rule is applied to the
// string the backend will receive (the check and the request read the same string again).

/**
 * A URL that passed parseSafeUrl, exactly as the caller wrote it (its canonical form, or that
 * form without the root slash), so results and messages echo the URL as requested; only that
 * function makes one. Connections use the parsed URL, never this string.
 */
export type SafeUrl = string & { readonly __brand: 'SafeUrl' }

/** Which rule a URL broke (tests and logs key on it; the message explains it to the caller). */
export type UrlRule =
  | 'length' | 'syntax' | 'scheme' | 'userinfo' | 'canonical' | 'numeric-host' | 'port'
  | 'sensitive-query' | 'local-name' | 'host-syntax' | 'address'

export type UrlRefusal = { ok: false; rule: UrlRule; message: string }

/** Where a checked URL points: the parsed URL and its host. */
export type UrlTarget = { ok: true; parsed: URL; /** The hostname, or the IP literal without brackets. */ host: string; isIp: boolean }

export type UrlTargetResult = UrlTarget | UrlRefusal

export type SafeUrlResult = (UrlTarget & { url: SafeUrl }) | UrlRefusal

/**
 * How checkUrlTarget takes the caller's spelling. `exact` (the fetch, which echoes the URL as
 * written): input the WHATWG parser would rewrite is refused. `parsed` (a URL the caller
 * forwards as `parsed.href`, never as written): any spelling the parser reads is judged as that
 * href, so `HTTPS://CDN.Example.com:443/фото.jpg` passes as `https://cdn.example.com/%D1%84…`.
 * Either way whitespace, control characters and backslashes are refused on the raw text.
 */
export type UrlSpelling = 'exact' | 'parsed'

export const MAX_URL_BYTES = 400

// Special-use and local-use names (RFC 6761, RFC 8375, ICANN's .internal, and the common
// private suffixes that are never delegated): refused before any DNS query.
const LOCAL_SUFFIXES = [
  'localhost', 'local', 'internal', 'home.arpa', 'arpa', 'test', 'invalid', 'example', 'onion', 'alt',
  'localdomain', 'lan', 'home', 'corp', 'intranet', 'private',
]

// Query keys that carry credentials. Compared after URLSearchParams decoding, lower-cased with
// `-`, `_` and `.` removed, so `X-Amz-Signature`, `x_amz_signature` and `%61pi_key` all match.
// Exact names (the vendor names included), then suffixes that catch `github_token`, `db_password`.
const SENSITIVE_KEYS = new Set([
  'token', 'accesstoken', 'refreshtoken', 'idtoken', 'authtoken', 'bearer', 'jwt', 'auth', 'authorization',
  'apikey', 'key', 'accesskey', 'secretkey', 'privatekey', 'secret', 'clientsecret', 'password', 'passwd', 'pwd', 'pass',
  'passphrase', 'credential', 'credentials', 'session', 'sessionid', 'sessiontoken', 'sid', 'signature', 'sig',
  'code', 'authcode', 'authorizationcode', 'otp', 'ticket', 'samlresponse', 'samlrequest',
  'oauthtoken', 'oauthsignature', 'oauthverifier', 'xamzcredential', 'xamzsignature', 'xamzsecuritytoken',
  'awsaccesskeyid', 'awssecretaccesskey', 'xgoogcredential', 'xgoogsignature', 'googleaccessid', 'sastoken', 'hmac',
])
const SENSITIVE_SUFFIXES = ['token', 'secret', 'password', 'apikey', 'signature', 'sessionid', 'credential', 'credentials', 'privatekey', 'accesskey']

// Ports browsers refuse (fetch spec "bad port"): mail, shell and database-ish services.
const BAD_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110, 111, 113,
  115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556,
  563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667,
  6668, 6669, 6679, 6697, 10080,
])

const fail = (rule: UrlRule, message: string): UrlRefusal => ({ ok: false, rule, message })

/** Checks one URL written by a caller for the fetcher; `ok: false` says which rule it broke and why. */
export function parseSafeUrl(input: string): SafeUrlResult {
  if (Buffer.byteLength(input, 'utf8') > MAX_URL_BYTES) return fail('length', `URLs are limited to ${MAX_URL_BYTES} UTF-8 bytes`)
  const target = checkUrlTarget(input)
  if (!target.ok) return target
  for (const key of queryKeys(target.parsed.search)) {
    if (isSensitiveKey(key)) return fail('sensitive-query', `the query key "${cutText(key, 40)}" looks like a credential; URLs carrying secrets are not fetched`)
  }
  return { ...target, url: input as SafeUrl }
}

/**
 * Where a URL written by a caller points, checked without I/O: an absolute http(s) URL (in
 * canonical form unless `spelling` is `parsed`), with no userinfo, no port 0 or blocked port, no
 * local-use or special-use host name, and an IP literal only when it is global unicast
 * (address-policy.ts). Names are not resolved here: the fetcher resolves them; a URL forwarded
 * for a backend to fetch is not.
 */
export function checkUrlTarget(input: string, spelling: UrlSpelling = 'exact'): UrlTargetResult {
  // Checked on the raw text, in both spellings: the parser silently drops tabs and newlines, trims
  // spaces and reads a backslash as a slash, so what was meant is not knowable from the parse.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f-\u009f\u00a0\u1680\u2000-\u200f\u2028\u2029\u202f\u205f\u3000\ufeff]/.test(input)) {
    return fail('syntax', 'URLs may not contain whitespace or control characters: percent-encode them (a space as %20) or remove them')
  }
  if (input.includes('\\')) {
    return fail('syntax', 'URLs may not contain backslashes (browsers read them as slashes): write / for a path separator, or %5C for a backslash')
  }
  let url: URL
  try {
    url = new URL(input)
  } catch {
    return fail('syntax', 'not an absolute URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return fail('scheme', `only http and https URLs are accepted, not ${url.protocol.slice(0, 20)}`)
  // Rejected even when empty (`https://@host/`): parsers disagree about where userinfo ends.
  if (url.username !== '' || url.password !== '' || authorityOf(input).includes('@')) {
    return fail('userinfo', 'URLs with credentials (user:password@) are refused')
  }
  if (spelling === 'exact') {
    const hostProblem = canonicalProblem(input, url)
    if (hostProblem) return hostProblem
  }
  // Port 0 names no listening service: connecting to it fails after the call was admitted.
  if (url.port === '0') return fail('port', 'port 0 is refused (no server listens on it)')
  if (url.port !== '' && BAD_PORTS.has(Number(url.port))) return fail('port', `port ${url.port} is refused (a port browsers block)`)

  const hostname = url.hostname
  if (hostname.startsWith('[')) {
    const literal = hostname.slice(1, -1)
    const problem = addressProblem(literal)
    return problem ? fail('address', `${hostname} is ${problem}, not a public address`) : { ok: true, parsed: url, host: literal, isIp: true }
  }
  if (/^[0-9.]+$/.test(hostname)) {
    const problem = addressProblem(hostname)
    return problem ? fail('address', `${hostname} is ${problem}, not a public address`) : { ok: true, parsed: url, host: hostname, isIp: true }
  }
  const nameProblem = hostNameProblem(hostname, spelling)
  if (nameProblem) return nameProblem
  return { ok: true, parsed: url, host: hostname, isIp: false }
}

/** The raw authority text (between `//` and the next `/`, `?` or `#`). */
function authorityOf(input: string): string {
  const start = input.indexOf('//')
  if (start < 0) return ''
  const rest = input.slice(start + 2)
  const end = rest.search(/[/?#]/)
  return end < 0 ? rest : rest.slice(0, end)
}

/**
 * Refuses input the WHATWG parser would rewrite: that is where parser differentials hide. The
 * one rewrite accepted is the root path (`https://a.com` means `https://a.com/`). The message
 * names the most likely trick, then the canonical form to send instead.
 */
function canonicalProblem(input: string, url: URL): UrlRefusal | null {
  const withoutRoot = url.pathname === '/' ? `${url.origin}${url.search}${url.hash}` : undefined
  if (input === url.href || input === withoutRoot) return null
  const rawHost = authorityOf(input).replace(/:[0-9]*$/, '')
  if (/%/.test(rawHost)) return fail('canonical', 'the host may not be percent-encoded')
  if (/^[0-9a-fA-FxX.]+$/.test(rawHost) && /^[0-9.]+$/.test(url.hostname) && rawHost !== url.hostname) {
    return fail('numeric-host', `numeric hosts must be written as a dotted quad; "${cutText(rawHost, 40)}" means ${url.hostname}`)
  }
  const hint = Buffer.byteLength(url.href) <= MAX_URL_BYTES ? `; send "${url.href}"` : ''
  return fail('canonical', `the URL is not in canonical form (a browser would read it as a different string)${hint}`)
}

/**
 * A host name's problem. For a URL the gateway fetches (`exact`), names are held to the LDH rule
 * and may not end with a dot (`localhost.` is localhost to a resolver). For an image URL a backend
 * fetches (`parsed`), real names it would resolve pass: an underscore (legacy S3 bucket names,
 * `my_bucket.s3.amazonaws.com`) and the absolute form's trailing dot, the name judged without it.
 */
function hostNameProblem(hostname: string, spelling: UrlSpelling): UrlRefusal | null {
  if (hostname.endsWith('.') && spelling === 'exact') return fail('local-name', 'host names may not end with a dot')
  const name = spelling === 'parsed' && hostname.endsWith('.') ? hostname.slice(0, -1) : hostname
  const lower = name.toLowerCase()
  const labels = lower.split('.')
  for (const suffix of LOCAL_SUFFIXES) {
    if (lower === suffix || lower.endsWith(`.${suffix}`)) return fail('local-name', `"${hostname.slice(0, 63)}" is a local-use or special-use name (.${suffix})`)
  }
  if (labels.length < 2) return fail('local-name', `"${hostname.slice(0, 63)}" is a single-label (local-use) host name`)
  const label = spelling === 'parsed' ? /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/ : /^(?!-)[a-z0-9-]{1,63}(?<!-)$/
  if (name.length > 253 || labels.some(part => !label.test(part))) {
    return fail('host-syntax', `the host name must be letters, digits${spelling === 'parsed' ? ', underscores' : ''} and dashes in dot-separated labels (IDNs in their xn-- form)`)
  }
  // A name whose last label is numeric is an address spelling the WHATWG parser did not take.
  if (/^[0-9]+$/.test(labels.at(-1)!)) return fail('host-syntax', 'the last label of a host name may not be numeric')
  return null
}

/**
 * The query's keys, decoded as URLSearchParams does, split on `;` as well as `&`: URLSearchParams
 * splits on `&` only, but servers that follow the old HTML 4 advice (and many frameworks) also
 * split on `;`, so `?a=1;token=x` carries a `token` key there.
 */
function queryKeys(query: string): IterableIterator<string> {
  return new URLSearchParams(query.replaceAll(';', '&')).keys()
}

/**
 * Whether a URL as written carries credentials: userinfo, or a credential key (isSensitiveKey) in
 * its query or, with a value, in its fragment (an OAuth implicit grant's `#access_token=…`: never
 * sent by a fetch, but still a secret in the text; `#code` alone is an anchor on the page). Read on
 * the text, so a URL the parser refuses is judged too. `keys: 'valued'` holds the query to the
 * fragment's rule, for text that may be no URL at all: `foo.bar?key` is a question, not a secret.
 */
export function carriesCredentials(input: string, keys: 'any' | 'valued' = 'any'): boolean {
  if (authorityOf(input).includes('@')) return true
  const hash = input.indexOf('#')
  const beforeHash = hash < 0 ? input : input.slice(0, hash)
  const question = beforeHash.indexOf('?')
  const query = question < 0 ? '' : beforeHash.slice(question + 1)
  return hasSensitiveKey(query, keys === 'valued') || hasSensitiveKey(hash < 0 ? '' : input.slice(hash + 1), true)
}

/** Whether a query-like `part` has a credential key, given a value (`key=`) when `valued`. */
function hasSensitiveKey(part: string, valued: boolean): boolean {
  return part.split(/[&;]/).some(pair => (!valued || pair.includes('=')) && [...queryKeys(pair)].some(isSensitiveKey))
}

/**
 * Whether a query key names a credential (see SENSITIVE_KEYS). A bracketed key is read as servers
 * read it: PHP and Rack take `access_token[0]` or `api_key[x]` as `access_token` / `api_key` (the
 * name before the first bracket; Rack skips leading brackets), and PHP an unclosed `api[key` as
 * `api_key`; so both the name before the brackets and the whole key without them are judged.
 */
export function isSensitiveKey(key: string): boolean {
  const name = key.replace(/^[[\]]+/, '')
  return [name.split(/[[\]]/, 1)[0]!, name].some(part => {
    const normalized = part.toLowerCase().replace(/[-_.\s[\]]/g, '')
    return SENSITIVE_KEYS.has(normalized) || SENSITIVE_SUFFIXES.some(suffix => normalized.endsWith(suffix))
  })
}
