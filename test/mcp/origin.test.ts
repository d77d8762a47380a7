import { afterEach, describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { buildTestApp, type TestApp } from '../support/harness'
import { codeFlowTokens } from '../support/oauth'

// DNS rebinding against /mcp, over a real socket: a page at http://rebound.example:PORT whose
// name now points at the gateway sends Origin http://rebound.example:PORT and, as any browser
// does, Host rebound.example:PORT. Bun builds request.url from that Host, so "the request's own
// origin" is whatever the attacker named; it may only be trusted when it is a loopback one.

let t: TestApp
afterEach(() => t.close())

const PING = { jsonrpc: '2.0', id: 1, method: 'ping' }

async function setup(yaml = '') {
  const env = { SVC_CONFIG: '/virtual/origin.yaml' }
  t = await buildTestApp(env, loadConfig(env, () => `plans: { payg: { monthly_allowance: "0", fusion: false } }\n${yaml}`))
  const base = t.listen()
  const org = await t.createOrg()
  const { access_token } = await codeFlowTokens(t, org.adminKey)
  const port = new URL(base).port
  /** POST /mcp with a valid token, as a browser at `origin` that reached the gateway under `host` would send it. */
  const ping = (headers: { origin?: string; host?: string }) =>
    fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${access_token}`, ...headers },
      body: JSON.stringify(PING),
    }).then(response => response.status)
  return { base, port, ping }
}

describe('Origin on /mcp without oauth.issuer', () => {
  test('a rebinding page whose Host matches its own Origin is refused', async () => {
    const { port, ping } = await setup()
    expect(await ping({ origin: `http://rebound.example:${port}`, host: `rebound.example:${port}` })).toBe(403)
    expect(await ping({ origin: 'https://rebound.example', host: 'rebound.example' })).toBe(403)
    expect(await ping({ origin: `http://10.0.0.7:${port}`, host: `10.0.0.7:${port}` })).toBe(403)
  })

  test('the gateway\'s own origin on a loopback name or address passes; requests without Origin pass', async () => {
    const { base, port, ping } = await setup()
    expect(await ping({ origin: base })).toBe(200)
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `127.8.9.10:${port}`, `[::1]:${port}`]) {
      expect(await ping({ origin: `http://${host}`, host })).toBe(200)
    }
    // CLIs and SDK clients send no Origin.
    expect(await ping({})).toBe(200)
    expect(await ping({ host: `rebound.example:${port}` })).toBe(200)
  })

  test('another loopback origin, or the loopback origin sent to a foreign Host, is not the gateway\'s', async () => {
    const { port, ping } = await setup()
    expect(await ping({ origin: 'http://localhost:6274' })).toBe(403)
    expect(await ping({ origin: `http://localhost:${port}`, host: `rebound.example:${port}` })).toBe(403)
  })

  test('mcp.allowed_origins pass whatever the Host', async () => {
    const { port, ping } = await setup('mcp: { allowed_origins: ["http://localhost:6274", "https://rebound.example"] }')
    expect(await ping({ origin: 'http://localhost:6274' })).toBe(200)
    expect(await ping({ origin: 'https://rebound.example', host: `rebound.example:${port}` })).toBe(200)
  })
})

describe('Origin on /mcp with oauth.issuer', () => {
  test('the issuer\'s origin passes from any Host; a Host-matching foreign Origin does not', async () => {
    const { port, ping } = await setup('oauth: { issuer: "https://gw.example.com" }')
    expect(await ping({ origin: 'https://gw.example.com', host: 'gw.example.com' })).toBe(200)
    expect(await ping({ origin: 'https://gw.example.com' })).toBe(200)
    expect(await ping({ origin: `http://rebound.example:${port}`, host: `rebound.example:${port}` })).toBe(403)
  })
})

describe('discovery documents built from the Host are never stored by caches', () => {
  test('every /.well-known document is Cache-Control: no-store', async () => {
    const { port } = await setup()
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/oauth-authorization-server/mcp', '/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { host: `rebound.example:${port}` } })
      expect(response.status).toBe(200)
      expect(response.headers.get('cache-control')).toBe('no-store')
      expect(response.headers.get('content-type')).toStartWith('application/json')
      expect(JSON.stringify(await response.json())).toContain(`http://rebound.example:${port}`)
    }
  })
})

describe('CORS for browser MCP clients', () => {
  const APP = 'http://localhost:6274'

  test('an allowed origin gets a preflight that lets it send the token, and can read the answers and their challenge', async () => {
    const { base } = await setup(`mcp: { allowed_origins: ["${APP}"] }`)
    const preflight = await fetch(`${base}/mcp`, {
      method: 'OPTIONS',
      headers: { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, mcp-protocol-version' },
    })
    expect(preflight.status).toBe(204)
    expect(preflight.headers.get('access-control-allow-origin')).toBe(APP)
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST')
    for (const name of ['authorization', 'content-type', 'mcp-protocol-version']) expect(preflight.headers.get('access-control-allow-headers')).toContain(name)
    expect(preflight.headers.get('access-control-allow-credentials')).toBeNull()

    // Without a token: the 401 and its WWW-Authenticate (how the client discovers OAuth) are readable.
    const challenged = await fetch(`${base}/mcp`, { method: 'POST', headers: { origin: APP, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(PING) })
    expect(challenged.status).toBe(401)
    expect(challenged.headers.get('access-control-allow-origin')).toBe(APP)
    expect(challenged.headers.get('access-control-expose-headers')).toContain('www-authenticate')
    expect(challenged.headers.get('vary')).toContain('Origin')

    // The discovery documents and the token endpoint it then calls answer the same origin.
    for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-authorization-server']) {
      const document = await fetch(`${base}${path}`, { headers: { origin: APP } })
      expect(document.status).toBe(200)
      expect(document.headers.get('access-control-allow-origin')).toBe(APP)
    }
    const token = await fetch(`${base}/oauth/token`, { method: 'OPTIONS', headers: { origin: APP, 'access-control-request-method': 'POST' } })
    expect([token.status, token.headers.get('access-control-allow-origin')]).toEqual([204, APP])
  })

  test('another origin gets no CORS headers: its preflight is 403 and the browser shows it nothing', async () => {
    const { base } = await setup(`mcp: { allowed_origins: ["${APP}"] }`)
    const preflight = await fetch(`${base}/mcp`, { method: 'OPTIONS', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } })
    expect(preflight.status).toBe(403)
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull()
    const document = await fetch(`${base}/.well-known/oauth-authorization-server`, { headers: { origin: 'https://evil.example' } })
    expect(document.headers.get('access-control-allow-origin')).toBeNull()
    // Routes outside /mcp and OAuth are not opened to browsers at all.
    const models = await fetch(`${base}/v1/models`, { headers: { origin: APP } })
    expect(models.headers.get('access-control-allow-origin')).toBeNull()
  })
})
