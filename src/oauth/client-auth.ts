import type { GrantType, OAuthClient } from './clients'
import { OAuthError } from './errors'
import type { OAuthServer } from './server'

/**
 * The challenge of a failed HTTP Basic client authentication. RFC 6749 §5.2: a client that
 * authenticated in the Authorization header gets 401 invalid_client "and ... the
 * WWW-Authenticate response header field matching the authentication scheme used by the client".
 */
const BASIC_CHALLENGE = { 'www-authenticate': 'Basic realm="svc-gateway"' }

function basicFailure(message: string): OAuthError {
  return new OAuthError('invalid_client', message, 401, BASIC_CHALLENGE)
}

/** The client a request names, and whether it did so with HTTP Basic. */
export interface ClientClaim {
  id: string | undefined
  basic: boolean
}

/**
 * The client of a token, device-authorization or revocation request. Every client here is public
 * (token_endpoint_auth_method `none`): it names itself with the client_id parameter. One that
 * uses HTTP Basic anyway (RFC 6749 §2.3.1, which form-encodes both parts before base64) is
 * accepted when it names a client with an empty password, which is what client libraries send
 * for a client without a secret; a password is always wrong, as none was ever issued. Other
 * Authorization schemes are not client authentication and are ignored (some HTTP clients attach
 * a default bearer header to every request).
 */
export function claimClient(request: Request, form: Record<string, string>): ClientClaim {
  const header = request.headers.get('authorization')
  const match = header === null ? null : /^Basic(?:\s+(.*))?$/i.exec(header.trim())
  if (!match) return { id: form.client_id, basic: false }
  const encoded = (match[1] ?? '').trim()
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) throw basicFailure('the Basic credentials are not base64')
  const decoded = Buffer.from(encoded, 'base64').toString('utf8')
  const colon = decoded.indexOf(':')
  if (colon < 0) throw basicFailure('the Basic credentials must be client_id:client_secret')
  let id: string
  let secret: string
  try {
    id = decodeURIComponent(decoded.slice(0, colon).replaceAll('+', ' '))
    secret = decodeURIComponent(decoded.slice(colon + 1).replaceAll('+', ' '))
  } catch {
    throw basicFailure('the Basic credentials are not form-encoded (RFC 6749 §2.3.1)')
  }
  if (secret !== '') throw basicFailure('this server issues no client secrets: send client_id in the body (token_endpoint_auth_method none)')
  // One client per request (RFC 6749 §5.2 invalid_request: "more than one mechanism for authenticating the client").
  if (form.client_id !== undefined && form.client_id !== id) throw new OAuthError('invalid_request', 'client_id names another client than the Authorization header')
  return { id, basic: true }
}

/** The claimed client or invalid_client: 401, with the Basic challenge when Basic was used. */
export async function requireClient(oauth: OAuthServer, claim: ClientClaim, grant: GrantType): Promise<OAuthClient> {
  try {
    return await oauth.clients.require(claim.id, grant)
  } catch (error) {
    if (claim.basic && error instanceof OAuthError && error.code === 'invalid_client') throw basicFailure(error.message)
    throw error
  }
}

/**
 * The revocation endpoint's client check (RFC 7009 §2.1: the server "first validates the client
 * credentials"): a client_id that names no client is invalid_client. Without any client_id the
 * token alone is enough to revoke it (whoever holds a token may end it).
 */
export async function checkRevokingClient(oauth: OAuthServer, claim: ClientClaim): Promise<void> {
  if (claim.id === undefined || (await oauth.clients.find(claim.id))) return
  if (claim.basic) throw basicFailure('unknown client_id')
  throw new OAuthError('invalid_client', 'unknown client_id')
}
