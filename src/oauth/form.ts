import { foreignCharset, KiB, readCapped } from '../http/body-limit'
import { isOwnLoopbackOrigin } from '../http/cors'
import { ApiError } from '../http/errors'
import { OAuthError } from './errors'
import { sameResource } from './resource'
import { randomSecret, s256, safeEqual } from './secrets'

const FORM_LIMIT = 16 * KiB

/**
 * The body under `limit` bytes, as UTF-8; too large or not UTF-8 is an OAuth error with `code`
 * (invalid_request, or a registration's invalid_client_metadata), not the gateway envelope.
 */
async function readText(request: Request, limit: number, code: 'invalid_request' | 'invalid_client_metadata'): Promise<string> {
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > limit) throw new OAuthError(code, `request body exceeds ${limit} bytes`)
  try {
    return await readCapped(request, limit)
  } catch (error) {
    if (error instanceof ApiError) throw new OAuthError(code, error.message)
    throw error
  }
}

/**
 * An `application/x-www-form-urlencoded` body (RFC 6749 §3.2, RFC 7009 §2.1, RFC 8628 §3.1),
 * capped. A parameter sent twice is an error (RFC 6749 §3.1), save `resource` (RFC 8707 §2 lets
 * it repeat: copies naming one resource are one; several resources are `invalid_target`, a token
 * here being for one); empty values count as absent.
 */
export async function readForm(request: Request): Promise<Record<string, string>> {
  const type = request.headers.get('content-type') ?? ''
  if (!/^application\/x-www-form-urlencoded\b/i.test(type)) {
    throw new OAuthError('invalid_request', 'Content-Type must be application/x-www-form-urlencoded')
  }
  const parameters = readParameters(new URLSearchParams(await readText(request, FORM_LIMIT, 'invalid_request')))
  if (parameters instanceof OAuthError) throw parameters
  return parameters
}

/** Parameters by name under readForm's rules, or the OAuthError they break. */
function readParameters(params: URLSearchParams): Record<string, string> | OAuthError {
  const out = ownParameters()
  for (const [name, value] of params) {
    if (!(name in out)) {
      if (value !== '') out[name] = value
    } else if (name !== 'resource') {
      return new OAuthError('invalid_request', `parameter "${name.slice(0, 50)}" is repeated`)
    } else if (value !== '' && !sameResource(value, out.resource!)) {
      return new OAuthError('invalid_target', 'resource names more than one resource; a token is issued for one')
    }
  }
  return out
}

/** A JSON object body (RFC 7591 registration), capped. */
export async function readJsonObject(request: Request): Promise<Record<string, unknown>> {
  const type = request.headers.get('content-type') ?? ''
  if (!/^application\/json\b/i.test(type)) throw new OAuthError('invalid_client_metadata', 'Content-Type must be application/json')
  const charset = foreignCharset(type)
  if (charset !== undefined) throw new OAuthError('invalid_client_metadata', `charset "${charset.slice(0, 50)}" is not supported: JSON bodies must be UTF-8`)
  let value: unknown
  try {
    value = JSON.parse(await readText(request, FORM_LIMIT, 'invalid_client_metadata'))
  } catch (error) {
    if (error instanceof OAuthError) throw error
    throw new OAuthError('invalid_client_metadata', 'the body is not valid JSON')
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new OAuthError('invalid_client_metadata', 'the body must be a JSON object')
  return value as Record<string, unknown>
}

/**
 * An object for parameters by name with no prototype: a parameter named `toString` or
 * `__proto__` is a parameter like any other (on `{}`, `in` found Object.prototype's members, and
 * assigning `__proto__` was dropped).
 */
function ownParameters(): Record<string, string> {
  return Object.create(null) as Record<string, string>
}

/** Query parameters, with the same rules. */
export function readQuery(url: URL): Record<string, string> | OAuthError {
  return readParameters(url.searchParams)
}

const CSRF_COOKIE_PREFIX = 'svc_oauth_csrf_'
const CSRF_TOKEN = /^[A-Za-z0-9_-]{43}$/

/**
 * Each page's cookie has its own name, derived from its token: with one shared name, opening a
 * second consent page (another MCP host's sign-in, a second `svc login`) overwrote the cookie and
 * the first tab's form failed. The post finds its cookie by the token in its form.
 */
function csrfCookieName(token: string): string {
  return CSRF_COOKIE_PREFIX + s256(token).slice(0, 16)
}

/**
 * Double-submit CSRF protection for the consent forms: a random token in a SameSite=Strict,
 * HttpOnly cookie and in a hidden field; a POST must carry both, equal. A cross-site page
 * can neither read the cookie nor make the browser send it.
 */
export function newCsrf(secure: boolean): { token: string; cookie: string } {
  const token = randomSecret()
  const cookie = `${csrfCookieName(token)}=${token}; Path=/oauth; HttpOnly; SameSite=Strict; Max-Age=1800${secure ? '; Secure' : ''}`
  return { token, cookie }
}

/**
 * `issuer`: the configured oauth.issuer (undefined when unset). The form's Origin must be its
 * origin, or the request's own on loopback: a request's own origin comes from the Host a
 * DNS-rebinding page chooses, and such a page reads the form's token and holds its own cookie.
 */
export function checkCsrf(request: Request, field: string | undefined, issuer: string | undefined): boolean {
  // A browser always sends Origin on a form POST; when present it must be ours.
  const origin = request.headers.get('origin')
  if (origin !== null && (issuer === undefined || origin !== new URL(issuer).origin) && !isOwnLoopbackOrigin(origin, request)) return false
  if (field === undefined || !CSRF_TOKEN.test(field)) return false
  const cookie = request.headers.get('cookie') ?? ''
  // The name is base64url (letters, digits, - and _): nothing to escape in the pattern.
  const match = new RegExp(`(?:^|;\\s*)${csrfCookieName(field)}=([A-Za-z0-9_-]{43})(?:;|$)`).exec(cookie)
  return match !== null && safeEqual(match[1]!, field)
}
