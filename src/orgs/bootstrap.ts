import type { Deps } from '../deps'
import { generateKeySecret, hashSecret } from '../keys/token'
import { newId } from '../lib/ids'

export interface BootstrapResult {
  orgId: string
  ownerUserId: string
  keyId: string
  secret: string
}

/**
 * First boot on an empty database: one guarded write batch creates the default organization,
 * its owner and an admin key; then the configured starting credit is booked. Every statement is conditioned on "no organization existed
 * before this batch", so racing instances create them once; the loser gets null.
 */
export async function bootstrapIfEmpty(deps: Deps): Promise<BootstrapResult | null> {
  const { config, clock, database } = deps
  const now = clock.now()
  const orgId = newId()
  const ownerUserId = newId()
  const keyId = newId()
  const secret = generateKeySecret()
  const email = config.bootstrap.ownerEmail.trim().toLowerCase()
  const ours = 'EXISTS (SELECT 1 FROM orgs WHERE id = ?)'
  const results = await database.client.batch(
    [
      {
        sql: 'INSERT INTO orgs (id, name, plan_id, created_at_ms) SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM orgs)',
        args: [orgId, config.bootstrap.orgName, config.defaultPlanId, now],
      },
      {
        sql: `INSERT INTO users (id, email, created_at_ms) SELECT ?, ?, ? WHERE ${ours} AND NOT EXISTS (SELECT 1 FROM users WHERE email = ?)`,
        args: [ownerUserId, email, now, orgId, email],
      },
      {
        sql: `INSERT INTO memberships (org_id, user_id, role, created_at_ms) SELECT ?, (SELECT id FROM users WHERE email = ?), 'owner', ? WHERE ${ours}`,
        args: [orgId, email, now, orgId],
      },
      {
        sql: `INSERT INTO api_keys (id, org_id, user_id, name, secret_hash, admin, status, created_at_ms)
              SELECT ?, ?, (SELECT id FROM users WHERE email = ?), 'bootstrap admin', ?, 1, 'active', ? WHERE ${ours}`,
        args: [keyId, orgId, email, hashSecret(secret), now, orgId],
      },
    ],
    'write',
  )
  if (results[0]?.rowsAffected !== 1) return null
  // The starting credit goes through the ledger writer; its reference makes a retry harmless.
  const credit = config.ledger.bootstrapCreditNanos
  if (credit > 0n) await deps.ledger.topUp({ orgId, amount: credit, reference: `bootstrap:${orgId}`, note: 'first-boot credit' })
  const owner = await database.client.execute({ sql: 'SELECT id FROM users WHERE email = ?', args: [email] })
  return { orgId, ownerUserId: String(owner.rows[0]?.id ?? ownerUserId), keyId, secret }
}
