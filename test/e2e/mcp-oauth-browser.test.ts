import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js'
import { chromium, type Browser } from 'playwright-core'
import { openAIWire } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { upstreamProvider } from '../support/gateway'
import { buildConfiguredApp, type TestApp, type TestOrg } from '../support/harness'
import { MemoryOAuthHost, readConsentPage } from '../support/oauth'

// What an MCP host does, end to end, with the official SDK client and its OAuth support: the
// first request is refused with a WWW-Authenticate challenge; the SDK discovers the protected
// resource and the authorization server, registers itself (RFC 7591), and sends the person to
// the consent page with PKCE. A real headless Chromium signs in there with an API key and
// approves; the redirect lands on the host's loopback callback; the SDK exchanges the code and
// reconnects, lists the tools and calls svc.chat, then svc.chat_fusion (two participants and the
// judge, with progress notifications), answered by a fake OpenAI-compatible upstream.
// Where Chromium is not installed or cannot start (CI installs Debian's `chromium`), the consent
// form is posted over HTTP instead, so the rest of the flow and the tool calls still run.

const CHROMIUM = '/usr/bin/chromium'

/** Chromium when installed and launchable; otherwise undefined (the consent form is then posted over HTTP). */
async function launchChromium(): Promise<Browser | undefined> {
  if (!existsSync(CHROMIUM)) return undefined
  try {
    return await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] })
  } catch (error) {
    console.warn(`Chromium did not start (${(error as Error).message.split('\n')[0]}): the consent form is posted over HTTP instead`)
    return undefined
  }
}

describe('MCP host: OAuth discovery, registration and consent (in Chromium when available), then tools', () => {
  let t: TestApp
  let org: TestOrg
  let callbackServer: ReturnType<typeof Bun.serve>
  let upstream: FakeUpstream
  let browser: Browser | undefined
  let base: string
  let codeArrived: Promise<URL>

  beforeAll(async () => {
    upstream = await FakeUpstream.start()
    t = await buildConfiguredApp([
      'providers:',
      upstreamProvider('up', 'openai-compatible', `${upstream.url}/v1`, 'UP_KEY'),
      'models:',
      ...[['solo', 'a'], ['second', 'b'], ['judge', 'j']].map(
        ([id, model]) => `  - { id: ${id}, backends: [{ provider: up, model: model-${model} }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 16384, max_output_tokens: 2048 }`,
      ),
      'plans: { payg: { monthly_allowance: "0", fusion: true } }',
      'fusion: { judge: judge, participant_timeout_ms: 30000, judge_timeout_ms: 30000 }',
    ], { UP_KEY: 'sk-upstream-key' })
    org = await t.createOrg('acme', 1_000_000_000n)
    base = t.listen()
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
    browser = await launchChromium()
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    callbackServer.stop(true)
    await upstream.close()
    await t.close()
  })

  /** The person, in a real browser: a wrong key first (refused on the page), then theirs. */
  async function approveInChromium(browser: Browser, authorizationUrl: URL): Promise<string> {
    const page = await browser.newPage()
    await page.goto(authorizationUrl.href)
    // A registered client: marked third-party, with the client id its registrant cannot choose.
    expect(await page.textContent('h1')).toBe('Authorize Acme Agent Host (third-party application)')
    expect(await page.textContent('body')).toContain(`Client id: ${authorizationUrl.searchParams.get('client_id')}`)
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
    return callback.searchParams.get('code')!
  }

  /** Without Chromium: the same page and form over the socket, as a browser would post it. */
  async function approveOverHttp(authorizationUrl: URL): Promise<string> {
    const page = await fetch(authorizationUrl)
    const { fields, cookie, html } = await readConsentPage(page)
    expect(html).toContain('Authorize Acme Agent Host')
    expect(html).toContain('mcp:inference')
    const approved = await fetch(`${base}/oauth/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin: base },
      body: new URLSearchParams({ ...fields, api_key: org.adminKey, decision: 'approve' }),
    })
    expect(approved.status).toBe(303)
    const callback = new URL(approved.headers.get('location')!)
    expect(callback.origin).toBe(`http://127.0.0.1:${callbackServer.port}`)
    expect(callback.searchParams.get('iss')).toBe(base)
    return callback.searchParams.get('code')!
  }

  test('discovery → registration → consent → token → tools/list → svc.chat → svc.chat_fusion', async () => {
    const mcpUrl = new URL(`${base}/mcp`)
    const auth = new MemoryOAuthHost(`http://127.0.0.1:${callbackServer.port}/callback`)
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

    const code = browser ? await approveInChromium(browser, authorizationUrl) : await approveOverHttp(authorizationUrl)
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

    // Fusion, as the host would call it: both participants answer (the same text, so the
    // order they reach the upstream does not matter), then the judge synthesizes.
    const participant = { kind: 'sse' as const, body: openAIWire.stream({ text: 'Paris.', finish: 'stop', usage: { inputTokens: 20, outputTokens: 8 } }) }
    upstream.enqueue(participant, participant, { kind: 'sse', body: openAIWire.stream({ text: 'Both say Paris.', finish: 'stop', usage: { inputTokens: 50, outputTokens: 10 } }) })
    const progress: string[] = []
    const fused = await client.callTool(
      { name: 'svc.chat_fusion', arguments: { models: ['solo', 'second'], request_id: crypto.randomUUID(), prompt: 'Capital of France?' } },
      CallToolResultSchema,
      { onprogress: update => progress.push(update.message ?? '') },
    )
    expect(fused.isError).toBeFalsy()
    expect((fused.content as Array<{ text: string }>)[0]!.text).toStartWith('Both say Paris.\n\nFusion complete; judge judge.')
    expect((fused.structuredContent as { status: string }).status).toBe('complete')
    expect(progress.length).toBe(5)
    expect(progress.at(-1)).toBe('judge: writing the synthesis')
    expect(upstream.requests.slice(1).map(request => request.body.model).sort()).toEqual(['model-a', 'model-b', 'model-j'])
    // Two participants at 36000 nanos each and the judge at 50 × $1/M + 10 × $2/M = 70000.
    expect(1_000_000_000n - (await t.deps.balance(org.orgId)).prepaidNanos).toBe(36_000n + 72_000n + 70_000n)
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
