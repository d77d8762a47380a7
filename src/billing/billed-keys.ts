// Reads of past charges by billing key (split from ledger.ts).
import type { Logger } from '../observability/logger'
import { LedgerHealth } from './ledger-health'
import { claimInFamilyOutside } from './ledger-ops'
import type { LedgerWriter } from './ledger-writer'

/** The ledger claim of a charge under a billing key (ledger_entries.idempotency_key). */
export function billingClaim(billingKey: string): string {
  return `bill:${billingKey}`
}

/**
 * Whether the organization has a committed charge whose billing key starts with `family` but not
 * with `own` (Fusion: an Idempotency-Key already billed for a different request), by the claims
 * its settlements made (billingClaim). Read through the
 * writer, like every ledger read that must see the settlements committed before it. A database
 * that cannot be read is a 503, with nothing charged.
 */
export async function readBilledOutside(writer: LedgerWriter, logger: Logger, orgId: string, family: string, own: string): Promise<boolean> {
  try {
    return await writer.submit({
      kind: 'plain', statements: [claimInFamilyOutside(orgId, billingClaim(family), billingClaim(own))], interpret: results => results[0]!.rows.length > 0,
    })
  } catch (error) {
    logger.error('ledger read failed', { org_id: orgId, error: String(error) })
    throw LedgerHealth.refusal()
  }
}
