import type { OAuthScope, Role, SpendCapPeriod } from '../db/schema'

/**
 * Who is calling: resolved from a credential by the auth step. `role` is the owning user's
 * role in the organization as of the read that produced this principal.
 */
export interface Principal {
  /** `oauth`: an OAuth access token (svc_cli_, svc_mcp_), bounded by the API key it was signed in with. */
  readonly kind: 'api_key' | 'oauth'
  /**
   * The API key id; for an OAuth token, the key it was signed in with. Cap leases, rate-limit
   * buckets, ledger entries and logs key on it, so a token shares them with its key.
   */
  readonly keyId: string
  /** OAuth tokens only: the grant (one approval) the token belongs to. */
  readonly grantId?: string
  readonly orgId: string
  readonly userId: string
  /** The key's own admin flag (for a token, its key's); admin authority also needs `role` owner or admin. */
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

/** A key's spend cap from its two columns (both set or both null). */
export function spendCapOf(period: SpendCapPeriod | null, nanos: bigint | null): Principal['spendCap'] {
  return period !== null && nanos !== null ? { period, nanos } : null
}

/** True when the principal may use admin routes: an admin key of a current owner or admin. */
export function hasAdminAuthority(principal: Principal): boolean {
  return principal.keyAdmin && (principal.role === 'owner' || principal.role === 'admin')
}
