import type { OAuthScope, Role, SpendCapPeriod } from '../db/schema'

/**
 * Who is calling: resolved from a credential by the auth step. `role` is the owning user's
 * role in the organization as of the read that produced this principal.
 */
export interface Principal {
  /** `oauth`: an OAuth access token (svc_cli_, svc_mcp_); `keyId` is then its grant's id. */
  readonly kind: 'api_key' | 'oauth'
  /** The API key id, or the OAuth grant id (buckets, ledger entries and logs key on it). */
  readonly keyId: string
  readonly orgId: string
  readonly userId: string
  /** The key's own admin flag; admin authority also needs `role` owner or admin. */
  readonly keyAdmin: boolean
  readonly role: Role | null
  readonly expiresAtMs: number | null
  readonly spendCap: { readonly period: SpendCapPeriod; readonly nanos: bigint } | null
  /** OAuth tokens only: the one scope the token carries. */
  readonly scope?: OAuthScope
}

/** Why a credential was refused; the auth step maps each to a 401 message. */
export type VerifyFailure = 'unknown' | 'revoked' | 'expired'

export type VerifyResult = { ok: true; principal: Principal } | { ok: false; reason: VerifyFailure }

/** True when the principal may use admin routes: an admin key of a current owner or admin. */
export function hasAdminAuthority(principal: Principal): boolean {
  return principal.keyAdmin && (principal.role === 'owner' || principal.role === 'admin')
}
