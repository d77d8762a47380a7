import { Elysia } from 'elysia'
import { authenticate } from '../http/auth'
import { MiB, readCapped } from '../http/body-limit'
import type { BrowserOrigins } from '../http/cors'
import { ApiError } from '../http/errors'
import { eventStream } from '../http/openapi-complete'
import { liftIdleTimeout } from '../http/idle-timeout'
import { requestIdOf } from '../http/request-context'
import type { KeyService } from '../keys/service'
import type { OAuthServer } from '../oauth/server'
import { invalidRequest, jsonRpcErrorBody, MCP_ERROR, noteJsonRpcId } from './json-rpc'
import type { McpService } from './server'

/** MCP requests carry prompts as text: 4 MiB, like the other non-chat inference routes (spec §8). */
const BODY_LIMIT = 4 * MiB

/** A refusal before the body is read: the request's id is not known yet, so it is null. */
function jsonRpcError(status: number, code: number, message: string, requestId: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(jsonRpcErrorBody(null, code, message)), {
    status,
    headers: { 'content-type': 'application/json', 'x-request-id': requestId, ...headers },
  })
}

/** The body under the cap: Content-Length is trusted when present, else bytes are counted as they stream. */
async function readBody(request: Request): Promise<string> {
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > BODY_LIMIT) throw new ApiError('payload_too_large', `request body exceeds ${BODY_LIMIT} bytes`)
  return readCapped(request, BODY_LIMIT)
}

const SECURITY = [{ oauth2: ['mcp:inference'] }]
/** The challenge of OAuthServer.mcpChallenge: the protected-resource metadata of /mcp and its scope. */
const MCP_CHALLENGE = {
  type: 'string' as const,
  pattern: '^Bearer resource_metadata="[^"]+/\\.well-known/oauth-protected-resource/mcp", scope="mcp:inference"(, error="invalid_token")?$',
  examples: ['Bearer resource_metadata="https://gateway.example/.well-known/oauth-protected-resource/mcp", scope="mcp:inference"'],
}
const JSON_RPC = { description: 'JSON-RPC 2.0 message', content: { 'application/json': { schema: { type: 'object' as const } } } }

/**
 * POST /mcp (Streamable HTTP, MCP 2025-11-25): Origin check, then only `svc_mcp_` tokens with
 * `mcp:inference`; anything else is 401 with the protected-resource metadata in
 * WWW-Authenticate, which is how MCP clients discover the OAuth flow by themselves.
 * GET and DELETE are 405: no server-initiated stream and no sessions to end.
 */
export function mcpRoutes(keys: KeyService, oauth: OAuthServer, mcp: McpService, origins: BrowserOrigins) {
  // Streamable HTTP: a server without a stream for GET "MUST ... return HTTP 405 Method Not
  // Allowed", and one that does not let clients end sessions "MAY respond [to DELETE] with HTTP
  // 405". Neither names a body: a bare 405 with Allow, as the document says.
  const notAllowed = () => new Response(null, { status: 405, headers: { allow: 'POST' } })
  const methodDetail = (summary: string) => ({
    detail: {
      summary,
      description: 'This server offers no server-initiated SSE stream and keeps no sessions (the Mcp-Session-Id of an initialize answer is kept nowhere), so only POST is served.',
      responses: { 405: { description: 'Method Not Allowed, with no body', headers: { Allow: { description: 'POST', schema: { type: 'string' as const } } } } },
    },
  })

  return new Elysia({ tags: ['MCP'] })
    .post(
      '/mcp',
      async ({ request, set, server }) => {
        const requestId = requestIdOf(set)
        // DNS rebinding: a browser page must not reach /mcp from a foreign origin (http/cors.ts).
        const origin = request.headers.get('origin')
        if (origin !== null && !origins.allows(origin, request)) {
          return jsonRpcError(403, -32000, `Origin ${origin.slice(0, 200)} is not allowed`, requestId)
        }
        let principal
        try {
          principal = await authenticate(keys, request, 'mcp')
        } catch (error) {
          // Not a refusal of the credential (the token store is unreachable): the error handler
          // answers it, in JSON-RPC shape (json-rpc.ts), never as a 401 that would send an MCP
          // client into a new OAuth flow.
          if (!(error instanceof ApiError) || (error.status !== 401 && error.status !== 403)) throw error
          const sentToken = request.headers.has('authorization') || request.headers.has('x-api-key')
          const status = error.status === 403 ? 403 : 401
          return jsonRpcError(status, MCP_ERROR.auth, error.message, requestId, status === 401 ? { 'www-authenticate': oauth.mcpChallenge(request, sentToken ? 'invalid_token' : undefined) } : {})
        }
        let body: unknown
        try {
          body = JSON.parse(await readBody(request))
        } catch (error) {
          if (error instanceof ApiError && error.code === 'payload_too_large') return jsonRpcError(413, -32600, error.message, requestId)
          return jsonRpcError(400, -32700, `Parse error: ${error instanceof ApiError ? error.message : 'the body is not valid JSON'}`, requestId)
        }
        // JSON-RPC 2.0 §5.1, §6: valid JSON that is no message, or an empty batch (the SDK's
        // transport answered these -32700 and 202), is an Invalid Request.
        const invalid = invalidRequest(body)
        if (invalid !== undefined) return jsonRpcError(400, -32600, `Invalid Request: ${invalid}`, requestId)
        // From here on a failure answers this request (its id), not an anonymous one.
        noteJsonRpcId(request, body)
        return mcp.handle({ principal, requestId, httpRequest: request, body, disableIdleTimeout: () => liftIdleTimeout(server, request) })
      },
      {
        parse: 'none',
        detail: {
          summary: 'MCP (Streamable HTTP)',
          description:
            'Hosted MCP for agent hosts: initialize (version negotiation), notifications/initialized, ping, tools/list, tools/call. ' +
            'JSON responses; a tools/call with a progressToken is answered as SSE with notifications/progress. Stateless: the Mcp-Session-Id an initialize answer carries is kept nowhere; sent back, it keeps apart the cancels (notifications/cancelled) of hosts that share one sign-in. ' +
            'Only svc_mcp_ OAuth tokens with mcp:inference; otherwise 401 with WWW-Authenticate resource_metadata. ' +
            'Refusals are JSON-RPC errors -32001 (auth), -32002 (payment), -32003 (rate limit); tool failures are results with isError. ' +
            'Failures outside a tool are JSON-RPC error objects too (the request\'s id once the body is read, else null; error.data carrying the gateway code and status): ' +
            'a database outage is HTTP 503 with -32603 (data.code unavailable).',
          ...eventStream('A tools/call with params._meta.progressToken: SSE `message` events, each a JSON-RPC message: notifications/progress, then the call\'s response. Keep-alive comment lines (`: ping`) while the call is quiet.'),
          security: SECURITY,
          requestBody: { required: true, content: { 'application/json': { schema: { oneOf: [{ type: 'object' as const }, { type: 'array' as const, items: { type: 'object' as const } }], description: 'A JSON-RPC 2.0 request or notification, or a batch of them (an array)' } } } },
          responses: {
            200: {
              description: 'JSON-RPC 2.0 message; for a batch, an array of the replies (even of one)',
              content: { 'application/json': { schema: { oneOf: [{ type: 'object' as const }, { type: 'array' as const, items: { type: 'object' as const } }] } } },
              headers: { 'Mcp-Session-Id': { description: 'On an initialize answer with its result (not on a refused initialize): the session id to send back (kept nowhere; see above)', schema: { type: 'string' as const } } } },
            202: { description: 'Notification accepted' },
            400: { description: 'JSON-RPC parse error (-32700): the body is not UTF-8 JSON; Invalid Request (-32600): JSON that is not a JSON-RPC 2.0 message or batch (an unknown member, a progress token not a string or an integer), an empty batch, or a batch whose requests share an id', content: JSON_RPC.content },
            401: {
              description: 'JSON-RPC error -32001: no svc_mcp_ token with mcp:inference',
              headers: { 'WWW-Authenticate': { description: 'Where an MCP client finds the OAuth flow (RFC 9728 §5.1); error="invalid_token" when a credential was sent', schema: MCP_CHALLENGE } },
              content: JSON_RPC.content,
            },
            403: JSON_RPC,
            406: JSON_RPC,
            413: { description: `JSON-RPC error -32600: the body exceeds ${BODY_LIMIT} bytes`, content: JSON_RPC.content },
            415: JSON_RPC,
            500: { description: 'JSON-RPC error -32603: an unexpected failure', content: JSON_RPC.content },
            503: { description: 'JSON-RPC error -32603 (error.data.code `unavailable`): the database is unavailable; retry shortly', content: JSON_RPC.content },
          },
        },
      },
    )
    .get('/mcp', notAllowed, methodDetail('MCP server stream (not offered)'))
    .delete('/mcp', notAllowed, methodDetail('End an MCP session (not offered)'))
}
