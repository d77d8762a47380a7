import { Elysia } from 'elysia'
import { hasAdminAuthority, type Principal, type VerifyFailure } from '../keys/principal'
import type { KeyService } from '../keys/service'
import { isWellFormedKeySecret, KEY_PREFIX } from '../keys/token'
import { idFromInput } from '../lib/ids'
import { rateLimitHeaders } from '../limits/headers'
import type { Limits } from '../limits/admission'
import { recordOf } from '../observability/request-log'
import { jsonBody, singleFileBody } from './body-limit'
import { ApiError } from './errors'

/**
 * How a route authenticates (ARCHITECTURE.md §1.8):
 * - `public`: no credential (model catalog, health, docs).
 * - `inference`: an organization credential; inference buckets and concurrency.
 * - `management`: an organization credential; management buckets, never inference slots.
 * - `admin`: management, plus an admin key whose user is currently owner or admin.
 * - `mcp`: only `svc_mcp_` tokens with `mcp:inference` (the /mcp endpoint).
 * `svc_cli_` OAuth tokens (`cli:inference`) count as an organization credential on `inference`
 * and, when signed in with an admin key and their user is a current owner or admin, on `admin`;
 * `svc_mcp_` only on `mcp`. Either is bounded by the key it was signed in with (src/oauth/tokens.ts).
 */
export type AuthMode = 'public' | 'inference' | 'management' | 'admin' | 'mcp'

const CLI_PREFIX = 'svc_cli_'
const MCP_PREFIX = 'svc_mcp_'

const FAILURE_MESSAGE: Record<VerifyFailure, string> = {
  unknown: 'invalid API key',
  revoked: 'this API key has been revoked',
  expired: 'this API key has expired',
}

const TOKEN_FAILURE: Record<VerifyFailure, string> = {
  unknown: 'invalid access token',
  // A token fails with the API key it was signed in with, so the messages name both.
  revoked: 'this access token, or the API key it was signed in with, has been revoked; sign in again',
  expired: 'this access token, or the API key it was signed in with, has expired; refresh it or sign in again',
}

/** An OAuth access token of exactly `scope` → principal, or 401. */
async function verifyToken(keys: KeyService, token: string, fresh: boolean, scope: 'mcp:inference' | 'cli:inference'): Promise<Principal> {
  const result = await keys.verifyToken(token, fresh)
  if (!result.ok) throw new ApiError('unauthorized', TOKEN_FAILURE[result.reason])
  if (result.principal.scope !== scope) throw new ApiError('unauthorized', `this access token lacks the ${scope} scope`)
  return result.principal
}

/**
 * Reads the credential from `Authorization: Bearer` or `X-API-Key`. Cookies are never read.
 * `kind` names what the route takes, for the refusal of a request without one.
 */
export function credentialOf(headers: Headers, kind = 'API key'): string {
  const authorization = headers.get('authorization')
  // An empty (or blank) X-API-Key is no credential at all: absent, both alone and beside a Bearer
  // (some clients always send the header, empty when no key is configured).
  const apiKey = headers.get('x-api-key')?.trim() || undefined
  let bearer: string | undefined
  if (authorization !== null) {
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization)
    if (!match) throw new ApiError('unauthorized', 'Authorization header must be "Bearer <API key>"')
    bearer = match[1]
  }
  if (bearer !== undefined && apiKey !== undefined && apiKey !== bearer) {
    throw new ApiError('unauthorized', 'Authorization and X-API-Key carry different credentials')
  }
  const credential = bearer ?? apiKey
  if (!credential) throw new ApiError('unauthorized', `missing credential: send "Authorization: Bearer <${kind}>" or "X-API-Key"`)
  return credential
}

/**
 * The auth step for one request without the macro (/mcp, which answers refusals in JSON-RPC):
 * credential → principal, organization header check, admin authority. Throws ApiError
 * (401/403); returns the principal on success. The request's log line names the caller, as the
 * macro's does.
 */
export async function authenticate(keys: KeyService, request: Request, mode: Exclude<AuthMode, 'public'>): Promise<Principal> {
  const principal = await identify(keys, request, mode)
  noteCaller(request, principal)
  authorize(principal, request, mode)
  return principal
}

/** The request's log line names the organization and key (a refusal by authorize too: the caller is known). */
function noteCaller(request: Request, principal: Principal): void {
  const record = recordOf(request)
  if (record !== undefined) {
    record.orgId = principal.orgId
    record.keyId = principal.keyId
  }
}

/** Credential → principal, or 401. */
async function identify(keys: KeyService, request: Request, mode: Exclude<AuthMode, 'public'>): Promise<Principal> {
  const credential = credentialOf(request.headers, mode === 'mcp' ? 'MCP access token (svc_mcp_, from the OAuth flow)' : undefined)
  let principal: Principal
  if (credential.startsWith(MCP_PREFIX)) {
    // MCP access tokens are audience-bound to /mcp; anywhere else they are not credentials.
    if (mode !== 'mcp') throw new ApiError('unauthorized', 'MCP access tokens are accepted only on /mcp')
    principal = await verifyToken(keys, credential, false, 'mcp:inference')
  } else if (mode === 'mcp') {
    throw new ApiError('unauthorized', '/mcp requires an MCP access token (svc_mcp_) from the OAuth flow')
  } else if (credential.startsWith(CLI_PREFIX)) {
    // Spec §5: CLI tokens work on inference, Fusion, web, parsing, and admin routes (signed in with
    // an admin key, while the user is an owner or admin), not on the key-only management route
    // (rate-limit inspection).
    if (mode === 'management') throw new ApiError('unauthorized', 'CLI access tokens are not accepted on this route; use an API key')
    // Admin routes re-read the user's current role, as for keys.
    principal = await verifyToken(keys, credential, mode === 'admin', 'cli:inference')
  } else if (credential.startsWith(KEY_PREFIX)) {
    if (!isWellFormedKeySecret(credential)) throw new ApiError('unauthorized', 'malformed API key (bad length or checksum)')
    // Admin routes always read the key row and the user's current role (demotion is immediate).
    const result = await keys.verify(credential, mode === 'admin')
    if (!result.ok) throw new ApiError('unauthorized', FAILURE_MESSAGE[result.reason])
    principal = result.principal
  } else {
    throw new ApiError('unauthorized', 'malformed credential: expected an API key starting with z_sk_')
  }
  return principal
}

/** A known principal's right to this request: the organization header and admin authority, or 403. */
function authorize(principal: Principal, request: Request, mode: Exclude<AuthMode, 'public'>): void {
  const orgHeader = request.headers.get('x-org-id')
  if (orgHeader !== null && idFromInput(orgHeader) !== principal.orgId) {
    throw new ApiError('forbidden', 'X-Org-ID does not match the organization of this credential')
  }
  if (mode === 'admin' && !hasAdminAuthority(principal)) {
    throw new ApiError('forbidden', 'this route needs an admin key (or a CLI token signed in with one) whose user is an owner or admin of the organization')
  }
}

const KEY_SECURITY: Array<Record<string, string[]>> = [{ bearerAuth: [] }, { apiKeyHeader: [] }]
// svc_cli_ tokens work wherever a key does, except on the key-only management route (above).
const SECURITY: Record<Exclude<AuthMode, 'public'>, Array<Record<string, string[]>>> = {
  inference: [...KEY_SECURITY, { oauth2: ['cli:inference'] }],
  admin: [...KEY_SECURITY, { oauth2: ['cli:inference'] }],
  management: KEY_SECURITY,
  mcp: [{ oauth2: ['mcp:inference'] }],
}

/** The response headers the auth step adds to (Elysia's `set`). */
type ResponseSet = { headers: Record<string, string | number> }

/**
 * The auth step (ARCHITECTURE.md §8 step 2): credential → principal, then the key and org
 * buckets of the route's surface in the same step; success responses carry X-RateLimit-*.
 */
async function admit(keys: KeyService, limits: Limits | null, request: Request, set: ResponseSet, mode: Exclude<AuthMode, 'public'>): Promise<Principal> {
  let principal: Principal
  try {
    principal = await identify(keys, request, mode)
  } catch (error) {
    // A key that could not be read (database unreachable) is neither valid nor invalid: 503,
    // never a 500 and never a 401 that would make clients drop a good key.
    if (error instanceof ApiError) throw error
    throw new ApiError('unavailable', 'credentials cannot be checked right now (database unavailable); retry shortly')
  }
  noteCaller(request, principal)
  // A known credential's refusals (another org's X-Org-ID, a member key on an admin route) spend
  // from its buckets like any request: an admin route's check reads the database each time.
  if (limits !== null) {
    const decision = mode === 'inference' ? limits.checkInference(principal) : limits.checkManagement(principal)
    Object.assign(set.headers, rateLimitHeaders(decision))
  }
  authorize(principal, request, mode)
  return principal
}

/**
 * A route's auth: the mode, plus the JSON body cap for routes that take a body. `rateLimited:
 * false` is only for GET /api/v1/rate-limits, whose snapshots must consume nothing (L10).
 */
export type AuthOption =
  | Exclude<AuthMode, 'public'>
  | { mode: Exclude<AuthMode, 'public'>; jsonBody?: number; fileBody?: { limit: number; field: string }; rateLimited?: false }

/**
 * The `auth` route macro. It authenticates and rate-limits in the parse phase, before any body
 * byte is read, so an unauthenticated caller gets 401 and never a validation answer; for a
 * body route it then reads the JSON body under its cap (one hook, so the order cannot slip).
 * It resolves `principal` and documents the route's security in OpenAPI.
 */
export function authMacro(keys: KeyService, limits: Limits) {
  const admitted = new WeakMap<Request, Principal>()
  return new Elysia().macro({
    auth: (option: AuthOption) => {
      const mode = typeof option === 'string' ? option : option.mode
      // A JSON body, or a multipart upload of one file (document parsing), each capped while read.
      const readBody =
        typeof option === 'string' ? undefined
        : option.jsonBody !== undefined ? jsonBody(option.jsonBody, mode === 'admin')
        : option.fileBody !== undefined ? singleFileBody(option.fileBody.limit, option.fileBody.field)
        : undefined
      const bodyType = typeof option !== 'string' && option.fileBody !== undefined ? 'multipart/form-data' : 'application/json'
      const routeLimits = typeof option !== 'string' && option.rateLimited === false ? null : limits
      const parse = async (context: { request: Request; set: ResponseSet }): Promise<unknown> => {
        admitted.set(context.request, await admit(keys, routeLimits, context.request, context.set, mode))
        return readBody?.(context)
      }
      return {
        detail: { security: SECURITY[mode] },
        // The trailing content-type name only informs OpenAPI; Elysia's macro type omits it.
        parse: (readBody ? [parse, bodyType] : [parse]) as unknown as Array<(context: { request: Request }) => Promise<unknown>>,
        async resolve({ request, set }) {
          // Routes without a body never run the parse phase: authenticate here.
          return { principal: admitted.get(request) ?? (await admit(keys, routeLimits, request, set, mode)) }
        },
      }
    },
  })
}
