import { toRfc3339 } from '../lib/clock'
import { formatNanos } from '../lib/money'
import type { KeyRecord } from './service'

/** Wire form of a key (spec §2.1): optional fields only when set; never the secret or hash. */
export function keyView(key: KeyRecord): Record<string, string | boolean> {
  const view: Record<string, string | boolean> = {
    id: key.id,
    name: key.name,
    status: key.status,
    created_at: toRfc3339(key.createdAtMs),
    admin: key.admin,
  }
  if (key.expiresAtMs !== null) view.expires_at = toRfc3339(key.expiresAtMs)
  if (key.lastUsedAtMs !== null) view.last_used_at = toRfc3339(key.lastUsedAtMs)
  if (key.revokedAtMs !== null) view.revoked_at = toRfc3339(key.revokedAtMs)
  if (key.spendCapPeriod !== null && key.spendCapNanos !== null) {
    view.spend_cap_period = key.spendCapPeriod
    view.spend_cap_nanos = formatNanos(key.spendCapNanos)
  }
  return view
}
