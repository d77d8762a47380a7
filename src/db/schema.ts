import { sql } from 'drizzle-orm'
import { check, index, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core'
import { bool, epochMs, nanos } from './columns'

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

export const schema = { orgs, users, memberships, apiKeys }
