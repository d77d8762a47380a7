import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js'
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'
import { s256 } from '../../src/oauth/secrets'
import type { TestApp } from './harness'

/** A PKCE verifier and its S256 challenge. */
export function pkce(): { verifier: string; challenge: string } {
  const verifier = Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64url')
  return { verifier, challenge: s256(verifier) }
}

export const REDIRECT = 'http://127.0.0.1:7777/callback'

/** Sends a form-encoded POST through app.handle. */
export function postForm(t: TestApp, path: string, form: Record<string, string | undefined>, headers: Record<string, string> = {}): Promise<Response> {
  const body = new URLSearchParams(Object.entries(form).filter((entry): entry is [string, string] => entry[1] !== undefined))
  return t.app.handle(new Request(`http://localhost${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body }))
}

/** Registers a public client (RFC 7591) and returns its id. */
export async function registerClient(t: TestApp, metadata: Record<string, unknown> = {}): Promise<string> {
  const response = await t.request('POST', '/oauth/register', { body: { client_name: 'Test Client', redirect_uris: [REDIRECT], ...metadata } })
  if (response.status !== 201) throw new Error(`registration failed: ${response.status} ${await response.text()}`)
  return ((await response.json()) as { client_id: string }).client_id
}

/** The hidden fields and CSRF cookie of a consent page. */
export async function readConsentPage(response: Response): Promise<{ fields: Record<string, string>; cookie: string; html: string }> {
  const html = await response.text()
  const fields: Record<string, string> = {}
  for (const match of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    fields[match[1]!] = match[2]!.replace(/&#(\d+);/g, (_, code) => String.fromCharCode(Number(code)))
  }
  const cookie = (response.headers.get('set-cookie') ?? '').split(';')[0]!
  return { fields, cookie, html }
}

export interface AuthorizeParams {
  clientId: string
  challenge: string
  redirectUri?: string
  scope?: string
  state?: string
  resource?: string
  method?: string
}

export function authorizeQuery(params: AuthorizeParams): string {
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: params.clientId,
    redirect_uri: params.redirectUri ?? REDIRECT,
    code_challenge: params.challenge,
    code_challenge_method: params.method ?? 'S256',
    state: params.state ?? 'state-123',
  })
  if (params.scope) query.set('scope', params.scope)
  if (params.resource) query.set('resource', params.resource)
  return `/oauth/authorize?${query}`
}

/** Goes through the consent page as a browser would (GET, then POST the form with the key). Returns the redirect Location. */
export async function approve(t: TestApp, params: AuthorizeParams, apiKey: string, decision = 'approve'): Promise<URL> {
  const page = await t.request('GET', authorizeQuery(params))
  if (page.status !== 200) throw new Error(`consent page: ${page.status} ${page.headers.get('location') ?? (await page.text()).slice(0, 300)}`)
  const { fields, cookie } = await readConsentPage(page)
  const response = await postForm(t, '/oauth/authorize', { ...fields, api_key: apiKey, decision }, { cookie, origin: 'http://localhost' })
  if (response.status !== 303) throw new Error(`consent post: ${response.status} ${(await response.text()).slice(0, 300)}`)
  return new URL(response.headers.get('location')!)
}

/** The whole code flow for `scope`: register, approve with `apiKey`, exchange. Returns the token response. */
export async function codeFlowTokens(t: TestApp, apiKey: string, scope = 'mcp:inference'): Promise<{ access_token: string; refresh_token: string; expires_in: number; scope: string; clientId: string }> {
  const clientId = await registerClient(t)
  const { verifier, challenge } = pkce()
  const redirect = await approve(t, { clientId, challenge, scope }, apiKey)
  const code = redirect.searchParams.get('code')!
  const response = await postForm(t, '/oauth/token', { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier })
  if (response.status !== 200) throw new Error(`token: ${response.status} ${await response.text()}`)
  return { ...((await response.json()) as { access_token: string; refresh_token: string; expires_in: number; scope: string }), clientId }
}

/** The device flow of `svc login` (svc-cli) up to approval: start, then approve on the device page with `apiKey` as a browser would. Returns the device code. */
export async function approveDevice(t: TestApp, apiKey: string): Promise<string> {
  const started = (await (await postForm(t, '/oauth/device_authorization', { client_id: 'svc-cli' })).json()) as { device_code: string; verification_uri_complete: string }
  const link = new URL(started.verification_uri_complete)
  const { fields, cookie } = await readConsentPage(await t.request('GET', link.pathname + link.search))
  const decided = await postForm(t, '/oauth/device', { ...fields, api_key: apiKey, decision: 'approve' }, { cookie, origin: 'http://localhost' })
  if (decided.status !== 200) throw new Error(`device approval: ${decided.status} ${(await decided.text()).slice(0, 300)}`)
  return started.device_code
}

/** The CLI's poll of the token endpoint for a device code. */
export function pollDevice(t: TestApp, deviceCode: string): Promise<Response> {
  return postForm(t, '/oauth/token', { grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: deviceCode, client_id: 'svc-cli' })
}

/** The whole device flow (cli:inference), approved with `apiKey`. Returns the token response. */
export async function deviceFlowTokens(t: TestApp, apiKey: string): Promise<{ access_token: string; refresh_token: string; scope: string; clientId: string }> {
  const response = await pollDevice(t, await approveDevice(t, apiKey))
  if (response.status !== 200) throw new Error(`token: ${response.status} ${await response.text()}`)
  return { ...((await response.json()) as { access_token: string; refresh_token: string; scope: string }), clientId: 'svc-cli' }
}

/**
 * An MCP host's side of OAuth, in memory, as Claude Code or Cursor keep it on disk: the SDK's
 * OAuthClientProvider. `signedIn` starts it with tokens (stamped with their issuer, as the SDK
 * stamps what it saves); such a host is never sent to sign in again (that throws).
 */
export class MemoryOAuthHost implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined
  saved: OAuthTokens | undefined
  verifier = ''
  authorizationUrl: URL | undefined

  constructor(
    private readonly callback: string,
    private readonly signedIn?: { tokens: OAuthTokens; clientId: string; issuer: string },
  ) {
    if (signedIn) {
      this.saved = { ...signedIn.tokens, issuer: signedIn.issuer }
      this.client = { client_id: signedIn.clientId, issuer: signedIn.issuer }
    }
  }

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
    if (this.signedIn) throw new Error(`the host was sent to sign in again: ${url}`)
    this.authorizationUrl = url
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier
  }
  codeVerifier() {
    return this.verifier
  }
}
