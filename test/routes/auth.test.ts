import { expect, test } from 'bun:test'
import { runAuthSuite, type AuthedRoute } from '../support/auth-suite'
import { buildTestApp } from '../support/harness'

// Every authenticated route is listed here and runs the shared security suite.
const AUTHENTICATED: AuthedRoute[] = [
  { method: 'GET', path: '/api/v1/api-keys', mode: 'admin', okStatus: 200 },
  { method: 'POST', path: '/api/v1/api-keys', mode: 'admin', body: { name: 'suite' }, okStatus: 201 },
  { method: 'DELETE', path: '/api/v1/api-keys/00000000-0000-7000-8000-000000000000', mode: 'admin', okStatus: 404 },
  { method: 'GET', path: '/api/v1/billing/balance', mode: 'admin', okStatus: 200 },
  { method: 'GET', path: '/api/v1/rate-limits', mode: 'management', okStatus: 200 },
  { method: 'POST', path: '/v1/chat/completions', mode: 'inference', body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'hi' }] }, okStatus: 200 },
]

// Routes that take no credential, on purpose.
// /metrics takes no API key: it has its own bearer token (metrics.token_env) or the admin port
// (test/observability/metrics.test.ts), and is off (404) unless configured.
const PUBLIC = ['GET /metrics', 'GET /healthz', 'GET /readyz', 'GET /v1/models', 'GET /api/v1/models', 'GET /docs', 'GET /openapi.json', 'GET /docs-assets/swagger-ui-bundle.js', 'GET /docs-assets/swagger-ui.css']

for (const route of AUTHENTICATED) runAuthSuite(route)

test('every route is either in the auth suite or deliberately public', async () => {
  const t = await buildTestApp()
  const suite = new Set(AUTHENTICATED.map(route => `${route.method} ${route.path.replace(/[0-9a-f-]{36}$/, ':key_id')}`))
  for (const route of t.app.routes) {
    const name = `${route.method} ${route.path}`
    // The auth macro documents its security requirement on the route; that marks it authenticated.
    const secured = Boolean((route.hooks as { detail?: { security?: unknown[] } }).detail?.security?.length)
    if (secured) expect(suite.has(name) ? name : `${name} is authenticated but not in the auth suite`).toBe(name)
    else expect(PUBLIC.includes(name) ? name : `${name} has no auth and is not listed as public`).toBe(name)
  }
  await t.close()
})
