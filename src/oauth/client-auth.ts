import { OAuthError } from './errors'
import type { OAuthServer } from './server'

/**
 * The client of a token, device-authorization or revocation request. Every client here is public
 * (token_endpoint_auth_method `none`): it names itself with the client_id parameter. One that
 * uses HTTP Basic anyway (RFC 6749 §2.3.1, which form-encodes both parts before base64) is
 * accepted when it names a client with an empty password, which is what client libraries send
 * for a client without a secret; a password is always wrong, as none was ever issued. Other
 * Authorization schemes are not client authentication and are ignored (some HTTP clients attach
 * a default bearer header to every request). A failed Basic authentication is 401 invalid_client
 * with the Basic challenge (RFC 6749 §5.2), as every invalid_client is (errors.ts).
 */
export function claimedClientId(request: Request, form: Record<string, string>): string | undefined {
  const header = request.headers.get('authorization')
  const match = header === null ? null : /^Basic(?:\s+(.*))?$/i.exec(header.trim())
  if (!match) return form.client_id
  const encoded = (match[1] ?? '').trim()
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) throw new OAuthError('invalid_client', 'the Basic credentials are not base64')
  const decoded = Buffer.from(encoded, 'base64').toString('utf8')
  const colon = decoded.indexOf(':')
  if (colon < 0) throw new OAuthError('invalid_client', 'the Basic credentials must be client_id:client_secret')
  let id: string
  let secret: string
  try {
    id = decodeURIComponent(decoded.slice(0, colon).replaceAll('+', ' '))
    secret = decodeURIComponent(decoded.slice(colon + 1).replaceAll('+', ' '))
  } catch {
    throw new OAuthError('invalid_client', 'the Basic credentials are not form-encoded (RFC 6749 §2.3.1)')
  }
  if (secret !== '') throw new OAuthError('invalid_client', 'this server issues no client secrets: send client_id in the body (token_endpoint_auth_method none)')
  // One client per request (RFC 6749 §5.2 invalid_request: "more than one mechanism for authenticating the client").
  if (form.client_id !== undefined && form.client_id !== id) throw new OAuthError('invalid_request', 'client_id names another client than the Authorization header')
  return id
}

/**
 * The revocation endpoint's client check (RFC 7009 §2.1: the client identifies itself and the
 * server "first validates the client credentials", then checks the token was issued to it): a
 * missing client_id, or one that names no client, is invalid_client, as on the token endpoint.
 */
export async function checkRevokingClient(oauth: OAuthServer, clientId: string | undefined): Promise<string> {
  if (clientId !== undefined && (await oauth.clients.find(clientId))) return clientId
  throw new OAuthError('invalid_client', clientId === undefined ? 'client_id is required' : 'unknown client_id')
}
