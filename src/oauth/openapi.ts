import type { OpenAPIV3 } from 'openapi-types'
import { GRANT_TYPES } from './clients'
import { OAUTH_ERROR_CODES } from './errors'
import { SCOPES } from './secrets'
import { MAX_EXCHANGES, REUSE_WINDOW_MS } from './tokens'

// OpenAPI fragments for the OAuth endpoints, whose bodies are read and written by hand
// (form-encoded requests, RFC-shaped responses), so Elysia has no schema to document them from.
// test/oauth/openapi.test.ts checks real responses against these schemas.

type Schema = OpenAPIV3.SchemaObject

const text = (description: string): Schema => ({ type: 'string', description })
const integer = (description: string): Schema => ({ type: 'integer', description })
const texts = (description: string): Schema => ({ type: 'array', items: { type: 'string' }, description })
/** An object whose every listed property the server always sends. */
const always = (properties: Record<string, Schema>): Schema => ({ type: 'object', properties, required: Object.keys(properties) })

/** RFC 6749 §5.2 (and RFC 7591 §3.2.2, RFC 8628 §3.5, RFC 7009 §2.2.1, RFC 8707). */
const OAUTH_ERROR: Schema = always({
  error: { type: 'string', enum: [...OAUTH_ERROR_CODES], description: 'The error code' },
  error_description: text('What was wrong, for a developer'),
})

/** Refresh-token rotation and its one leeway (tokens.ts), as the token endpoint's docs state it. */
export const ROTATION =
  `each refresh returns a new refresh token; a spent one presented again revokes the whole authorization, unless by its client within ` +
  `${REUSE_WINDOW_MS / 1000} s of its rotation, up to ${MAX_EXCHANGES} exchanges in all (each gets a new pair)`

/** RFC 6749 §5.1, as TokenService issues it: every grant type gets a refresh token (rotated on use). */
const TOKEN: Schema = always({
  access_token: text('Opaque: svc_mcp_… (mcp:inference) or svc_cli_… (cli:inference)'),
  token_type: { type: 'string', enum: ['Bearer'] },
  expires_in: integer('Lifetime of the access token in seconds: oauth.access_token_ttl_s, or less when the API key it was signed in with expires sooner'),
  refresh_token: text(`Rotated: ${ROTATION}`),
  scope: { type: 'string', enum: [...SCOPES], description: 'The one scope granted' },
})

/** RFC 7591 §3.2.1, as ClientService.register returns it (no client_secret: public clients only). */
const REGISTERED_CLIENT: Schema = always({
  client_id: text('mcp_…'),
  client_id_issued_at: integer('Unix time in seconds'),
  client_name: text('As sent, or "Unnamed client"'),
  redirect_uris: texts('As sent'),
  grant_types: { type: 'array', items: { type: 'string', enum: [...GRANT_TYPES] } },
  response_types: { type: 'array', items: { type: 'string', enum: ['code'] }, description: '["code"] with the authorization_code grant, else []' },
  token_endpoint_auth_method: { type: 'string', enum: ['none'], description: 'Always none: PKCE binds the codes' },
})

/** RFC 8628 §3.2. */
const DEVICE_AUTHORIZATION: Schema = always({
  device_code: text('For the client to poll /oauth/token with'),
  user_code: text('For the person to type: eight letters, in two groups of four joined by a hyphen (e.g. BDFG-HJKL)'),
  verification_uri: text('The page where the person types the code'),
  verification_uri_complete: text('The same page with the code filled in'),
  expires_in: integer('Seconds until device_code and user_code expire'),
  interval: integer('Seconds to wait between polls'),
})

/** RFC 8414 §2, as OAuthServer.authorizationServerMetadata builds it. */
const AUTHORIZATION_SERVER_METADATA: Schema = always({
  issuer: text('oauth.issuer, else the origin of the request'),
  authorization_endpoint: text('…/oauth/authorize'),
  token_endpoint: text('…/oauth/token'),
  registration_endpoint: text('…/oauth/register'),
  revocation_endpoint: text('…/oauth/revoke'),
  device_authorization_endpoint: text('…/oauth/device_authorization'),
  scopes_supported: texts('mcp:inference, cli:inference'),
  response_types_supported: texts('code'),
  response_modes_supported: texts('query'),
  grant_types_supported: texts('authorization_code, refresh_token, urn:ietf:params:oauth:grant-type:device_code'),
  token_endpoint_auth_methods_supported: texts('none'),
  revocation_endpoint_auth_methods_supported: texts('none'),
  code_challenge_methods_supported: texts('S256'),
  authorization_response_iss_parameter_supported: { type: 'boolean' },
  service_documentation: text('…/docs'),
})

/** RFC 9728 §2, as OAuthServer.protectedResourceMetadata builds it. */
const PROTECTED_RESOURCE_METADATA: Schema = always({
  resource: text('…/mcp, or the API root'),
  authorization_servers: texts('The issuer'),
  scopes_supported: texts('mcp:inference for /mcp, cli:inference for the API'),
  bearer_methods_supported: texts('header'),
  resource_name: text('A display name'),
  resource_documentation: text('…/docs'),
})

export const SCHEMAS = { OAUTH_ERROR, TOKEN, REGISTERED_CLIENT, DEVICE_AUTHORIZATION, AUTHORIZATION_SERVER_METADATA, PROTECTED_RESOURCE_METADATA }

type Headers = Record<string, OpenAPIV3.HeaderObject>

export function jsonDoc(description: string, schema: Schema, headers?: Headers): OpenAPIV3.ResponseObject & OpenAPIV3.RequestBodyObject {
  return { description, content: { 'application/json': { schema } }, ...(headers ? { headers } : {}) }
}

/** A form-encoded body (OAuth endpoints take no JSON). */
export function formDoc(fields: Record<string, 'string'>): OpenAPIV3.RequestBodyObject {
  const schema = { type: 'object' as const, properties: Object.fromEntries(Object.keys(fields).map(name => [name, { type: 'string' as const }])) }
  return { required: true, content: { 'application/x-www-form-urlencoded': { schema } } }
}

const RETRY_AFTER: Headers = { 'Retry-After': { description: 'Seconds until the address may try again', schema: { type: 'integer' } } }
const BASIC_CHALLENGE: Headers = {
  'WWW-Authenticate': { description: 'Basic realm="svc-gateway", when the client authenticated with HTTP Basic (RFC 6749 §5.2)', schema: { type: 'string' } },
}

/** The success response, then the RFC 6749 §5.2 errors every form endpoint can answer. */
export function oauthResponses(success: Record<number, OpenAPIV3.ResponseObject>): OpenAPIV3.ResponsesObject {
  return {
    ...success,
    400: jsonDoc('OAuth error (invalid_request, invalid_grant, invalid_scope, …)', OAUTH_ERROR),
    401: jsonDoc('invalid_client: unknown or missing client, or failed HTTP Basic client authentication', OAUTH_ERROR, BASIC_CHALLENGE),
    503: jsonDoc('temporarily_unavailable: the database is unavailable; retry shortly', OAUTH_ERROR),
  }
}

/** 429 of the unauthenticated endpoints that write rows (OAuthServer.throttle). */
export const THROTTLED = { 429: jsonDoc('Too many requests to this endpoint from this address (its IPv6 /64; behind a reverse proxy, the proxy’s): invalid_request, with Retry-After', OAUTH_ERROR, RETRY_AFTER) }

const query = (name: string, description: string, required = false, schema: Schema = { type: 'string' }): OpenAPIV3.ParameterObject => ({ name, in: 'query', required, description, schema })

/** The authorization request (OAuth 2.1 §4.1.1, RFC 7636, RFC 8707) as GET /oauth/authorize reads it. */
export const AUTHORIZE_PARAMETERS: OpenAPIV3.ParameterObject[] = [
  query('response_type', 'Only code (another value is an error page, unsupported_response_type; never redirected)', true, { type: 'string', enum: ['code'] }),
  query('client_id', 'A client from POST /oauth/register', true),
  query('redirect_uri', 'One of the client\'s registered redirect URIs (a loopback IP may change port)', true),
  query('code_challenge', 'PKCE: BASE64URL(SHA-256(code_verifier)), 43 characters', true),
  query('code_challenge_method', 'Only S256', true, { type: 'string', enum: ['S256'] }),
  query('scope', 'mcp:inference or cli:inference; without it, the scope of the resource named, else mcp:inference', false, { type: 'string', enum: [...SCOPES] }),
  query('state', 'Returned unchanged on the redirect'),
  query('resource', 'RFC 8707 resource indicator: this gateway\'s /mcp (for mcp:inference) or its root (for cli:inference), as the protected-resource metadata advertises them; another resource, or the other scope\'s, is invalid_target'),
]

/** GET /oauth/device: the code may come from verification_uri_complete. */
export const DEVICE_PAGE_PARAMETERS: OpenAPIV3.ParameterObject[] = [
  query('user_code', 'The code shown by the device (any case; spaces and dashes ignored). Without it the page asks for it'),
]

/** An HTML page response. */
export function htmlDoc(description: string): OpenAPIV3.ResponseObject {
  return { description, content: { 'text/html': { schema: { type: 'string' as const } } } }
}

/** What every sign-in page answers while the database is unavailable (page() in consent-routes.ts). */
export const PAGE_UNAVAILABLE = { 503: htmlDoc('The database is unavailable: a page saying to try again shortly') }
