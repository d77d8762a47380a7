import { accessSync, chmodSync, constants, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ClientConfig } from '../config/client'
import { gatewayUrl, parseOptions, UsageError, type CliIo } from './io'

/** The client id the gateway builds in for the CLI (src/oauth/clients.ts CLI_CLIENT). */
const CLIENT_ID = 'svc-cli'
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'
/** Refresh a little before expiry, so a request never leaves with a token about to lapse. */
const REFRESH_MARGIN_MS = 60_000

/** What `svc login` keeps in the user's config directory (file mode 0600). */
export interface StoredLogin {
  url: string
  access_token: string
  refresh_token: string
  expires_at_ms: number
  scope: string
}

/** Seams for tests: waiting between polls, and the time. */
export interface LoginEnv {
  sleep(ms: number): Promise<void>
  now(): number
}

const realEnv: LoginEnv = { sleep: ms => Bun.sleep(ms), now: () => Date.now() }

function credentialsPath(client: ClientConfig): string {
  return join(client.configDir(), 'credentials.json')
}

/** The stored login; undefined when there is none (nor a config directory to hold one). */
export function readLogin(client: ClientConfig): StoredLogin | undefined {
  try {
    return JSON.parse(readFileSync(credentialsPath(client), 'utf8')) as StoredLogin
  } catch {
    return undefined
  }
}

/**
 * Where `svc login` will keep the token, its directory created (0700) and checked writable before
 * the person approves anything in the browser: a token minted and then not saved would stay valid
 * with no copy for svc logout to revoke.
 */
function writableCredentialsPath(client: ClientConfig): string {
  const directory = client.configDir()
  try {
    mkdirSync(directory, { recursive: true, mode: 0o700 })
    accessSync(directory, constants.W_OK)
  } catch (error) {
    throw new Error(`cannot keep the svc login token in ${directory}: ${(error as Error).message}; set SVC_CONFIG_DIR to a writable directory`)
  }
  return credentialsPath(client)
}

/** Writes the file readable by the user only: created 0600 under a 0700 directory, then renamed into place. */
function saveLogin(client: ClientConfig, login: StoredLogin): void {
  mkdirSync(client.configDir(), { recursive: true, mode: 0o700 })
  const path = credentialsPath(client)
  const temporary = `${path}.${process.pid}.tmp`
  try {
    writeFileSync(temporary, `${JSON.stringify(login, null, 2)}\n`, { mode: 0o600 })
    chmodSync(temporary, 0o600)
    renameSync(temporary, path)
  } catch (error) {
    // No copy of a token left behind under another name.
    rmSync(temporary, { force: true })
    throw error
  }
}

async function postForm(url: string, form: Record<string, string>): Promise<{ status: number; body: Record<string, any> }> {
  let response: Response
  try {
    response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) })
  } catch (error) {
    throw new Error(`cannot reach the gateway at ${new URL(url).origin}: ${(error as Error).message}`)
  }
  const text = await response.text()
  let body: Record<string, any> = {}
  try {
    body = text ? JSON.parse(text) : {}
  } catch {
    body = { error: 'invalid_response', error_description: text.slice(0, 200) }
  }
  return { status: response.status, body }
}

function toLogin(url: string, tokens: Record<string, any>, now: number): StoredLogin {
  return { url, access_token: tokens.access_token, refresh_token: tokens.refresh_token, expires_at_ms: now + Number(tokens.expires_in) * 1000, scope: tokens.scope }
}

/**
 * `svc login --url BASE`: the OAuth device flow (RFC 8628). Prints the link and code to open in
 * a browser, polls until the person approves there, and keeps the CLI token in the config dir.
 */
export async function login(client: ClientConfig, args: string[], io: CliIo, env: LoginEnv = realEnv): Promise<void> {
  const { values } = parseOptions(args, { url: { type: 'string' } })
  const url = gatewayUrl(values.url, client.url)
  const path = writableCredentialsPath(client)
  const started = await postForm(`${url}/oauth/device_authorization`, { client_id: CLIENT_ID, scope: 'cli:inference' })
  if (started.status !== 200) throw new Error(`the gateway refused the sign-in: ${started.body.error_description ?? started.body.error ?? started.status}`)
  const { device_code, user_code, verification_uri, verification_uri_complete, expires_in } = started.body
  let interval = Number(started.body.interval ?? 5)
  io.err(`To sign in, open ${verification_uri_complete ?? verification_uri}`)
  const minutes = Math.round(Number(expires_in) / 60)
  const validity = minutes >= 1 ? `${minutes} minute${minutes === 1 ? '' : 's'}` : `${Number(expires_in)} seconds`
  io.err(`and confirm the code ${user_code} (valid for ${validity}).`)
  for (;;) {
    await env.sleep(interval * 1000)
    const polled = await postForm(`${url}/oauth/token`, { grant_type: DEVICE_GRANT, device_code, client_id: CLIENT_ID })
    if (polled.status === 200) {
      const signedIn = toLogin(url, polled.body, env.now())
      try {
        saveLogin(client, signedIn)
      } catch (error) {
        // Checked writable before, yet not saved: revoked, as svc logout would, rather than left valid with no copy.
        const problem = await revokeAt(url, signedIn.refresh_token)
        const outcome = problem === undefined ? 'the sign-in was revoked at the gateway' : `and revoking it failed (${problem}): it stays valid at the gateway until it expires or its API key is revoked`
        throw new Error(`cannot keep the svc login token in ${path}: ${(error as Error).message}; ${outcome}`)
      }
      io.out(`Signed in to ${url}. The token is kept in ${path}.`)
      return
    }
    const error = polled.body.error
    if (error === 'authorization_pending') continue
    if (error === 'slow_down') {
      interval += 5
      continue
    }
    if (error === 'access_denied') throw new Error('the sign-in was denied in the browser')
    if (error === 'expired_token') throw new Error('the code expired before it was approved; run svc login again')
    throw new Error(`sign-in failed: ${polled.body.error_description ?? error ?? polled.status}`)
  }
}

/**
 * `svc logout`: revokes the stored token at the gateway, then deletes it here. A revocation the
 * gateway does not confirm keeps the token (exit 1): deleted, the token would stay valid at the
 * gateway with no copy left to revoke it (QA).
 */
export async function logout(client: ClientConfig, args: string[], io: CliIo): Promise<void> {
  parseOptions(args, {})
  const stored = readLogin(client)
  if (!stored) {
    io.out('Not signed in.')
    return
  }
  const problem = await revokeAt(stored.url, stored.refresh_token)
  const path = credentialsPath(client)
  if (problem !== undefined) throw new Error(`${problem}; the token is kept so that svc logout can revoke it later (delete ${path} to sign out here only)`)
  rmSync(path, { force: true })
  io.out(`Signed out of ${stored.url}.`)
}

/** Revokes a sign-in at its gateway (RFC 7009: the whole grant); resolves to why not, when it is not confirmed. */
async function revokeAt(url: string, refreshToken: string): Promise<string | undefined> {
  try {
    const revoked = await postForm(`${url}/oauth/revoke`, { token: refreshToken, token_type_hint: 'refresh_token', client_id: CLIENT_ID })
    // An OAuth error names itself; a page that is none (a proxy's 502), its status.
    if (revoked.status !== 200) return `the gateway did not confirm the revocation (${revoked.body.error !== 'invalid_response' && revoked.body.error !== undefined ? revoked.body.error : `HTTP ${revoked.status}`})`
    return undefined
  } catch (error) {
    return (error as Error).message
  }
}

/**
 * The stored CLI token for `svc chat`/`svc fusion` when no key is given: refreshed (and saved
 * again, since refresh tokens rotate) when it is about to expire. Undefined when not signed in.
 */
export async function storedToken(client: ClientConfig, env: Pick<LoginEnv, 'now'> = realEnv): Promise<{ token: string; url: string } | undefined> {
  const stored = readLogin(client)
  if (!stored) return undefined
  if (stored.expires_at_ms - REFRESH_MARGIN_MS > env.now()) return { token: stored.access_token, url: stored.url }
  const refreshed = await postForm(`${stored.url}/oauth/token`, { grant_type: 'refresh_token', refresh_token: stored.refresh_token, client_id: CLIENT_ID })
  if (refreshed.status !== 200) throw new UsageError(`the stored sign-in has expired (${refreshed.body.error ?? refreshed.status}); run svc login again`)
  const login = toLogin(stored.url, refreshed.body, env.now())
  saveLogin(client, login)
  return { token: login.access_token, url: login.url }
}
