import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Server, Subprocess } from 'bun'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildTestApp, type TestApp } from '../support/harness'
import { poll } from '../support/poll'

// The Swagger UI at /docs must render with no internet (STACK-NOTES §2): the plugin's default
// loads the UI from a public CDN, which leaves a blank page offline. Headless Chromium loads
// /docs from an in-process server and we watch every request it makes over the DevTools
// protocol (Bun's WebSocket; no browser library). Skipped where Chromium is not installed;
// CI installs the Debian package `chromium`.

const CHROMIUM = '/usr/bin/chromium'
// A made-up, non-loopback name that Chromium resolves to 127.0.0.1 and nothing else resolves at
// all. Swagger UI treats "localhost"/"127.0.0.1" specially (it skips its online validator for
// them), so serving under a real-looking host shows what a deployed gateway's page would fetch.
const HOST = 'svc-docs.test'

type CdpEvent = { method: string; params: any; sessionId?: string }

/** The smallest DevTools-protocol client: numbered commands, promise per reply, event listeners. */
class Cdp {
  private nextId = 1
  private readonly pending = new Map<number, { resolve(value: any): void; reject(error: Error): void }>()
  private readonly listeners: Array<(event: CdpEvent) => void> = []

  private constructor(private readonly socket: WebSocket) {
    socket.onmessage = message => {
      const data = JSON.parse(String(message.data))
      if (data.id === undefined) return this.listeners.forEach(listener => listener(data))
      const waiter = this.pending.get(data.id)
      this.pending.delete(data.id)
      if (data.error) waiter?.reject(new Error(`CDP ${data.error.message}`))
      else waiter?.resolve(data.result)
    }
  }

  static async connect(url: string): Promise<Cdp> {
    const socket = new WebSocket(url)
    await new Promise((resolve, reject) => {
      socket.onopen = resolve
      socket.onerror = () => reject(new Error(`cannot connect to ${url}`))
    })
    return new Cdp(socket)
  }

  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<any> {
    const id = this.nextId++
    this.socket.send(JSON.stringify({ id, method, params, sessionId }))
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }))
  }

  on(listener: (event: CdpEvent) => void): void {
    this.listeners.push(listener)
  }

  close(): void {
    this.socket.close()
  }
}


describe.skipIf(!existsSync(CHROMIUM))('Swagger UI at /docs, offline, in headless Chromium', () => {
  let testApp: TestApp
  let server: Server<unknown>
  let browser: Subprocess<'ignore', 'ignore', 'pipe'>
  let profile = ''
  let cdp: Cdp
  let stderr = ''
  const requests: string[] = []
  const failures: string[] = []
  const exceptions: string[] = []
  let rendered: { title: string; summaries: string[] }
  let screenshot = ''

  beforeAll(async () => {
    testApp = await buildTestApp()
    server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: testApp.app.fetch })
    profile = mkdtempSync(join(tmpdir(), 'svc-chromium-'))
    browser = Bun.spawn(
      [
        CHROMIUM,
        '--headless',
        '--no-sandbox', // CI runs as root
        '--disable-gpu',
        '--disable-dev-shm-usage', // containers often have a 64 MB /dev/shm
        '--disable-quic',
        '--no-first-run',
        '--no-default-browser-check',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-extensions',
        '--disable-features=HttpsUpgrades,MediaRouter',
        // Only our host resolves, to loopback; any other name fails DNS, so a leak cannot succeed.
        `--host-resolver-rules=MAP ${HOST} 127.0.0.1, MAP * ~NOTFOUND`,
        `--user-data-dir=${profile}`,
        '--remote-debugging-port=0',
        '--window-size=1280,1600',
        'about:blank',
      ],
      { stdin: 'ignore', stdout: 'ignore', stderr: 'pipe' },
    )
    void (async () => {
      const decoder = new TextDecoder()
      for await (const chunk of browser.stderr) stderr += decoder.decode(chunk, { stream: true })
    })()
    const endpoint = await poll('Chromium to print its DevTools endpoint', 300, 50, () => {
      if (browser.exitCode !== null) throw new Error(`chromium exited ${browser.exitCode}:\n${stderr}`)
      return /DevTools listening on (ws:\/\/\S+)/.exec(stderr)?.[1]
    })
    cdp = await Cdp.connect(endpoint)

    const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' })
    const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true })
    cdp.on(event => {
      if (event.sessionId !== sessionId) return
      if (event.method === 'Network.requestWillBeSent') requests.push(event.params.request.url)
      if (event.method === 'Network.loadingFailed') failures.push(`${event.params.errorText} (${event.params.type})`)
      if (event.method === 'Network.responseReceived' && event.params.response.status >= 400) {
        failures.push(`${event.params.response.status} ${event.params.response.url}`)
      }
      if (event.method === 'Runtime.exceptionThrown') exceptions.push(event.params.exceptionDetails.exception?.description ?? event.params.exceptionDetails.text)
    })
    for (const domain of ['Network', 'Page', 'Runtime']) await cdp.send(`${domain}.enable`, {}, sessionId)
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true }, sessionId)

    const origin = `http://${HOST}:${server.port}`
    const navigation = await cdp.send('Page.navigate', { url: `${origin}/docs` }, sessionId)
    if (navigation.errorText) throw new Error(`navigation failed: ${navigation.errorText}`)

    // Swagger UI fetches the spec and renders asynchronously: poll the DOM until operations appear.
    rendered = await poll('Swagger UI to render the operations', 200, 50, async () => {
      const { result } = await cdp.send(
        'Runtime.evaluate',
        {
          expression: `({
            title: document.querySelector('.swagger-ui .info .title')?.textContent ?? '',
            summaries: [...document.querySelectorAll('.swagger-ui .opblock-summary-description')].map(e => e.textContent.trim()),
          })`,
          returnByValue: true,
        },
        sessionId,
      )
      return result.value.summaries.length > 0 ? (result.value as { title: string; summaries: string[] }) : undefined
    })

    const shot = await cdp.send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true }, sessionId)
    // One fixed path, overwritten by each run, to look at when the render assertions fail.
    screenshot = join(tmpdir(), 'svc-docs.png')
    writeFileSync(screenshot, Buffer.from(shot.data, 'base64'))
    console.log(`Swagger UI screenshot: ${screenshot}`)
  }, 60_000)

  afterAll(async () => {
    if (browser && browser.exitCode === null) {
      // Ask politely (lets Chromium reap its helper processes), then insist.
      void cdp?.send('Browser.close').catch(() => {})
      await Promise.race([browser.exited, Bun.sleep(5_000)])
      if (browser.exitCode === null) browser.kill('SIGKILL')
      await browser.exited
    }
    cdp?.close()
    server?.stop(true)
    await testApp?.close()
    if (profile) rmSync(profile, { recursive: true, force: true })
  })

  test('renders every documented operation', async () => {
    const spec = (await testApp.request('GET', '/openapi.json').then(r => r.json())) as { paths: Record<string, Record<string, { summary?: string }>> }
    const documented = Object.values(spec.paths).flatMap(operations => Object.values(operations).flatMap(op => (op.summary ? [op.summary] : [])))
    expect(rendered.summaries).toContain('Create an API key')
    expect(rendered.summaries).toContain('List API keys')
    expect([...rendered.summaries].sort()).toEqual([...documented].sort())
    expect(rendered.title).toStartWith('svc-gateway')
  })

  test('loads nothing from any other host, and nothing fails', () => {
    const origin = `http://${HOST}:${server.port}`
    const elsewhere = requests.filter(url => !url.startsWith(`${origin}/`) && !/^(data|blob|about):/.test(url))
    expect(elsewhere).toEqual([])
    expect(requests).toContain(`${origin}/docs-assets/swagger-ui-bundle.js`)
    expect(requests).toContain(`${origin}/docs-assets/swagger-ui.css`)
    expect(requests).toContain(`${origin}/openapi.json`)
    expect(failures.filter(failure => !failure.endsWith('/favicon.ico'))).toEqual([])
    expect(exceptions).toEqual([])
  })
})
