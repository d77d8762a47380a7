import { openapi } from '@elysiajs/openapi'
import { Elysia } from 'elysia'
import { completeDocument } from './openapi-complete'
import { swaggerUi } from './swagger-ui'

const TITLE = 'svc-gateway'

/**
 * OpenAPI 3.1 at /openapi.json, and Swagger UI at /docs (src/http/swagger-ui.ts). What the
 * generator cannot say is added by completeDocument.
 */
export function openapiDocs(version: string) {
  return new Elysia()
    // Local: runs for the plugin's routes below (the document's among them), not the API's.
    .onAfterHandle(({ path, response }) => {
      // Elysia routes /openapi.json/ here too (QA: it served the unfinished document).
      if (path === '/openapi.json' || path === '/openapi.json/') completeDocument(response as Parameters<typeof completeDocument>[0])
    })
    .use(swaggerUi(TITLE))
    .use(
      openapi({
        specPath: '/openapi.json',
        // The page is swaggerUi's: the plugin's cannot call initOAuth (PKCE).
        provider: null,
        // The plugin's default (staticFile: true) drops every path with a dot, which hid the
        // /.well-known discovery documents. The UI page, the document and the UI's assets are
        // hidden by their own `detail.hide` instead.
        exclude: { paths: ['/docs', '/openapi.json'], staticFile: false },
        documentation: {
          openapi: '3.1.0',
          info: {
            title: TITLE,
            version,
            description:
              'Self-hostable HTTP/JSON gateway for LLM inference. /v1 speaks the OpenAI and Anthropic wire formats; ' +
              '/api/v1 holds the platform routes. Money is integer USD nanos as decimal strings (1000000000 = 1 USD). ' +
              'Errors on /api/v1 carry an error object with code, message, param (when a field is to blame) and request_id; ' +
              'every response carries an x-request-id header. A path asked with a method it does not take is 405 method_not_allowed ' +
              'with an Allow header; an unknown path is 404 not_found; an unexpected failure is 500 internal_error (never for bad input).',
          },
          tags: [
            { name: 'API keys', description: 'Organization keys (admin credentials)' },
            { name: 'Billing', description: 'Prepaid balance in integer USD nanos (admin credentials)' },
            { name: 'Rate limits', description: 'Non-consuming snapshots of the caller’s request windows' },
            { name: 'Models', description: 'The live model catalog: public, identical with or without credentials' },
            { name: 'Inference', description: 'OpenAI- and Anthropic-compatible inference' },
            { name: 'Fusion', description: 'Two or three models answer, then a judge model synthesizes their answers' },
            { name: 'Documents', description: 'Text extraction from an uploaded file (text, PDF, DOCX, PPTX, XLSX, XLS), billed per document' },
            { name: 'Attestation', description: 'Fresh evidence from the attested backend of a Confidential or Encrypted model, bound to a nonce' },
            { name: 'Web', description: 'Web fetch and search without a model (SSRF-safe, billed per page and per search)' },
            { name: 'Health', description: 'Probes' },
            { name: 'OAuth', description: 'OAuth 2.1 authorization server for CLI (svc_cli_) and MCP (svc_mcp_) clients' },
            { name: 'MCP', description: 'Hosted MCP server (Streamable HTTP) for agent hosts' },
          ],
          components: {
            securitySchemes: {
              bearerAuth: { type: 'http', scheme: 'bearer', description: 'An organization API key (z_sk_…)' },
              apiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'The same key, for clients that only send an API-key header' },
              metricsToken: { type: 'http', scheme: 'bearer', description: 'The metrics token (metrics.token_env): GET /metrics only' },
              oauth2: {
                type: 'oauth2',
                description: 'OAuth 2.1 access tokens: svc_mcp_ (mcp:inference, /mcp only) and svc_cli_ (cli:inference). A token never does more than the API key the person signed in with: that key\'s admin flag, spend cap and expiry apply, and the token stops working when the key is revoked or expires. Discovery at /.well-known/oauth-authorization-server. To authorize from /docs: register a public client (POST /oauth/register) whose redirect URI is this gateway’s origin followed by /docs/oauth2-redirect.html (https, or http on loopback), then enter its client_id and pick one scope; the flow uses PKCE (S256).',
                flows: {
                  authorizationCode: { authorizationUrl: '/oauth/authorize', tokenUrl: '/oauth/token', refreshUrl: '/oauth/token', scopes: { 'mcp:inference': 'MCP tools', 'cli:inference': 'CLI access' } },
                },
              },
            },
          },
        },
      }),
    )
}
