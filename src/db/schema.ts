import { sql } from 'drizzle-orm'
import { check, index, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core'
import { bool, count, epochMs, nanos } from './columns'

/** An organization: the unit that owns keys and money. A personal account is its own organization. */
export const orgs = sqliteTable('orgs', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  planId: text('plan_id').notNull(),
  createdAtMs: epochMs('created_at_ms').notNull(),
})

/** A person (or a placeholder owner created by the CLI). Emails are stored lower-cased. */
export const users = sqliteTable(
  'users',
  {
    id: text('id').primaryKey(),
    email: text('email').notNull(),
    createdAtMs: epochMs('created_at_ms').notNull(),
  },
  table => [uniqueIndex('users_email_unique').on(table.email)],
)

export type Role = 'owner' | 'admin' | 'member'
export const ROLES: readonly Role[] = ['owner', 'admin', 'member']

/** A user's role in one organization. */
export const memberships = sqliteTable(
  'memberships',
  {
    orgId: text('org_id').notNull().references(() => orgs.id),
    userId: text('user_id').notNull().references(() => users.id),
    role: text('role').$type<Role>().notNull(),
    createdAtMs: epochMs('created_at_ms').notNull(),
  },
  table => [
    primaryKey({ columns: [table.orgId, table.userId] }),
    index('memberships_user').on(table.userId),
    check('memberships_role_check', sql`${table.role} in ('owner', 'admin', 'member')`),
  ],
)

export type KeyStatus = 'active' | 'expired' | 'revoked'
export type SpendCapPeriod = 'daily' | 'monthly' | 'overall'

/**
 * Organization API keys. Only the SHA-256 of the secret is stored. `status` records
 * revocation and cap exhaustion; time-based expiry is derived from `expires_at_ms` on
 * every read, so it needs no job to flip it.
 */
export const apiKeys = sqliteTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => orgs.id),
    userId: text('user_id').notNull().references(() => users.id),
    name: text('name').notNull(),
    secretHash: text('secret_hash').notNull(),
    admin: bool('admin').notNull(),
    status: text('status').$type<KeyStatus>().notNull(),
    createdAtMs: epochMs('created_at_ms').notNull(),
    expiresAtMs: epochMs('expires_at_ms'),
    lastUsedAtMs: epochMs('last_used_at_ms'),
    revokedAtMs: epochMs('revoked_at_ms'),
    spendCapPeriod: text('spend_cap_period').$type<SpendCapPeriod>(),
    spendCapNanos: nanos('spend_cap_nanos'),
  },
  table => [
    uniqueIndex('api_keys_secret_hash_unique').on(table.secretHash),
    index('api_keys_org').on(table.orgId, table.createdAtMs),
    index('api_keys_user').on(table.userId),
    check('api_keys_status_check', sql`${table.status} in ('active', 'expired', 'revoked')`),
    check('api_keys_cap_check', sql`(${table.spendCapPeriod} is null) = (${table.spendCapNanos} is null)`),
    check('api_keys_cap_positive', sql`${table.spendCapNanos} is null or ${table.spendCapNanos} > 0`),
  ],
)



// ---------------------------------------------------------------------------------------------
// Ledger (ARCHITECTURE.md §7). Amounts are integer USD nanos. `ledger_entries` is append-only
// (a trigger refuses UPDATE and DELETE); the running totals below are kept in step with it in
// the same transaction, and `svc ledger verify` checks that they still agree.

export type EntryKind = 'top_up' | 'settle' | 'adjust'
export type FundingSource = 'allowance' | 'top_up'

/** Money movements. A settle is split per funding source, one entry each. */
export const ledgerEntries = sqliteTable(
  'ledger_entries',
  {
    id: nanos('id').primaryKey(),
    opId: text('op_id').notNull(),
    // The claim of an idempotent op (a billing key, a top-up reference): one arbitrated insert.
    idempotencyKey: text('idempotency_key'),
    orgId: text('org_id').notNull(),
    keyId: text('key_id'),
    kind: text('kind').$type<EntryKind>().notNull(),
    source: text('source').$type<FundingSource>().notNull(),
    amountNanos: nanos('amount_nanos').notNull(),
    // Allowance period charged (source allowance) and key cap window charged (keys with a cap).
    periodStartMs: epochMs('period_start_ms'),
    capWindowStartMs: epochMs('cap_window_start_ms'),
    purpose: text('purpose'),
    requestId: text('request_id'),
    note: text('note'),
    createdAtMs: epochMs('created_at_ms').notNull(),
  },
  table => [
    // An index here is written for every entry it holds, and the writer inserts one or two entries
    // per settlement: index upkeep was most of a settlement's cost (bench/README.md, "Leaner
    // ledger_entries indexes"). The one index is the claims': partial, holding only entries with
    // a billing key, so a conflict target must state its WHERE (`ON CONFLICT (idempotency_key)
    // WHERE idempotency_key IS NOT NULL`), and a claim is checked by idempotency key and op id
    // together. Everything asked per organization, key or period is kept as running totals
    // (balances, allowances, key_spend), so no request reads entries but through this index (a
    // Fusion Idempotency-Key's reuse check scans a range of it: billing/billed-keys.ts); `svc
    // ledger verify` sums them in one scan per total (bench/README.md, "The balance read without
    // the entries").
    uniqueIndex('ledger_entries_idempotency_key_unique').on(table.idempotencyKey).where(sql`${table.idempotencyKey} IS NOT NULL`),
    check('ledger_entries_kind_check', sql`${table.kind} in ('top_up', 'settle', 'adjust')`),
    check('ledger_entries_source_check', sql`${table.source} in ('allowance', 'top_up')`),
    check('ledger_entries_amount_check', sql`${table.kind} = 'adjust' or ${table.amountNanos} >= 0`),
  ],
)

/**
 * Prepaid money per organization: what is left (may dip below zero by one estimator overshoot),
 * how much is leased out, and the balance's top-up projection (spec §2.2): what top-ups credited
 * and what settlements charged to them, kept here so that reading it does not sum the
 * organization's entries. Credited minus spent equals prepaid unless a row was changed behind
 * the ledger's back.
 */
export const balances = sqliteTable('balances', {
  orgId: text('org_id').primaryKey(),
  prepaidNanos: nanos('prepaid_nanos').notNull(),
  prepaidLeasedNanos: nanos('prepaid_leased_nanos').notNull(),
  topUpCreditedNanos: nanos('top_up_credited_nanos').notNull().default(sql`0`),
  topUpSpentNanos: nanos('top_up_spent_nanos').notNull().default(sql`0`),
})

/** A plan's allowance for one UTC calendar month, created lazily by the first lease of the period. */
export const allowances = sqliteTable(
  'allowances',
  {
    orgId: text('org_id').notNull(),
    periodStartMs: epochMs('period_start_ms').notNull(),
    grantedNanos: nanos('granted_nanos').notNull(),
    usedNanos: nanos('used_nanos').notNull(),
    leasedNanos: nanos('leased_nanos').notNull(),
  },
  table => [primaryKey({ columns: [table.orgId, table.periodStartMs] })],
)

/** Spend per key and cap window (UTC day, UTC month, or 0 for an overall cap). */
export const keySpend = sqliteTable(
  'key_spend',
  {
    keyId: text('key_id').notNull(),
    windowStartMs: epochMs('window_start_ms').notNull(),
    spentNanos: nanos('spent_nanos').notNull(),
    leasedNanos: nanos('leased_nanos').notNull(),
  },
  table => [primaryKey({ columns: [table.keyId, table.windowStartMs] })],
)

export type LeaseScope = 'prepaid' | 'allowance' | 'key_cap'

/**
 * Money (or cap room) moved out of the database into one process boot, which may then hold
 * it in memory without a round trip. Returned on idle and shutdown; the sweeper returns the
 * leases of dead boots and stale instances.
 */
export const leases = sqliteTable(
  'leases',
  {
    id: text('id').primaryKey(),
    instanceId: text('instance_id').notNull(),
    bootId: text('boot_id').notNull(),
    scope: text('scope').$type<LeaseScope>().notNull(),
    orgId: text('org_id').notNull(),
    keyId: text('key_id'),
    // Allowance period or key cap window; 0 for prepaid and overall caps.
    periodStartMs: epochMs('period_start_ms').notNull(),
    amountNanos: nanos('amount_nanos').notNull(),
    // What the last top-up granted: read back through RETURNING, since SQLite cannot return old values.
    lastGrantNanos: nanos('last_grant_nanos').notNull(),
    // The last write's time, but above the row's previous stamp: it never goes backwards (nextStamp).
    updatedAtMs: epochMs('updated_at_ms').notNull(),
  },
  table => [
    index('leases_instance').on(table.instanceId, table.bootId),
    index('leases_org').on(table.orgId, table.scope, table.periodStartMs),
    index('leases_key').on(table.keyId, table.periodStartMs),
    check('leases_scope_check', sql`${table.scope} in ('prepaid', 'allowance', 'key_cap')`),
    check('leases_amount_check', sql`${table.amountNanos} >= 0`),
  ],
)

/** Process heartbeats: how the sweeper tells a live instance from a dead one. */
export const instances = sqliteTable('instances', {
  instanceId: text('instance_id').primaryKey(),
  bootId: text('boot_id').notNull(),
  startedAtMs: epochMs('started_at_ms').notNull(),
  heartbeatAtMs: epochMs('heartbeat_at_ms').notNull(),
})

// ---------------------------------------------------------------------------------------------
// OAuth 2.1 (src/oauth/). Every secret (authorization code, device code, token) is stored as its
// SHA-256 only. A grant is one approval (one client, user, org, scope); its access and refresh
// tokens hang off it, so revoking the grant (revocation, refresh-token reuse, code replay)
// kills every token it issued at once. A grant also records the API key the person signed in
// with (its id, never its secret): a token can never do more than that key, and dies with it.

export type OAuthScope = 'mcp:inference' | 'cli:inference'

/** Dynamically registered public clients (RFC 7591). No client secrets: PKCE binds the code. */
export const oauthClients = sqliteTable('oauth_clients', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  // JSON array of exact redirect URIs.
  redirectUris: text('redirect_uris').notNull(),
  // JSON array of grant types.
  grantTypes: text('grant_types').notNull(),
  createdAtMs: epochMs('created_at_ms').notNull(),
})

/** One approval: the family every access and refresh token of it belongs to. */
export const oauthGrants = sqliteTable(
  'oauth_grants',
  {
    id: text('id').primaryKey(),
    clientId: text('client_id').notNull(),
    userId: text('user_id').notNull().references(() => users.id),
    orgId: text('org_id').notNull().references(() => orgs.id),
    scope: text('scope').$type<OAuthScope>().notNull(),
    resource: text('resource'),
    createdAtMs: epochMs('created_at_ms').notNull(),
    revokedAtMs: epochMs('revoked_at_ms'),
    // The key signed in with: its admin flag, spend cap, expiry and status bound every token of
    // the grant. Null only on grants from before 0006, which no longer verify (sign in again).
    keyId: text('key_id').references(() => apiKeys.id),
  },
  table => [
    index('oauth_grants_user').on(table.userId),
    check('oauth_grants_scope_check', sql`${table.scope} in ('mcp:inference', 'cli:inference')`),
  ],
)

export type OAuthTokenKind = 'access' | 'refresh'

/**
 * Access and refresh tokens by hash. A refresh token is spent by its rotation (`used_at_ms`); its
 * client may exchange it again for a short while after, a few times (REUSE_WINDOW_MS and
 * MAX_EXCHANGES in src/oauth/tokens.ts): `exchanges` counts its exchanges, the rotation included.
 */
export const oauthTokens = sqliteTable(
  'oauth_tokens',
  {
    hash: text('hash').primaryKey(),
    grantId: text('grant_id').notNull().references(() => oauthGrants.id),
    kind: text('kind').$type<OAuthTokenKind>().notNull(),
    createdAtMs: epochMs('created_at_ms').notNull(),
    expiresAtMs: epochMs('expires_at_ms').notNull(),
    usedAtMs: epochMs('used_at_ms'),
    exchanges: count('exchanges').notNull().default(0),
  },
  table => [index('oauth_tokens_grant').on(table.grantId), check('oauth_tokens_kind_check', sql`${table.kind} in ('access', 'refresh')`)],
)

/** Authorization codes (single use, short-lived), bound to the client, redirect URI and PKCE challenge. */
export const oauthCodes = sqliteTable('oauth_codes', {
  hash: text('hash').primaryKey(),
  clientId: text('client_id').notNull(),
  userId: text('user_id').notNull(),
  orgId: text('org_id').notNull(),
  redirectUri: text('redirect_uri').notNull(),
  codeChallenge: text('code_challenge').notNull(),
  scope: text('scope').$type<OAuthScope>().notNull(),
  resource: text('resource'),
  expiresAtMs: epochMs('expires_at_ms').notNull(),
  usedAtMs: epochMs('used_at_ms'),
  // The grant its exchange created: revoked if the code is ever presented again.
  grantId: text('grant_id'),
  // The API key the person signed in with, handed on to the grant. Null only on codes from
  // before 0006, which are refused.
  keyId: text('key_id'),
})

export type DeviceStatus = 'pending' | 'approved' | 'denied' | 'used'

/** Device authorizations (RFC 8628): polled by device code, approved by user code. */
export const oauthDeviceCodes = sqliteTable(
  'oauth_device_codes',
  {
    hash: text('hash').primaryKey(),
    userCode: text('user_code').notNull(),
    clientId: text('client_id').notNull(),
    scope: text('scope').$type<OAuthScope>().notNull(),
    status: text('status').$type<DeviceStatus>().notNull(),
    userId: text('user_id'),
    orgId: text('org_id'),
    // Set with userId and orgId on approval: the API key the person signed in with.
    keyId: text('key_id'),
    intervalS: epochMs('interval_s').notNull(),
    lastPolledAtMs: epochMs('last_polled_at_ms'),
    createdAtMs: epochMs('created_at_ms').notNull(),
    expiresAtMs: epochMs('expires_at_ms').notNull(),
  },
  table => [
    uniqueIndex('oauth_device_codes_user_code_unique').on(table.userCode),
    check('oauth_device_codes_status_check', sql`${table.status} in ('pending', 'approved', 'denied', 'used')`),
  ],
)

export const schema = { orgs, users, memberships, apiKeys, ledgerEntries, balances, allowances, keySpend, leases, instances, oauthClients, oauthGrants, oauthTokens, oauthCodes, oauthDeviceCodes }
