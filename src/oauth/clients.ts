import { eq } from 'drizzle-orm'
import type { Db } from '../db/client'
import { oauthClients } from '../db/schema'
import type { Clock } from '../lib/clock'
import { OAuthError } from './errors'
import { randomSecret } from './secrets'

export type GrantType = 'authorization_code' | 'refresh_token' | 'urn:ietf:params:oauth:grant-type:device_code'
export const DEVICE_GRANT: GrantType = 'urn:ietf:params:oauth:grant-type:device_code'
export const GRANT_TYPES: readonly GrantType[] = ['authorization_code', 'refresh_token', DEVICE_GRANT]

export interface OAuthClient {
  id: string
  name: string
  redirectUris: string[]
  grantTypes: GrantType[]
}

/** The client `svc login` uses: built in, so the CLI needs no registration step. */
export const CLI_CLIENT: OAuthClient = { id: 'svc-cli', name: 'svc command-line client', redirectUris: [], grantTypes: [DEVICE_GRANT, 'refresh_token'] }

/** Whether a client is built in (the CLI's), as opposed to registered by anyone through /oauth/register. */
export function isBuiltInClient(client: OAuthClient): boolean {
  return client.id === CLI_CLIENT.id
}

/**
 * A client name as a person reads it: compatibility forms folded (NFKC: fullwidth letters,
 * ligatures), case, whitespace and invisible characters (zero-width spaces, joiners) ignored.
 */
function readAs(name: string): string {
  return name.normalize('NFKC').toLowerCase().normalize('NFKC').replace(/[\s\p{Default_Ignorable_Code_Point}]/gu, '')
}

const BUILT_IN_NAME = readAs(CLI_CLIENT.name)

const MAX_REDIRECT_URIS = 10
const LOOPBACK_IPS = new Set(['127.0.0.1', '[::1]'])
// Private-use schemes without the period of RFC 8252 §7.1's reverse-DNS form that well-known
// MCP hosts register (Cursor: cursor://anysphere.cursor-retrieval/…; VS Code URI handlers).
const KNOWN_APP_SCHEMES = new Set(['cursor:', 'vscode:', 'vscode-insiders:'])

/**
 * Whether a redirect URI may use this scheme: an allowlist, not a blocklist, since anyone may
 * register a client and an OS protocol handler (ms-msdt:, search-ms:…) is a target of its own.
 * https; http (loopback only, checked by the caller); a private-use reverse-DNS scheme
 * (com.example.app:, RFC 8252 §7.1); or one of the known app schemes above.
 */
function isAllowedScheme(protocol: string): boolean {
  return protocol === 'https:' || protocol === 'http:' || protocol.includes('.') || KNOWN_APP_SCHEMES.has(protocol)
}

/**
 * Redirect URIs a public client may register (OAuth 2.1 §2.3.1, RFC 8252 §7): https anywhere;
 * http only on loopback (127.0.0.1, [::1], localhost); private-use schemes of native apps
 * (com.example.app:/…, cursor://…). No fragments, no whitespace or control characters (the URL
 * parser would silently drop them, so the URI registered would not be the one redirected to).
 */
export function checkRedirectUri(raw: unknown): string {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 2000) throw new OAuthError('invalid_redirect_uri', 'each redirect URI must be a string of 1 to 2000 characters')
  if (/[\x00-\x20\x7f]/.test(raw)) throw new OAuthError('invalid_redirect_uri', 'redirect URIs must not contain whitespace or control characters')
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new OAuthError('invalid_redirect_uri', `redirect URI "${raw.slice(0, 200)}" is not an absolute URL`)
  }
  if (url.hash !== '' || raw.includes('#')) throw new OAuthError('invalid_redirect_uri', 'redirect URIs must not contain a fragment')
  if (!isAllowedScheme(url.protocol)) {
    throw new OAuthError('invalid_redirect_uri', `redirect URI scheme ${url.protocol.slice(0, 50)} is not allowed: use https, loopback http, or a private-use scheme in reverse-DNS form (com.example.app:)`)
  }
  if (url.protocol === 'http:' && !LOOPBACK_IPS.has(url.hostname) && url.hostname !== 'localhost') {
    throw new OAuthError('invalid_redirect_uri', 'http redirect URIs are allowed only on loopback (127.0.0.1, [::1], localhost); use https')
  }
  if (url.username !== '' || url.password !== '') throw new OAuthError('invalid_redirect_uri', 'redirect URIs must not carry credentials')
  return raw
}

/**
 * Exact string matching (OAuth 2.1 §4.1.1), with one exception: for a loopback IP literal the
 * port may differ, because native apps get an ephemeral port at run time (RFC 8252 §7.3).
 */
export function matchRedirectUri(client: OAuthClient, requested: string): boolean {
  if (client.redirectUris.includes(requested)) return true
  let asked: URL
  try {
    asked = new URL(requested)
  } catch {
    return false
  }
  if (asked.protocol !== 'http:' || !LOOPBACK_IPS.has(asked.hostname)) return false
  return client.redirectUris.some(registered => {
    const url = new URL(registered)
    if (url.protocol !== 'http:' || url.hostname !== asked.hostname) return false
    url.port = asked.port
    return url.href === asked.href
  })
}

// RFC 7591 §2 metadata the gateway does not use but must not take mistyped (§3.2.2:
// invalid_client_metadata). Unknown fields are still ignored, as §2 asks.
const STRING_METADATA = ['token_endpoint_auth_method', 'scope', 'client_uri', 'logo_uri', 'tos_uri', 'policy_uri', 'jwks_uri', 'software_id', 'software_version', 'software_statement']
const STRING_LIST_METADATA = ['contacts']

function checkMetadataTypes(metadata: Record<string, unknown>): void {
  for (const field of STRING_METADATA) {
    if (metadata[field] !== undefined && typeof metadata[field] !== 'string') throw new OAuthError('invalid_client_metadata', `${field} must be a string`)
  }
  for (const field of STRING_LIST_METADATA) {
    const value = metadata[field]
    if (value !== undefined && !(Array.isArray(value) && value.every(item => typeof item === 'string'))) throw new OAuthError('invalid_client_metadata', `${field} must be an array of strings`)
  }
  const jwks = metadata.jwks
  if (jwks !== undefined && (typeof jwks !== 'object' || jwks === null || Array.isArray(jwks))) throw new OAuthError('invalid_client_metadata', 'jwks must be an object')
}

/** RFC 7591 dynamic client registration, and client lookup. Only public clients (auth method `none`). */
export class ClientService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async register(metadata: Record<string, unknown>): Promise<Record<string, unknown>> {
    checkMetadataTypes(metadata)
    const uris = metadata.redirect_uris
    const grantTypes = metadata.grant_types ?? ['authorization_code', 'refresh_token']
    if (!Array.isArray(grantTypes) || grantTypes.length === 0 || grantTypes.some(type => !GRANT_TYPES.includes(type as GrantType))) {
      throw new OAuthError('invalid_client_metadata', `grant_types must be a non-empty subset of ${GRANT_TYPES.join(', ')}`)
    }
    const wantsCode = grantTypes.includes('authorization_code')
    if (uris !== undefined && (!Array.isArray(uris) || uris.length > MAX_REDIRECT_URIS)) {
      throw new OAuthError('invalid_redirect_uri', `redirect_uris must be an array of at most ${MAX_REDIRECT_URIS} URIs`)
    }
    const redirectUris = ((uris as unknown[] | undefined) ?? []).map(checkRedirectUri)
    if (wantsCode && redirectUris.length === 0) throw new OAuthError('invalid_redirect_uri', 'redirect_uris is required for the authorization_code grant')
    const responseTypes = metadata.response_types
    if (responseTypes !== undefined && !(Array.isArray(responseTypes) && responseTypes.every(type => type === 'code'))) {
      throw new OAuthError('invalid_client_metadata', 'response_types may only contain "code"')
    }
    const rawName = metadata.client_name
    if (rawName !== undefined && (typeof rawName !== 'string' || rawName.length > 200)) {
      throw new OAuthError('invalid_client_metadata', 'client_name must be a string of at most 200 characters')
    }
    const name = (rawName as string | undefined)?.trim() || 'Unnamed client'
    // Anyone may register, so a client named like `svc login`'s would get a consent page that
    // looks like the CLI's (a phishing device flow). Lookalikes beyond NFKC (Cyrillic letters…)
    // pass; the consent page marks every registered client as third-party with its id for those.
    if (readAs(name) === BUILT_IN_NAME) {
      throw new OAuthError('invalid_client_metadata', `client_name "${CLI_CLIENT.name}" is reserved for the gateway's own command-line client (svc login); choose another name`)
    }
    const client: OAuthClient = { id: `mcp_${randomSecret()}`, name, redirectUris, grantTypes: grantTypes as GrantType[] }
    const now = this.clock.now()
    await this.db.insert(oauthClients).values({
      id: client.id, name, redirectUris: JSON.stringify(redirectUris), grantTypes: JSON.stringify(client.grantTypes), createdAtMs: now,
    })
    // Confidential auth methods are replaced by `none` (RFC 7591 §2: the server may): PKCE binds codes instead.
    return {
      client_id: client.id,
      client_id_issued_at: Math.floor(now / 1000),
      client_name: name,
      redirect_uris: redirectUris,
      grant_types: client.grantTypes,
      response_types: wantsCode ? ['code'] : [],
      token_endpoint_auth_method: 'none',
    }
  }

  /** The client, or undefined. */
  async find(clientId: string | undefined): Promise<OAuthClient | undefined> {
    if (!clientId || clientId.length > 200) return undefined
    if (clientId === CLI_CLIENT.id) return CLI_CLIENT
    const rows = await this.db.select().from(oauthClients).where(eq(oauthClients.id, clientId)).limit(1)
    const row = rows[0]
    if (!row) return undefined
    return { id: row.id, name: row.name, redirectUris: JSON.parse(row.redirectUris), grantTypes: JSON.parse(row.grantTypes) }
  }

  /** The client or `invalid_client` (RFC 6749 §5.2). */
  async require(clientId: string | undefined, grant: GrantType): Promise<OAuthClient> {
    const client = await this.find(clientId)
    if (!client) throw new OAuthError('invalid_client', 'unknown client_id')
    // Refresh tokens come with every grant we issue, whether or not the client listed the type.
    if (grant !== 'refresh_token' && !client.grantTypes.includes(grant)) throw new OAuthError('unauthorized_client', `this client is not registered for the ${grant} grant`)
    return client
  }
}
