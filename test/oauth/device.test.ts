import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../../src/commands'
import { loadClientConfig } from '../../src/config/client'
import { chat } from '../../src/operator/chat'
import { login, readLogin, storedToken } from '../../src/operator/login'
import { eachTestWithOrg, json, type TestApp, type TestOrg } from '../support/harness'
import { postForm, readConsentPage } from '../support/oauth'

// The device authorization grant (RFC 8628): the endpoint rules through app.handle, then
// `svc login` end to end against a real socket, with the person's approval done on the device
// page as a browser would post it. Waiting between polls moves the FakeClock: no sleeps.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'

async function start(clientId = 'svc-cli') {
  const response = await postForm(t, '/oauth/device_authorization', { client_id: clientId })
  return { status: response.status, body: await json(response) }
}
const poll = (deviceCode: string, clientId = 'svc-cli') => postForm(t, '/oauth/token', { grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: clientId })

/** The person's side: open the verification link, sign in with a key, decide. */
async function decide(fetcher: (request: Request) => Promise<Response>, link: string, apiKey: string, decision: 'approve' | 'deny'): Promise<Response> {
  const page = await fetcher(new Request(link))
  expect(page.status).toBe(200)
  const { fields, cookie, html } = await readConsentPage(page)
  expect(html).toContain('svc command-line client')
  expect(html).toContain('cli:inference')
  const url = new URL(link)
  return fetcher(new Request(`${url.origin}/oauth/device`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin: url.origin },
    body: new URLSearchParams({ ...fields, api_key: apiKey, decision }),
  }))
}
const viaApp = (request: Request) => t.app.handle(new Request(request.url.replace(/^http:\/\/[^/]+/, 'http://localhost'), request))

describe('device endpoints', () => {
  test('start, pending, slow_down, approve, tokens once', async () => {
    const { status, body } = await start()
    expect(status).toBe(200)
    expect(body.user_code).toMatch(/^[B-DF-HJ-NP-TV-XZ]{4}-[B-DF-HJ-NP-TV-XZ]{4}$/)
    expect(body.verification_uri).toBe('http://localhost/oauth/device')
    expect(body.verification_uri_complete).toBe(`http://localhost/oauth/device?user_code=${body.user_code}`)
    expect(body).toMatchObject({ expires_in: 600, interval: 5 })
    expect((await json(await poll(body.device_code))).error).toBe('authorization_pending')
    // Polled again before the interval: slow_down, and the interval grows by 5 s.
    const fast = await json(await poll(body.device_code))
    expect(fast.error).toBe('slow_down')
    // 5 s later is still too soon for the grown interval (10 s): slow_down again, now 15 s.
    t.clock.advance(5_000)
    expect((await json(await poll(body.device_code))).error).toBe('slow_down')
    t.clock.advance(15_000)
    expect((await json(await poll(body.device_code))).error).toBe('authorization_pending')

    const done = await decide(viaApp, body.verification_uri_complete, org.adminKey, 'approve')
    expect(await done.text()).toContain('Device connected')
    t.clock.advance(15_000)
    const tokens = await json(await poll(body.device_code))
    expect(tokens.access_token).toMatch(/^svc_cli_/)
    expect(tokens.scope).toBe('cli:inference')
    t.clock.advance(15_000)
    expect((await json(await poll(body.device_code))).error).toBe('invalid_grant')
  })

  test('deny → access_denied; expiry → expired_token; a typed code works in any case and with spaces', async () => {
    const denied = (await start()).body
    await decide(viaApp, denied.verification_uri_complete, org.adminKey, 'deny')
    expect((await json(await poll(denied.device_code))).error).toBe('access_denied')

    const late = (await start()).body
    t.clock.advance(600_000)
    expect((await json(await poll(late.device_code))).error).toBe('expired_token')
    const page = await t.request('GET', `/oauth/device?user_code=${late.user_code}`)
    expect(page.status).toBe(400)

    const typed = (await start()).body
    const sloppy = ` ${typed.user_code.toLowerCase().replace('-', ' ')} `
    expect((await t.request('GET', `/oauth/device?user_code=${encodeURIComponent(sloppy)}`)).status).toBe(200)
  })

  test('unknown clients, wrong clients and bad keys get nothing', async () => {
    expect((await start('nobody')).body.error).toBe('invalid_client')
    const { body } = await start()
    expect((await json(await poll(body.device_code, 'another'))).error).toBe('invalid_client')
    const failed = await decide(viaApp, body.verification_uri_complete, 'z_sk_wrong', 'approve')
    expect(failed.status).toBe(403)
    t.clock.advance(10_000)
    expect((await json(await poll(body.device_code))).error).toBe('authorization_pending')
    expect((await t.request('GET', '/oauth/device')).status).toBe(200)
  })
})

describe('two consent pages at once', () => {
  test('opening a second page does not break the first one’s form (each page has its own CSRF cookie)', async () => {
    // A browser's cookie jar: a Set-Cookie with a name already held replaces it.
    const jar = new Map<string, string>()
    const open = async (userCode: string) => {
      const page = await readConsentPage(await t.request('GET', `/oauth/device?user_code=${userCode}`))
      const [name, value] = page.cookie.split('=') as [string, string]
      jar.set(name, value)
      return page.fields
    }
    const start = async () => (await json(await postForm(t, '/oauth/device_authorization', { client_id: 'svc-cli' }))).user_code as string
    const first = await open(await start())
    const second = await open(await start())
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ')
    for (const fields of [first, second]) {
      const decided = await postForm(t, '/oauth/device', { ...fields, api_key: org.adminKey, decision: 'approve' }, { cookie, origin: 'http://localhost' })
      expect(decided.status).toBe(200)
    }
  })
})

describe('svc login / chat / logout, end to end', () => {
  let server: ReturnType<typeof Bun.serve>
  let base: string
  let dir: string

  beforeEach(() => {
    server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: t.app.fetch })
    base = `http://127.0.0.1:${server.port}`
    dir = mkdtempSync(join(tmpdir(), 'svc-login-'))
  })
  afterEach(() => {
    server.stop(true)
    rmSync(dir, { recursive: true, force: true })
  })

  test('login polls until approved in the browser, keeps the token 0600; chat uses it; logout revokes it', async () => {
    const config = loadClientConfig({ SVC_CONFIG_DIR: join(dir, 'svc') })
    const out: string[] = []
    const err: string[] = []
    const io = { out: (line: string) => out.push(line), err: (line: string) => err.push(line), write: () => {} }
    let sleeps = 0
    // The person approves while the CLI waits for its second poll.
    const env = {
      now: () => Date.now(),
      async sleep(ms: number) {
        sleeps += 1
        t.clock.advance(ms)
        if (sleeps === 2) {
          const link = err.join('\n').match(/open (\S+)/)![1]!
          expect(link.startsWith(`${base}/oauth/device?user_code=`)).toBe(true)
          expect((await decide(fetch, link, org.adminKey, 'approve')).status).toBe(200)
        }
      },
    }
    await login(config, ['--url', base], io, env)
    expect(sleeps).toBe(2)
    // The code's lifetime in words (the default device_code_ttl_s, 600).
    expect(err.join('\n')).toMatch(/\(valid for 10 minutes\)\.$/m)
    expect(out.join('\n')).toContain(`Signed in to ${base}`)
    const path = join(dir, 'svc', 'credentials.json')
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(statSync(join(dir, 'svc')).mode & 0o777).toBe(0o700)
    const stored = readLogin(config)!
    expect(stored.access_token).toMatch(/^svc_cli_/)
    expect(stored.url).toBe(base)

    // svc chat with no key: the stored token and its gateway.
    const written: string[] = []
    await chat(config, ['--model', 'demo-anonymous', 'hello'], { ...io, write: text => written.push(text) })
    expect(written.join('')).toBe('Hello from the demo model. You said: hello\n')
    // It is sent only to that gateway (QA: --url handed it to any host, and SVC_URL was ignored);
    // the same gateway spelled with a trailing slash is the same.
    const elsewhere = 'http://127.0.0.1:9'
    await expect(chat(config, ['--model', 'demo-anonymous', '--url', elsewhere, 'hello'], io)).rejects.toThrow(`the svc login token is for ${base}, not ${elsewhere}`)
    const fromEnv = loadClientConfig({ SVC_CONFIG_DIR: join(dir, 'svc'), SVC_URL: elsewhere })
    await expect(chat(fromEnv, ['--model', 'demo-anonymous', 'hello'], io)).rejects.toThrow(`not ${elsewhere}: sign in there`)
    await chat(config, ['--model', 'demo-anonymous', '--url', `${base}/`, 'hello'], { ...io, write: text => written.push(text) })

    // Near expiry the token is refreshed (and the rotated pair saved).
    const refreshed = await storedToken(config, { now: () => Date.now() + 3600_000 })
    expect(refreshed!.token).not.toBe(stored.access_token)
    expect(readLogin(config)!.refresh_token).not.toBe(stored.refresh_token)

    const code = await runCli(['logout'], { SVC_CONFIG_DIR: join(dir, 'svc'), SVC_LOG_LEVEL: 'error' }, io)
    expect(code).toBe(0)
    expect(readLogin(config)).toBeUndefined()
    const after = await t.request('POST', '/v1/chat/completions', { key: refreshed!.token, body: { model: 'demo-anonymous', messages: [{ role: 'user', content: 'x' }] } })
    expect(after.status).toBe(401)
    // Signed out and no key: a usage error that says how to sign in.
    const noKey = await runCli(['chat', '--model', 'demo-anonymous', 'hi'], { SVC_CONFIG_DIR: join(dir, 'svc'), SVC_LOG_LEVEL: 'error' }, io)
    expect(noKey).toBe(2)
    expect(err.join('\n')).toContain('svc login')
  })

  test('a denied sign-in ends login with an error', async () => {
    const config = loadClientConfig({ SVC_CONFIG_DIR: join(dir, 'svc') })
    const err: string[] = []
    const io = { out: () => {}, err: (line: string) => err.push(line), write: () => {} }
    const env = {
      now: () => Date.now(),
      async sleep(ms: number) {
        t.clock.advance(ms)
        const link = err.join('\n').match(/open (\S+)/)![1]!
        await decide(fetch, link, org.adminKey, 'deny')
      },
    }
    await expect(login(config, ['--url', base], io, env)).rejects.toThrow('denied')
    expect(readLogin(config)).toBeUndefined()
  })

  test('a logout the gateway does not confirm keeps the token and exits 1', async () => {
    // QA: it exited 0 and deleted the only copy, leaving the token valid at the gateway.
    const config = loadClientConfig({ SVC_CONFIG_DIR: join(dir, 'svc') })
    mkdirSync(join(dir, 'svc'), { recursive: true, mode: 0o700 })
    const stored = { url: 'http://127.0.0.1:9', access_token: 'svc_cli_x', refresh_token: 'svc_cli_refresh_x', expires_at_ms: Date.now() + 3600_000, scope: 'cli:inference' }
    writeFileSync(join(dir, 'svc', 'credentials.json'), JSON.stringify(stored), { mode: 0o600 })
    const err: string[] = []
    const io = { out: () => {}, err: (line: string) => err.push(line), write: () => {} }
    const code = await runCli(['logout'], { SVC_CONFIG_DIR: join(dir, 'svc'), SVC_LOG_LEVEL: 'error' }, io)
    expect(code).toBe(1)
    expect(err.join('\n')).toContain('the token is kept so that svc logout can revoke it later')
    expect(readLogin(config)).toEqual(stored)
    // A proxy's page in place of the gateway's answer is named by its status (regression QA: "invalid_response").
    const proxy = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('<html>Bad Gateway</html>', { status: 502 }) })
    try {
      writeFileSync(join(dir, 'svc', 'credentials.json'), JSON.stringify({ ...stored, url: `http://127.0.0.1:${proxy.port}` }), { mode: 0o600 })
      expect(await runCli(['logout'], { SVC_CONFIG_DIR: join(dir, 'svc'), SVC_LOG_LEVEL: 'error' }, io)).toBe(1)
      expect(err.at(-1)).toContain('the gateway did not confirm the revocation (HTTP 502)')
      // An expired token is refused for another gateway before it is refreshed (the stored one may be down).
      writeFileSync(join(dir, 'svc', 'credentials.json'), JSON.stringify({ ...stored, expires_at_ms: 1 }), { mode: 0o600 })
      await expect(chat(config, ['--model', 'demo-anonymous', '--url', `http://127.0.0.1:${proxy.port}`, 'hi'], io)).rejects.toThrow('the svc login token is for http://127.0.0.1:9, not')
    } finally {
      proxy.stop(true)
    }
  })
})
