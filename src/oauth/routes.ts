import { Elysia } from 'elysia'
import { isDatabaseOutage } from '../db/client'
import { requestIdOf } from '../http/request-context'
import { claimedClientId, checkRevokingClient } from './client-auth'
import { DEVICE_GRANT } from './clients'
import { jsonResponse, OAuthError, oauthErrorResponse } from './errors'
import { readForm, readJsonObject } from './form'
import { formDoc, jsonDoc, oauthResponses, ROTATION, SCHEMAS, THROTTLED } from './openapi'
import { parseResource } from './resource'
import { parseScope } from './secrets'
import { OAUTH_PATHS, WELL_KNOWN_PATHS, type OAuthServer } from './server'

type Context = { request: Request; set: { headers: Record<string, unknown> }; server: { requestIP(request: Request): { address: string } | null } | null }

/** The client's address for throttling (in-process tests have no socket: one shared bucket). */
function addressOf({ request, server }: Context): string {
  return server?.requestIP(request)?.address ?? 'local'
}

/**
 * Runs an OAuth endpoint: OAuthError becomes the RFC 6749 §5.2 error body, never the gateway
 * envelope, and so does a database outage (503 temporarily_unavailable, which OAuth client
 * libraries such as the MCP SDK recognise as retryable).
 */
function endpoint(fn: (context: Context) => Promise<Response>) {
  return async (context: Context): Promise<Response> => {
    try {
      return await fn(context)
    } catch (error) {
      if (error instanceof OAuthError) return oauthErrorResponse(error, requestIdOf(context.set))
      if (isDatabaseOutage(error)) return oauthErrorResponse(new OAuthError('temporarily_unavailable', 'the database is unavailable; retry shortly', 503), requestIdOf(context.set))
      throw error
    }
  }
}

/** Discovery, registration, token, device authorization and revocation endpoints. */
export function oauthRoutes(oauth: OAuthServer) {
  // Without oauth.issuer these are built from the request's Host: no-store (jsonResponse), so no
  // cache hands one Host's document to another.
  const metadata = ({ request, set }: { request: Request; set: Context['set'] }) => jsonResponse(oauth.authorizationServerMetadata(oauth.issuerOf(request)), 200, requestIdOf(set))
  const resource = (kind: 'mcp' | 'api') => ({ request, set }: { request: Request; set: Context['set'] }) =>
    jsonResponse(oauth.protectedResourceMetadata(oauth.issuerOf(request), kind), 200, requestIdOf(set))
  const documentDetail = (summary: string, description: string, schema: Parameters<typeof jsonDoc>[1]) => ({ detail: { summary, description, responses: { 200: jsonDoc('The metadata document', schema) } } })
  const asDescription = 'RFC 8414 authorization-server metadata: endpoints, scopes (mcp:inference, cli:inference), PKCE S256, grant types.'
  const prDescription = (what: string) => `RFC 9728 protected-resource metadata for ${what}: the resource URL, its authorization server and scope.`

  return new Elysia({ tags: ['OAuth'] })
    .get(WELL_KNOWN_PATHS.authorizationServer, metadata, documentDetail('Authorization-server metadata', asDescription, SCHEMAS.AUTHORIZATION_SERVER_METADATA))
    // Clients that treat the MCP URL's path as the issuer's path ask here (RFC 8414 §3.1 path insertion).
    .get(WELL_KNOWN_PATHS.authorizationServerMcp, metadata, documentDetail('Authorization-server metadata (path form)', asDescription, SCHEMAS.AUTHORIZATION_SERVER_METADATA))
    .get(WELL_KNOWN_PATHS.protectedResource, resource('api'), documentDetail('Protected-resource metadata of the API', prDescription('the API (svc_cli_ tokens)'), SCHEMAS.PROTECTED_RESOURCE_METADATA))
    .get(WELL_KNOWN_PATHS.protectedResourceMcp, resource('mcp'), documentDetail('Protected-resource metadata of /mcp', prDescription('/mcp (svc_mcp_ tokens)'), SCHEMAS.PROTECTED_RESOURCE_METADATA))
    .post(
      OAUTH_PATHS.register,
      endpoint(async context => {
        oauth.throttle('register', addressOf(context))
        return jsonResponse(await oauth.clients.register(await readJsonObject(context.request)), 201, requestIdOf(context.set))
      }),
      {
        parse: 'none',
        detail: {
          summary: 'Register a client (RFC 7591)',
          description: 'Dynamic client registration for public clients: redirect_uris (https, loopback http, or a private-use scheme in reverse-DNS form such as com.example.app: or of a known MCP host: cursor, vscode; other schemes, fragments and whitespace are invalid_redirect_uri), client_name, grant_types. token_endpoint_auth_method is always none; PKCE binds the codes. Other RFC 7591 metadata of the wrong type (a non-string scope, client_uri, logo_uri…, contacts not an array of strings) is 400 invalid_client_metadata naming the field; unknown fields are ignored. The built-in CLI client\'s name (svc command-line client, in any case, spacing or NFKC form) is reserved: 400 invalid_client_metadata.',
          requestBody: {
            ...jsonDoc('Client metadata', {
              type: 'object',
              properties: { redirect_uris: { type: 'array', items: { type: 'string' } }, client_name: { type: 'string' }, grant_types: { type: 'array', items: { type: 'string' } }, response_types: { type: 'array', items: { type: 'string' } } },
            }),
            required: true,
          },
          responses: { ...oauthResponses({ 201: jsonDoc('The registered client (RFC 7591 §3.2.1)', SCHEMAS.REGISTERED_CLIENT) }), ...THROTTLED },
        },
      },
    )
    .post(
      OAUTH_PATHS.token,
      endpoint(async ({ request, set }) => {
        const form = await readForm(request)
        const clientId = claimedClientId(request, form)
        const issuer = oauth.issuerOf(request)
        const scope = parseScope(form.scope)
        if (scope === 'invalid') throw new OAuthError('invalid_scope', 'scope must be exactly one of mcp:inference, cli:inference')
        // Checked against the grant's scope by each grant below (invalid_target when they disagree).
        const resource = parseResource(form.resource, issuer)
        let tokens
        if (form.grant_type === 'authorization_code') {
          const client = await oauth.clients.require(clientId, 'authorization_code')
          if (!form.code) throw new OAuthError('invalid_request', 'code is required')
          tokens = await oauth.codes.exchange({ code: form.code, clientId: client.id, redirectUri: form.redirect_uri, verifier: form.code_verifier, resource })
        } else if (form.grant_type === 'refresh_token') {
          const client = await oauth.clients.require(clientId, 'refresh_token')
          if (!form.refresh_token) throw new OAuthError('invalid_request', 'refresh_token is required')
          tokens = await oauth.tokens.refresh(form.refresh_token, client.id, scope, resource)
        } else if (form.grant_type === DEVICE_GRANT) {
          const client = await oauth.clients.require(clientId, DEVICE_GRANT)
          if (!form.device_code) throw new OAuthError('invalid_request', 'device_code is required')
          tokens = await oauth.device.poll(form.device_code, client.id, resource)
        } else {
          throw new OAuthError(form.grant_type ? 'unsupported_grant_type' : 'invalid_request', form.grant_type ? `grant_type "${form.grant_type.slice(0, 100)}" is not supported` : 'grant_type is required')
        }
        return jsonResponse(tokens, 200, requestIdOf(set))
      }),
      {
        parse: 'none',
        detail: {
          summary: 'Token endpoint',
          description:
            'Form-encoded. grant_type authorization_code (code, redirect_uri, client_id, code_verifier; PKCE S256), ' +
            `refresh_token (rotation: ${ROTATION}) or ` +
            'urn:ietf:params:oauth:grant-type:device_code (RFC 8628 polling). ' +
            'Access tokens are opaque: svc_mcp_ (mcp:inference) or svc_cli_ (cli:inference), bounded by the API key the person signed in with ' +
            '(a grant whose key is revoked or expired refreshes to invalid_grant). Clients are public: client_id in the body; ' +
            'HTTP Basic naming the client with an empty password is accepted as the same, any other Basic credential is 401 invalid_client. ' +
            'An RFC 8707 resource, when sent, must be the resource of the grant\'s scope (…/mcp for mcp:inference, the API root for cli:inference) ' +
            'and, for a code, the one of its authorization request: otherwise 400 invalid_target, and the code, refresh token or device code is not spent.',
          requestBody: formDoc({ grant_type: 'string', code: 'string', redirect_uri: 'string', client_id: 'string', code_verifier: 'string', refresh_token: 'string', device_code: 'string', scope: 'string', resource: 'string' }),
          responses: oauthResponses({ 200: jsonDoc('The tokens (RFC 6749 §5.1)', SCHEMAS.TOKEN) }),
        },
      },
    )
    .post(
      OAUTH_PATHS.deviceAuthorization,
      endpoint(async context => {
        const { request, set } = context
        oauth.throttle('device_authorization', addressOf(context))
        const form = await readForm(request)
        const client = await oauth.clients.require(claimedClientId(request, form), DEVICE_GRANT)
        const scope = parseScope(form.scope)
        if (scope === 'invalid') throw new OAuthError('invalid_scope', 'scope must be exactly one of mcp:inference, cli:inference')
        const started = await oauth.device.start(client, scope ?? 'cli:inference', oauth.issuerOf(request) + OAUTH_PATHS.device)
        return jsonResponse(started, 200, requestIdOf(set))
      }),
      {
        parse: 'none',
        detail: {
          summary: 'Start a device authorization (RFC 8628)',
          description: 'Form-encoded client_id (svc-cli for the bundled CLI) and optional scope (default cli:inference). Returns device_code, user_code, verification_uri(_complete), expires_in and interval.',
          requestBody: formDoc({ client_id: 'string', scope: 'string' }),
          responses: { ...oauthResponses({ 200: jsonDoc('The codes (RFC 8628 §3.2)', SCHEMAS.DEVICE_AUTHORIZATION) }), ...THROTTLED },
        },
      },
    )
    .post(
      OAUTH_PATHS.revoke,
      endpoint(async ({ request, set }) => {
        const form = await readForm(request)
        if (!form.token) throw new OAuthError('invalid_request', 'token is required')
        const clientId = await checkRevokingClient(oauth, claimedClientId(request, form))
        if (!(await oauth.tokens.revoke(form.token, clientId))) throw new OAuthError('unauthorized_client', 'this token was issued to another client')
        // RFC 7009 §2.2: 200 whether or not the token was known.
        return new Response(null, { status: 200, headers: { 'cache-control': 'no-store', 'x-request-id': requestIdOf(set) } })
      }),
      {
        parse: 'none',
        detail: {
          summary: 'Revoke a token (RFC 7009)',
          description: 'Form-encoded token (access or refresh) and client_id (or HTTP Basic naming the client with an empty password), required: a missing or unknown client is 401 invalid_client. ' +
            'Revokes the whole authorization the token belongs to; a token issued to another client is 400 unauthorized_client. 200 also for unknown tokens.',
          requestBody: formDoc({ token: 'string', token_type_hint: 'string', client_id: 'string' }),
          // RFC 7009 §2.2: the body is empty, so no content is documented.
          responses: oauthResponses({ 200: { description: 'Revoked, or the token was unknown (empty body)' } }),
        },
      },
    )
}
