import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js'
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'
import { chromium, type Browser } from 'playwright-core'
import { loadConfig } from '../../src/config/load'
import { openAIWire } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { buildTestApp, type TestApp, type TestOrg } from '../support/harness'

// What an MCP host does, end to end, with the official SDK client and its OAuth support: the
// first request is refused with a WWW-Authenticate challenge; the SDK discovers the protected
// resource and the authorization server, registers itself (RFC 7591), and sends the person to
// the consent page with PKCE. A real headless Chromium signs in there with an API key and
// approves; the redirect lands on the host's loopback callback; the SDK exchanges the code and
// reconnects, lists the tools and calls svc.chat, answered by a fake OpenAI-compatible upstream.
// Skipped where Chromium is not installed (CI installs Debian's `chromium`).

const CHROMIUM = '/usr/bin/chromium'

/** The host's side of OAuth: in memory, as Claude Code or Cursor keep it on disk. */
class HostAuth implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined
  saved: OAuthTokens | undefined
  verifier = ''
  authorizationUrl: URL | undefined

  constructor(private readonly callback: string) {}

  get redirectUrl(): string {
    return this.callback
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'Acme Agent Host', redirect_uris: [this.callback], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' }
  }
  clientInformation() {
    return this.client
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info
  }
  tokens() {
    return this.saved
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier
  }
  codeVerifier() {
    return this.verifier
  }
}

describe.skipIf(!existsSync(CHROMIUM))('MCP host: OAuth discovery, registration and consent in Chromium, then tools', () => {
  let t: TestApp
  let org: TestOrg
  let gateway: ReturnType<typeof Bun.serve>
  let callbackServer: ReturnType<typeof Bun.serve>
  let upstream: FakeUpstream
  let browser: Browser
  let base: string
  let codeArrived: Promise<URL>

  beforeAll(async () => {
    upstream = await FakeUpstream.start()
    const yaml = [
      'providers:',
      `  - { id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none, connect_timeout_ms: 5000, idle_timeout_ms: 5000 }`,
      'models:',
      '  - { id: solo, backends: [{ provider: up, model: model-a }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 16384, max_output_tokens: 2048 }',
      'plans: { payg: { monthly_allowance: "0", fusion: false } }',
    ].join('\n')
    const env = { SVC_CONFIG: '/virtual/gateway.yaml', UP_KEY: 'sk-upstream-key' }
    t = await buildTestApp(env, loadConfig(env, () => yaml))
    org = await t.createOrg('acme', 1_000_000_000n)
    gateway = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: t.app.fetch })
    base = `http://127.0.0.1:${gateway.port}`
    let arrived!: (url: URL) => void
    codeArrived = new Promise(resolve => (arrived = resolve))
    callbackServer = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch(request) {
        arrived(new URL(request.url))
        return new Response('<!doctype html><title>Done</title><p>You can close this window.</p>', { headers: { 'content-type': 'text/html' } })
      },
    })
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    gateway.stop(true)
    callbackServer.stop(true)
    await upstream.close()
    await t.close()
  })

  test('discovery → registration → consent → token → tools/list → svc.chat', async () => {
    const mcpUrl = new URL(`${base}/mcp`)
    const auth = new HostAuth(`http://127.0.0.1:${callbackServer.port}/callback`)
    const first = new StreamableHTTPClientTransport(mcpUrl, { authProvider: auth })
    const refused = await new Client({ name: 'acme-host', version: '1.0.0' }).connect(first).catch(error => error)
    expect(refused).toBeInstanceOf(UnauthorizedError)
    // The SDK registered itself and built a PKCE authorization request for /mcp.
    expect(auth.client?.client_id).toMatch(/^mcp_/)
    const authorizationUrl = auth.authorizationUrl!
    expect(authorizationUrl.origin + authorizationUrl.pathname).toBe(`${base}/oauth/authorize`)
    expect(authorizationUrl.searchParams.get('code_challenge_method')).toBe('S256')
    expect(authorizationUrl.searchParams.get('resource')).toBe(`${base}/mcp`)
    expect(authorizationUrl.searchParams.get('scope')).toBe('mcp:inference')

    // The person, in a real browser.
    const page = await browser.newPage()
    await page.goto(authorizationUrl.href)
    expect(await page.textContent('h1')).toBe('Authorize Acme Agent Host')
    expect(await page.textContent('body')).toContain('mcp:inference')
    await page.fill('#api_key', 'z_sk_not-a-real-key')
    await page.click('button[value=approve]')
    await page.waitForLoadState()
    expect(await page.textContent('[role=alert]')).toContain('valid organization API key')
    await page.fill('#api_key', org.adminKey)
    await page.click('button[value=approve]')
    const callback = await codeArrived
    await page.waitForLoadState()
    expect(await page.title()).toBe('Done')
    await page.close()
    expect(callback.searchParams.get('iss')).toBe(base)
    const code = callback.searchParams.get('code')!
    expect(code.length).toBeGreaterThan(20)

    await first.finishAuth(code)
    expect(auth.saved?.access_token).toMatch(/^svc_mcp_/)
    expect(auth.saved?.refresh_token).toBeTruthy()

    const client = new Client({ name: 'acme-host', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: auth }))
    const { tools } = await client.listTools()
    expect(tools.map(tool => tool.name)).toContain('svc.chat')

    upstream.enqueue({ kind: 'sse', body: openAIWire.stream({ text: 'Paris is the capital of France.', finish: 'stop', usage: { inputTokens: 20, outputTokens: 8 } }) })
    const result = await client.callTool({ name: 'svc.chat', arguments: { model: 'solo', prompt: 'Capital of France?' } })
    expect((result.content as Array<{ text: string }>)[0]!.text).toBe('Paris is the capital of France.')
    const received = upstream.onlyRequest()
    expect(received.headers.authorization).toBe('Bearer sk-upstream-key')
    expect(received.body.messages.at(-1).content).toBe('Capital of France?')
    // Billed to the approving organization: 20 × $1/M + 8 × $2/M = 36000 nanos.
    const balance = await t.deps.balance(org.orgId)
    expect(1_000_000_000n - balance.prepaidNanos).toBe(36_000n)
    await client.close()

    // An hour later the access token has expired: the SDK refreshes it by itself (rotation) and carries on.
    const before = auth.saved!
    t.clock.advance(3600_000)
    const later = new Client({ name: 'acme-host', version: '1.0.0' })
    await later.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: auth }))
    expect((await later.listTools()).tools.length).toBeGreaterThan(0)
    expect(auth.saved!.access_token).not.toBe(before.access_token)
    expect(auth.saved!.refresh_token).not.toBe(before.refresh_token)
    await later.close()
  }, 60_000)
})
