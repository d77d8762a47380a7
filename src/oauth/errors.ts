/**
 * OAuth error responses (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 8628 §3.5, RFC 8707 §2):
 * `{ "error": <code>, "error_description": <text> }`, status 400 unless the RFC says otherwise.
 * The token, registration, device and revocation endpoints answer in this shape, never in the
 * gateway's own error envelope, because OAuth clients parse it.
 */
export const OAUTH_ERROR_CODES = [
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
  'unsupported_grant_type',
  'unsupported_response_type',
  'invalid_scope',
  'invalid_target',
  'invalid_redirect_uri',
  'invalid_client_metadata',
  'authorization_pending',
  'slow_down',
  'access_denied',
  'expired_token',
  'unsupported_token_type',
  'server_error',
  'temporarily_unavailable',
] as const
export type OAuthErrorCode = (typeof OAUTH_ERROR_CODES)[number]

/**
 * The challenge every 401 invalid_client carries: RFC 9110 §15.5.2 requires one on a 401, and
 * RFC 6749 §5.2 allows the 401 "to indicate which HTTP authentication schemes are supported"
 * (HTTP Basic, the only one: see client-auth.ts).
 */
const BASIC_CHALLENGE = { 'www-authenticate': 'Basic realm="svc-gateway"' }

export class OAuthError extends Error {
  constructor(
    readonly code: OAuthErrorCode,
    message: string,
    readonly status = code === 'invalid_client' ? 401 : 400,
    readonly headers: Record<string, string> = status === 401 ? BASIC_CHALLENGE : {},
  ) {
    super(message)
  }
}

/** No-store on everything that carries or refuses a credential (RFC 6749 §5.1). */
export const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' }

export function oauthErrorResponse(error: OAuthError, requestId: string): Response {
  return new Response(JSON.stringify({ error: error.code, error_description: error.message }), {
    status: error.status,
    headers: { 'content-type': 'application/json', 'x-request-id': requestId, ...NO_STORE, ...error.headers },
  })
}

export function jsonResponse(body: unknown, status: number, requestId: string): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', 'x-request-id': requestId, ...NO_STORE } })
}
