import { afterEach, describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { buildTestApp, type TestApp } from '../support/harness'
import { authorizeQuery, pkce, readConsentPage, registerClient } from '../support/oauth'

// The consent forms' Origin check against DNS rebinding, over a real socket (as test/mcp/origin.test.ts
// for /mcp): a page at http://rebound.example:PORT whose name now points at the gateway loads the
// consent page (same-origin for it: it reads the CSRF field, and the cookie is its own) and posts
// it with Origin and Host both rebound.example:PORT. The request's own origin comes from that
// Host, so it is trusted only on loopback; otherwise only oauth.issuer's origin is.

let t: TestApp
afterEach(() => t.close())

async function setup(yaml = '') {
  const env = { SVC_CONFIG: '/virtual/consent-origin.yaml' }
  t = await buildTestApp(env, loadConfig(env, () => `plans: { payg: { monthly_allowance: "0", fusion: false } }\n${yaml}`))
  const base = t.listen()
  const org = await t.createOrg()
  const port = new URL(base).port
  const clientId = await registerClient(t)

  /** GETs the consent page and posts it back approved, as a browser at `origin` that reached the gateway under `host` would. */
  const authorize = async (headers: { origin: string; host?: string }) => {
    const hostHeader: Record<string, string> = headers.host === undefined ? {} : { host: headers.host }
    const page = await fetch(`${base}${authorizeQuery({ clientId, challenge: pkce().challenge })}`, { headers: hostHeader })
    expect(page.status).toBe(200)
    const { fields, cookie } = await readConsentPage(page)
    const body = new URLSearchParams({ ...fields, api_key: org.adminKey, decision: 'approve' })
    const response = await fetch(`${base}/oauth/authorize`, {
      method: 'POST', redirect: 'manual', body, headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, ...headers },
    })
    return response.status
  }

  /** The same for the device page of a fresh `svc login`. */
  const device = async (headers: { origin: string; host?: string }) => {
    const started = await fetch(`${base}/oauth/device_authorization`, { method: 'POST', body: new URLSearchParams({ client_id: 'svc-cli' }) })
    const link = new URL(((await started.json()) as { verification_uri_complete: string }).verification_uri_complete)
    const hostHeader: Record<string, string> = headers.host === undefined ? {} : { host: headers.host }
    const { fields, cookie } = await readConsentPage(await fetch(`${base}${link.pathname}${link.search}`, { headers: hostHeader }))
    const body = new URLSearchParams({ ...fields, api_key: org.adminKey, decision: 'approve' })
    const response = await fetch(`${base}/oauth/device`, { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, ...headers } })
    return response.status
  }
  return { base, port, authorize, device }
}

describe('consent forms without oauth.issuer', () => {
  test('a rebinding page whose Host matches its own Origin is refused', async () => {
    const { port, authorize, device } = await setup()
    expect(await authorize({ origin: `http://rebound.example:${port}`, host: `rebound.example:${port}` })).toBe(403)
    expect(await authorize({ origin: `http://10.0.0.7:${port}`, host: `10.0.0.7:${port}` })).toBe(403)
    expect(await device({ origin: `http://rebound.example:${port}`, host: `rebound.example:${port}` })).toBe(403)
  })

  test('the gateway\'s own origin on a loopback name or address is accepted', async () => {
    const { base, port, authorize, device } = await setup()
    expect(await authorize({ origin: base })).toBe(303)
    expect(await authorize({ origin: `http://localhost:${port}`, host: `localhost:${port}` })).toBe(303)
    expect(await device({ origin: base })).toBe(200)
  })

  test('the loopback origin sent with a foreign Host is not the gateway\'s', async () => {
    const { port, authorize } = await setup()
    expect(await authorize({ origin: `http://localhost:${port}`, host: `rebound.example:${port}` })).toBe(403)
  })
})

describe('consent forms with oauth.issuer', () => {
  test('the issuer\'s origin is accepted from any Host; a Host-matching foreign Origin is refused', async () => {
    const { port, authorize, device } = await setup('oauth: { issuer: "https://gw.example.com" }')
    expect(await authorize({ origin: 'https://gw.example.com', host: 'gw.example.com' })).toBe(303)
    expect(await device({ origin: 'https://gw.example.com' })).toBe(200)
    expect(await authorize({ origin: `http://rebound.example:${port}`, host: `rebound.example:${port}` })).toBe(403)
  })
})
