import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { chromium, type Browser } from 'playwright-core'
import { buildTestApp, json, type TestApp, type TestOrg } from '../support/harness'

// The "Authorize" button of Swagger UI at /docs, end to end in headless Chromium: a public client
// registered with the docs' redirect page signs in through the consent page in Swagger UI's
// popup, with PKCE (the gateway requires S256); the redirect page hands the code back and
// Swagger UI exchanges it for a token that then works on the API. Before, the popup was refused
// (no code_challenge) and the redirect page was a 404. Skipped where Chromium is not installed;
// CI installs the Debian package `chromium`.

const CHROMIUM = '/usr/bin/chromium'

describe.skipIf(!existsSync(CHROMIUM))('Swagger UI at /docs: Authorize (OAuth2 code flow with PKCE) in headless Chromium', () => {
  let t: TestApp
  let org: TestOrg
  let browser: Browser
  let base: string

  beforeAll(async () => {
    t = await buildTestApp()
    org = await t.createOrg()
    base = t.listen()
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await t?.close()
  })

  test('a registered client authorizes from /docs and gets a token that works', async () => {
    const redirectUri = `${base}/docs/oauth2-redirect.html`
    const registered = await fetch(`${base}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'API docs', redirect_uris: [redirectUri] }),
    })
    expect(registered.status).toBe(201)
    const { client_id: clientId } = (await registered.json()) as { client_id: string }

    const page = await browser.newPage()
    const problems: string[] = []
    const watch = (target: typeof page) => {
      target.on('pageerror', error => problems.push(`${target.url()}: ${error.message}`))
      target.on('response', response => { if (response.status() >= 400 && !response.url().endsWith('/favicon.ico')) problems.push(`${response.status()} ${response.url()}`) })
      // A script the redirect page's policy blocked would be reported here.
      target.on('console', message => { if (message.type() === 'error' && !message.location().url.endsWith('/favicon.ico')) problems.push(`${target.url()}: ${message.text()}`) })
    }
    watch(page)
    await page.goto(`${base}/docs`)
    await page.click('button.authorize')
    await page.fill('#client_id_authorizationCode', clientId)
    // The checkbox itself is hidden under its styled label.
    await page.click('label[for="cli:inference-authorizationCode-checkbox-oauth2"]')
    const [popup] = await Promise.all([page.waitForEvent('popup'), page.click('.auth-container:has(#client_id_authorizationCode) button.authorize')])
    watch(popup)
    await popup.waitForLoadState()

    // What Swagger UI asked: the code flow, with an S256 challenge and the served redirect page.
    const asked = new URL(popup.url())
    expect(asked.origin + asked.pathname).toBe(`${base}/oauth/authorize`)
    expect(asked.searchParams.get('code_challenge_method')).toBe('S256')
    expect(asked.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(asked.searchParams.get('redirect_uri')).toBe(redirectUri)
    expect(await popup.textContent('h1')).toContain('Authorize API docs')

    // The person signs in with their API key; the popup lands on the redirect page, which closes it.
    await popup.fill('#api_key', org.adminKey)
    await Promise.all([popup.waitForEvent('close'), popup.click('button[value=approve]')])

    // Swagger UI exchanged the code (code_verifier and redirect_uri) and holds the token.
    const token = await page.waitForFunction(() => (globalThis as any).ui.authSelectors.authorized().toJS().oauth2?.token?.access_token)
    const accessToken = (await token.jsonValue()) as string
    expect(accessToken).toMatch(/^svc_cli_/)
    expect(problems).toEqual([])
    await page.close()

    // The token does what the scheme says: the admin key's authority, here the balance.
    const balance = await t.request('GET', '/api/v1/billing/balance', { key: accessToken })
    expect(balance.status).toBe(200)
    expect((await json(balance)).top_up_remaining_nanos).toBe('10000000000')
  }, 60_000)
})
