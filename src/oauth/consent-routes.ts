import { Elysia } from 'elysia'
import { isDatabaseOutage } from '../db/client'
import type { OAuthScope } from '../db/schema'
import { isWellFormedKeySecret } from '../keys/token'
import type { Principal } from '../keys/principal'
import { isBuiltInClient, matchRedirectUri, type OAuthClient } from './clients'
import { isValidChallenge } from './codes'
import { OAuthError } from './errors'
import type { PendingDevice } from './device'
import { checkCsrf, newCsrf, readForm, readQuery } from './form'
import { AUTHORIZE_PARAMETERS, DEVICE_PAGE_PARAMETERS, formDoc, htmlDoc, PAGE_UNAVAILABLE } from './openapi'
import { consentPage, deviceCodePage, escapeHtml, messagePage } from './pages'
import { checkAudience, parseResource } from './resource'
import { parseScope } from './secrets'
import { OAUTH_PATHS, type OAuthServer } from './server'

/** The parameters of an authorization request (OAuth 2.1 §4.1.1), as the consent form carries them. */
const AUTHORIZE_FIELDS = ['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method', 'scope', 'state', 'resource'] as const
type AuthorizeParams = Partial<Record<(typeof AUTHORIZE_FIELDS)[number], string>>

interface ValidRequest {
  client: OAuthClient
  redirectUri: string
  scope: OAuthScope
  resource: string | null
  params: AuthorizeParams
}

/**
 * The redirect back to the client. The registered URI's query is kept as written (RFC 6749
 * §3.1.2: it MUST be retained), not re-serialized through URLSearchParams; only the values added
 * are encoded. The base is the parsed URL's href, so the Location is always a valid header value
 * (no raw Unicode or control characters), and never carries a fragment (the response is the query).
 */
function redirectWith(redirectUri: string, params: Record<string, string | undefined>): Response {
  const url = new URL(redirectUri)
  url.hash = ''
  const base = url.href
  const added = Object.entries(params)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([name, value]) => `${name}=${encodeURIComponent(value)}`)
    .join('&')
  const separator = !base.includes('?') ? '?' : base.endsWith('?') || base.endsWith('&') ? '' : '&'
  return new Response(null, { status: 303, headers: { location: base + separator + added, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' } })
}

/**
 * Validates an authorization request; any error throws OAuthError. None of them redirects to the
 * client: until the person has seen the consent page and chosen, an error redirect would make the
 * gateway a no-click open redirector to any URI anyone registered (RFC 9700 §4.11.2, OAuth 2.1
 * §7.12.2). They are shown on the gateway's own page instead.
 */
async function validate(oauth: OAuthServer, raw: Record<string, string>, issuer: string): Promise<ValidRequest> {
  const params: AuthorizeParams = Object.fromEntries(AUTHORIZE_FIELDS.map(name => [name, raw[name]]))
  const client = await oauth.clients.find(params.client_id)
  if (!client || !client.grantTypes.includes('authorization_code')) throw new OAuthError('invalid_request', 'Unknown client: client_id is missing or not registered for sign-in.')
  if (!params.redirect_uri || !matchRedirectUri(client, params.redirect_uri)) throw new OAuthError('invalid_request', 'The redirect_uri is missing or not registered for this client.')
  if (params.response_type !== 'code') throw new OAuthError(params.response_type ? 'unsupported_response_type' : 'invalid_request', 'response_type must be "code"')
  if (params.code_challenge_method !== 'S256') throw new OAuthError('invalid_request', 'PKCE is required: code_challenge_method must be S256')
  if (!isValidChallenge(params.code_challenge)) throw new OAuthError('invalid_request', 'code_challenge must be 43 base64url characters (S256)')
  const scope = parseScope(params.scope)
  if (scope === 'invalid') throw new OAuthError('invalid_scope', 'scope must be exactly one of mcp:inference, cli:inference')
  const resource = parseResource(params.resource, issuer)
  // Without a scope, the resource named decides it (RFC 8707: the token is for that resource);
  // with both, they must agree. Neither: mcp:inference, what MCP hosts come for.
  const granted = scope ?? resource?.scope ?? 'mcp:inference'
  checkAudience(resource, granted)
  return { client, redirectUri: params.redirect_uri, scope: granted, resource: resource?.url ?? null, params }
}

/**
 * A key the form was given and refused re-renders the page as 403 (credentials given and found
 * insufficient, RFC 9110 §15.5.4), not 401: a 401 must carry a WWW-Authenticate challenge, and a
 * form has no HTTP authentication scheme to name.
 */
const SIGN_IN_FAILED = 403

/**
 * Signs the person in with one of their API keys. Its secret is checked, never kept; its id is
 * kept on the grant, so the tokens can never do more than the key (admin flag, spend cap, expiry).
 */
async function signIn(oauth: OAuthServer, apiKey: string | undefined): Promise<Principal | string> {
  if (!apiKey || !isWellFormedKeySecret(apiKey.trim())) return 'Enter a valid organization API key (z_sk_…).'
  const result = await oauth.keys.verify(apiKey.trim(), true)
  if (!result.ok) return `That API key is ${result.reason === 'unknown' ? 'not valid' : result.reason}.`
  return result.principal
}

/** The form of a consent post, or the error page when it cannot be read. */
async function readFormOrPage(request: Request): Promise<Record<string, string> | Response> {
  try {
    return await readForm(request)
  } catch (error) {
    if (error instanceof OAuthError) return messagePage('Invalid request', error.message, 400)
    throw error
  }
}

/** validate(), with its errors turned into the error page (400: the error code and its description). */
async function validateOrRespond(oauth: OAuthServer, raw: Record<string, string>, issuer: string): Promise<ValidRequest | Response> {
  try {
    return await validate(oauth, raw, issuer)
  } catch (error) {
    if (error instanceof OAuthError) return invalidRequestPage(error)
    throw error
  }
}

/** The error page of an authorization request that cannot be trusted with a redirect. */
function invalidRequestPage(error: OAuthError): Response {
  return messagePage('Invalid request', `The application's sign-in request is invalid (${error.code}): ${error.message}`, 400)
}

type PageExtras = { detail?: string; error?: string; status?: number }

/** A fresh CSRF token and its cookie (Secure when the issuer is https). */
const csrfFor = (issuer: string) => newCsrf(issuer.startsWith('https:'))

/** Who asks, as a consent page names it: a registered client's name is its registrant's choice, so it is marked third-party with its id. */
function requester(client: OAuthClient): { clientName: string; thirdPartyClientId?: string } {
  return isBuiltInClient(client) ? { clientName: client.name } : { clientName: client.name, thirdPartyClientId: client.id }
}

/** The sign-in and consent page of an authorization request (first shown, or again after a failed sign-in). */
function authorizeConsent(valid: ValidRequest, issuer: string, extras: PageExtras): Response {
  const csrf = csrfFor(issuer)
  return consentPage({ action: OAUTH_PATHS.authorize, ...requester(valid.client), scope: valid.scope, fields: valid.params, csrf: csrf.token, cookie: csrf.cookie, ...extras })
}

/** The sign-in and consent page of a pending device authorization. */
async function deviceConsent(oauth: OAuthServer, pending: PendingDevice, issuer: string, extras: PageExtras): Promise<Response> {
  const client = (await oauth.clients.find(pending.clientId)) ?? { id: pending.clientId, name: pending.clientId, redirectUris: [], grantTypes: [] }
  const csrf = csrfFor(issuer)
  return consentPage({ action: OAUTH_PATHS.device, ...requester(client), scope: pending.scope, fields: { user_code: pending.userCode }, csrf: csrf.token, cookie: csrf.cookie, ...extras })
}

/**
 * Runs a page: a database outage is a page saying to retry (503), not the API's JSON envelope,
 * and never a failed sign-in (the key could not be checked, so it is neither good nor bad).
 */
function page(fn: (context: { request: Request }) => Promise<Response>) {
  return async (context: { request: Request }): Promise<Response> => {
    try {
      return await fn(context)
    } catch (error) {
      if (isDatabaseOutage(error)) return messagePage('Temporarily unavailable', 'The gateway cannot reach its database right now. Try again in a moment.', 503)
      throw error
    }
  }
}

/** GET/POST /oauth/authorize and GET/POST /oauth/device: the HTML sign-in and consent pages. */
export function consentRoutes(oauth: OAuthServer) {
  return new Elysia({ tags: ['OAuth'] })
    .get(
      OAUTH_PATHS.authorize,
      page(async ({ request }) => {
        const issuer = oauth.issuerOf(request)
        const query = readQuery(new URL(request.url))
        const valid = query instanceof OAuthError ? invalidRequestPage(query) : await validateOrRespond(oauth, query, issuer)
        if (valid instanceof Response) return valid
        // The parsed href, not the string as sent: its host in punycode, so a lookalike
        // (https://аpple.com with a Cyrillic а) shows as the xn-- name the browser will go to.
        return authorizeConsent(valid, issuer, { detail: `After you decide, you return to <code>${escapeHtml(new URL(valid.redirectUri).href)}</code>.` })
      }),
      {
        detail: {
          summary: 'Authorization page (code + PKCE)',
          description: 'OAuth 2.1 authorization request (response_type=code, client_id, redirect_uri, code_challenge, code_challenge_method=S256, scope, state, resource). Renders the sign-in and consent page, which marks a registered client as a third-party application and shows its client id. An invalid request is answered with an error page (400), not redirected to the client: only the person’s Approve or Deny on the page goes back to the redirect URI.',
          parameters: AUTHORIZE_PARAMETERS,
          responses: { 200: htmlDoc('The consent page'), 400: htmlDoc('Invalid request (unknown client or redirect URI, response_type, PKCE, scope, resource): an error page, never a redirect'), ...PAGE_UNAVAILABLE },
        },
      },
    )
    .post(
      OAUTH_PATHS.authorize,
      page(async ({ request }) => {
        const issuer = oauth.issuerOf(request)
        const form = await readFormOrPage(request)
        if (form instanceof Response) return form
        const valid = await validateOrRespond(oauth, form, issuer)
        if (valid instanceof Response) return valid
        if (!checkCsrf(request, form.csrf, oauth.config.issuer)) return messagePage('Request expired', 'This form is stale or was not sent from this page. Go back to the application and start again.', 403)
        if (form.decision === 'deny') return redirectWith(valid.redirectUri, { error: 'access_denied', error_description: 'the user denied the request', state: valid.params.state, iss: issuer })
        if (form.decision !== 'approve') return messagePage('Invalid request', 'Choose Approve or Deny.', 400)
        const who = await signIn(oauth, form.api_key)
        if (typeof who === 'string') return authorizeConsent(valid, issuer, { error: who, status: SIGN_IN_FAILED })
        const code = await oauth.codes.create({
          clientId: valid.client.id, userId: who.userId, orgId: who.orgId, redirectUri: valid.redirectUri,
          codeChallenge: valid.params.code_challenge!, scope: valid.scope, resource: valid.resource, keyId: who.keyId,
        })
        return redirectWith(valid.redirectUri, { code, state: valid.params.state, iss: issuer })
      }),
      {
        parse: 'none',
        detail: {
          summary: 'Approve or deny an authorization request',
          description: 'The consent form post: the request parameters, csrf (double-submit with a SameSite=Strict cookie), api_key (signs the person in; the secret is never stored, the key id is, and the tokens can never do more than that key: its admin flag, spend cap, expiry and revocation bound them) and decision (approve|deny). Redirects (303) to the client with code, state and iss, or error=access_denied.',
          requestBody: formDoc({ api_key: 'string', decision: 'string', csrf: 'string', client_id: 'string', redirect_uri: 'string', code_challenge: 'string', code_challenge_method: 'string', scope: 'string', state: 'string', resource: 'string', response_type: 'string' }),
          responses: { 303: { description: 'Back to the client' }, 400: htmlDoc('Invalid request'), 403: htmlDoc('Sign-in failed (the page again, with the reason), or the CSRF check failed'), ...PAGE_UNAVAILABLE },
        },
      },
    )
    .get(
      OAUTH_PATHS.device,
      page(async ({ request }) => {
        const issuer = oauth.issuerOf(request)
        const query = readQuery(new URL(request.url))
        if (query instanceof OAuthError || !query.user_code) return deviceCodePage(OAUTH_PATHS.device)
        const pending = await oauth.device.pending(query.user_code)
        if (!pending) return deviceCodePage(OAUTH_PATHS.device, 'That code is unknown, used or expired. Check the code in your terminal.', 400)
        return deviceConsent(oauth, pending, issuer, { detail: 'Only approve if you started this sign-in yourself and the code matches your terminal.' })
      }),
      {
        detail: {
          summary: 'Device verification page (RFC 8628)',
          description: 'Without user_code: a form to type it. With user_code: the client name (a registered client marked as a third-party application, with its client id), scope and the sign-in and consent form.',
          parameters: DEVICE_PAGE_PARAMETERS,
          responses: { 200: htmlDoc('The page'), 400: htmlDoc('Unknown or expired code'), ...PAGE_UNAVAILABLE },
        },
      },
    )
    .post(
      OAUTH_PATHS.device,
      page(async ({ request }) => {
        const issuer = oauth.issuerOf(request)
        const form = await readFormOrPage(request)
        if (form instanceof Response) return form
        if (!checkCsrf(request, form.csrf, oauth.config.issuer)) return messagePage('Request expired', 'This form is stale or was not sent from this page. Open the link from your terminal again.', 403)
        const pending = form.user_code ? await oauth.device.pending(form.user_code) : undefined
        if (!pending) return deviceCodePage(OAUTH_PATHS.device, 'That code is unknown, used or expired.', 400)
        if (form.decision === 'deny') {
          await oauth.device.decide(pending.userCode, { approve: false })
          return messagePage('Request denied', 'The device was not connected. You can close this page.')
        }
        if (form.decision !== 'approve') return messagePage('Invalid request', 'Choose Approve or Deny.', 400)
        const who = await signIn(oauth, form.api_key)
        if (typeof who === 'string') return deviceConsent(oauth, pending, issuer, { error: who, status: SIGN_IN_FAILED })
        if (!(await oauth.device.decide(pending.userCode, { approve: true, userId: who.userId, orgId: who.orgId, keyId: who.keyId }))) {
          return deviceCodePage(OAUTH_PATHS.device, 'That code is no longer pending.', 400)
        }
        return messagePage('Device connected', 'You are signed in. Return to your terminal; you can close this page.')
      }),
      {
        parse: 'none',
        detail: {
          summary: 'Approve or deny a device',
          description: 'The device consent form post: user_code, csrf, api_key (signs the person in; the secret is never stored, the key id is, and the tokens can never do more than that key: its admin flag, spend cap, expiry and revocation bound them) and decision (approve|deny).',
          requestBody: formDoc({ user_code: 'string', api_key: 'string', decision: 'string', csrf: 'string' }),
          responses: { 200: htmlDoc('Done'), 400: htmlDoc('Unknown code'), 403: htmlDoc('Sign-in failed (the page again, with the reason), or the CSRF check failed'), ...PAGE_UNAVAILABLE },
        },
      },
    )
}
