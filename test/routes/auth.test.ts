import { expect, test } from 'bun:test'
import { runAuthSuite, type AuthedRoute } from '../support/auth-suite'
import { buildTestApp } from '../support/harness'

// Every authenticated route is listed here and runs the shared security suite.
/** A fresh one-file form per request (a FormData body can be sent more than once, but keep them independent). */
function uploadForm(): FormData {
  const form = new FormData()
  form.append('file', new File(['auth suite'], 'note.txt', { type: 'text/plain' }))
  return form
}

const AUTHENTICATED: AuthedRoute[] = [
  { method: 'GET', path: '/api/v1/api-keys', mode: 'admin', okStatus: 200 },
  { method: 'POST', path: '/api/v1/api-keys', mode: 'admin', body: { name: 'suite' }, okStatus: 201 },
  { method: 'DELETE', path: '/api/v1/api-keys/00000000-0000-7000-8000-000000000000', mode: 'admin', okStatus: 404 },
  { method: 'GET', path: '/api/v1/billing/balance', mode: 'admin', okStatus: 200 },
  { method: 'GET', path: '/api/v1/rate-limits', mode: 'management', okStatus: 200, rateLimited: false },
  { method: 'POST', path: '/api/v1/attachments/parse', mode: 'inference', body: uploadForm(), okStatus: 200 },
  // The credential decides before the query does: a valid key reaches the "not an attested model" 400.
  { method: 'GET', path: '/api/v1/attestation?model=demo-private', mode: 'inference', okStatus: 400 },
  // Without network or a search backend, a valid credential gets the route's own answer: the
  // URL policy's 400 (no socket opened) and search's 503 "not configured".
  { method: 'POST', path: '/api/v1/web/fetch', mode: 'inference', body: { urls: ['http://127.0.0.1/'] }, okStatus: 400 },
  { method: 'POST', path: '/api/v1/web/search', mode: 'inference', body: { query: 'bun runtime' }, okStatus: 503 },
  { method: 'POST', path: '/v1/chat/completions', mode: 'inference', body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] }, okStatus: 200 },
  { method: 'POST', path: '/v1/messages', mode: 'inference', body: { model: 'demo-anonymous', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] }, okStatus: 200 },
  { method: 'POST', path: '/v1/messages/count_tokens', mode: 'inference', body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] }, okStatus: 200 },
  { method: 'POST', path: '/v1/responses', mode: 'inference', body: { model: 'demo-anonymous', input: 'hi' }, okStatus: 200 },
  { method: 'POST', path: '/api/v1/chat/fusion', mode: 'inference', body: { models: ['demo-anonymous', 'demo-alt'], messages: [{ role: 'user', content: 'hi' }] }, okStatus: 200 },
]

// Routes that take no credential, on purpose. /metrics takes no API key: it has its own bearer
// token (metrics.token_env) or the admin port (test/observability/metrics.test.ts), and is off
// (404) unless configured. The OAuth endpoints authenticate the client by
// PKCE/device code and the person by an API key on the consent page (test/oauth/*).
const PUBLIC = [
  'GET /metrics', 'GET /healthz', 'GET /readyz', 'GET /v1/models', 'GET /v1/models/:model', 'GET /v1/models/:model/*', 'GET /api/v1/models', 'GET /docs', 'GET /docs/oauth2-redirect.html', 'GET /openapi.json', 'GET /docs-assets/swagger-ui-bundle.js', 'GET /docs-assets/swagger-ui.css',
  'GET /.well-known/oauth-authorization-server', 'GET /.well-known/oauth-authorization-server/mcp',
  'GET /.well-known/oauth-protected-resource', 'GET /.well-known/oauth-protected-resource/mcp',
  'POST /oauth/register', 'POST /oauth/token', 'POST /oauth/device_authorization', 'POST /oauth/revoke',
  'GET /oauth/authorize', 'POST /oauth/authorize', 'GET /oauth/device', 'POST /oauth/device',
  // 405 without looking at credentials: nothing is served there.
  'GET /mcp', 'DELETE /mcp',
  // CORS preflights (src/http/cors.ts): browsers send them without credentials.
  'OPTIONS /mcp', 'OPTIONS /.well-known/oauth-authorization-server', 'OPTIONS /.well-known/oauth-authorization-server/mcp',
  'OPTIONS /.well-known/oauth-protected-resource', 'OPTIONS /.well-known/oauth-protected-resource/mcp',
  'OPTIONS /oauth/register', 'OPTIONS /oauth/token', 'OPTIONS /oauth/revoke',
]

// Routes with their own credentials and suites: OAuth access tokens only (test/mcp/auth.test.ts),
// and /metrics by the operator's metrics token (test/observability/metrics.test.ts).
const OWN_AUTH = ['POST /mcp', 'GET /metrics']

for (const route of AUTHENTICATED) runAuthSuite(route)

test('every route is either in the auth suite or deliberately public', async () => {
  const t = await buildTestApp()
  const suite = new Set(AUTHENTICATED.map(route => `${route.method} ${route.path.replace(/\?.*$/, '').replace(/[0-9a-f-]{36}$/, ':key_id')}`))
  for (const route of t.app.routes) {
    const name = `${route.method} ${route.path}`
    // The auth macro documents its security requirement on the route; that marks it authenticated.
    const secured = Boolean((route.hooks as { detail?: { security?: unknown[] } }).detail?.security?.length)
    if (secured) expect(suite.has(name) || OWN_AUTH.includes(name) ? name : `${name} is authenticated but not in the auth suite`).toBe(name)
    else expect(PUBLIC.includes(name) ? name : `${name} has no auth and is not listed as public`).toBe(name)
  }
  await t.close()
})
