import type { Client } from '@libsql/client'

/**
 * Checks the ledger invariants (ARCHITECTURE.md §7.6, SECURITY-NOTES.md §3) and returns one
 * line per violation; empty means consistent. Backs `svc ledger verify` and the tests.
 */
export async function verifyLedger(client: Client, options: { nowMs: number; staleAfterMs: number }): Promise<string[]> {
  const checks: Array<{ sql: string; args?: Array<string | number>; describe(row: Record<string, unknown>): string }> = [
    {
      // 1. Prepaid running totals equal the entries: the balance, and the top-up projection's
      // credited and spent totals. Entries have no index by organization or key (nothing on a
      // request reads them so), so each total is summed in one scan and joined to its row. The
      // same scan finds entries of an organization that does not exist, whose money the join
      // from orgs would never see.
      sql: `WITH derived AS (
              SELECT org_id, COUNT(*) AS entries,
                     SUM(CASE WHEN source = 'top_up' AND kind <> 'settle' THEN amount_nanos ELSE 0 END) AS credited,
                     SUM(CASE WHEN source = 'top_up' AND kind = 'settle' THEN amount_nanos ELSE 0 END) AS spent
              FROM ledger_entries GROUP BY org_id)
            SELECT * FROM (
              SELECT o.id AS org, NULL AS orphans, COALESCE(b.prepaid_nanos, 0) AS prepaid, COALESCE(d.credited, 0) - COALESCE(d.spent, 0) AS derived_prepaid,
                     COALESCE(b.top_up_credited_nanos, 0) AS credited, COALESCE(d.credited, 0) AS derived_credited,
                     COALESCE(b.top_up_spent_nanos, 0) AS spent, COALESCE(d.spent, 0) AS derived_spent
              FROM orgs o LEFT JOIN balances b ON b.org_id = o.id LEFT JOIN derived d ON d.org_id = o.id)
            WHERE prepaid <> derived_prepaid OR credited <> derived_credited OR spent <> derived_spent
            UNION ALL
            SELECT d.org_id, d.entries, NULL, NULL, NULL, NULL, NULL, NULL FROM derived d WHERE NOT EXISTS (SELECT 1 FROM orgs o WHERE o.id = d.org_id)`,
      describe: row => {
        if (row.orphans !== null) return orphaned(row.org, 'ledger_entries', row.orphans)
        const drifts: string[] = []
        if (row.prepaid !== row.derived_prepaid) drifts.push(`balances.prepaid_nanos ${row.prepaid} != ledger entries ${row.derived_prepaid}`)
        if (row.credited !== row.derived_credited) drifts.push(`balances.top_up_credited_nanos ${row.credited} != credited top-up entries ${row.derived_credited}`)
        if (row.spent !== row.derived_spent) drifts.push(`balances.top_up_spent_nanos ${row.spent} != settled top-up entries ${row.derived_spent}`)
        return `org ${row.org}: ${drifts.join('; ')}`
      },
    },
    {
      // Running totals and leases of an organization that does not exist (small tables, seeks on orgs).
      sql: `SELECT 'balances' AS tab, org_id AS org, COUNT(*) AS orphans FROM balances t
              WHERE NOT EXISTS (SELECT 1 FROM orgs o WHERE o.id = t.org_id) GROUP BY org_id
            UNION ALL SELECT 'allowances', org_id, COUNT(*) FROM allowances t
              WHERE NOT EXISTS (SELECT 1 FROM orgs o WHERE o.id = t.org_id) GROUP BY org_id
            UNION ALL SELECT 'leases', org_id, COUNT(*) FROM leases t
              WHERE NOT EXISTS (SELECT 1 FROM orgs o WHERE o.id = t.org_id) GROUP BY org_id`,
      describe: row => orphaned(row.org, String(row.tab), row.orphans),
    },
    {
      sql: `WITH derived AS (
              SELECT org_id, period_start_ms, SUM(amount_nanos) AS used FROM ledger_entries WHERE source = 'allowance' GROUP BY org_id, period_start_ms)
            SELECT * FROM (
              SELECT a.org_id AS org, a.period_start_ms AS period, a.used_nanos AS running, COALESCE(d.used, 0) AS derived_used
              FROM allowances a LEFT JOIN derived d ON d.org_id = a.org_id AND d.period_start_ms = a.period_start_ms)
            WHERE running <> derived_used`,
      describe: row => `org ${row.org} period ${row.period}: allowances.used_nanos ${row.running} != ledger entries ${row.derived_used}`,
    },
    {
      sql: `SELECT org_id AS org, period_start_ms AS period FROM ledger_entries e WHERE source = 'allowance'
            AND NOT EXISTS (SELECT 1 FROM allowances a WHERE a.org_id = e.org_id AND a.period_start_ms = e.period_start_ms) GROUP BY 1, 2`,
      describe: row => `org ${row.org}: allowance entries for period ${row.period} have no allowances row`,
    },
    {
      // 2. Leased totals equal the open leases.
      sql: `SELECT org_id AS org, prepaid_leased_nanos AS running,
                   COALESCE((SELECT SUM(amount_nanos) FROM leases l WHERE l.org_id = b.org_id AND l.scope = 'prepaid'), 0) AS derived
            FROM balances b WHERE running <> derived`,
      describe: row => `org ${row.org}: balances.prepaid_leased_nanos ${row.running} != open leases ${row.derived}`,
    },
    {
      sql: `SELECT org_id AS org, period_start_ms AS period, leased_nanos AS running,
                   COALESCE((SELECT SUM(amount_nanos) FROM leases l WHERE l.org_id = a.org_id AND l.scope = 'allowance'
                             AND l.period_start_ms = a.period_start_ms), 0) AS derived
            FROM allowances a WHERE running <> derived`,
      describe: row => `org ${row.org} period ${row.period}: allowances.leased_nanos ${row.running} != open leases ${row.derived}`,
    },
    {
      sql: `SELECT key_id AS key, window_start_ms AS window, leased_nanos AS running,
                   COALESCE((SELECT SUM(amount_nanos) FROM leases l WHERE l.key_id = k.key_id AND l.scope = 'key_cap'
                             AND l.period_start_ms = k.window_start_ms), 0) AS derived
            FROM key_spend k WHERE running <> derived`,
      describe: row => `key ${row.key} window ${row.window}: key_spend.leased_nanos ${row.running} != open leases ${row.derived}`,
    },
    {
      sql: `SELECT id FROM leases WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.instance_id = leases.instance_id
              AND i.boot_id = leases.boot_id AND i.heartbeat_at_ms >= ?)`,
      args: [options.nowMs - options.staleAfterMs],
      describe: row => `lease ${row.id} belongs to a dead boot or a stale instance and should have been returned`,
    },
    {
      // 3. Key spend equals its settled charges, both ways: every key_spend row matches its
      // window's charges, and every window charged (a settlement of a capped key carries its cap
      // window; the same transaction adds to the window's row, creating it) has a row: without
      // it the window reads as unspent and the cap starts over. One scan, as 1.; the CTE used
      // twice is materialized once.
      sql: `WITH derived AS (
              SELECT key_id, cap_window_start_ms, SUM(amount_nanos) AS spent FROM ledger_entries
              WHERE kind = 'settle' AND cap_window_start_ms IS NOT NULL GROUP BY key_id, cap_window_start_ms)
            SELECT * FROM (
              SELECT k.key_id AS key, k.window_start_ms AS window, k.spent_nanos AS running, COALESCE(d.spent, 0) AS derived_spent
              FROM key_spend k LEFT JOIN derived d ON d.key_id = k.key_id AND d.cap_window_start_ms = k.window_start_ms)
            WHERE running <> derived_spent
            UNION ALL
            SELECT d.key_id, d.cap_window_start_ms, NULL, d.spent FROM derived d
            WHERE NOT EXISTS (SELECT 1 FROM key_spend k WHERE k.key_id = d.key_id AND k.window_start_ms = d.cap_window_start_ms)`,
      describe: row =>
        row.running === null
          ? `key ${row.key} window ${row.window}: settled charges ${row.derived_spent} have no key_spend row`
          : `key ${row.key} window ${row.window}: key_spend.spent_nanos ${row.running} != settled charges ${row.derived_spent}`,
    },
    {
      // 4. No active key with an exhausted overall cap.
      sql: `SELECT id FROM api_keys k WHERE status = 'active' AND spend_cap_period = 'overall'
              AND spend_cap_nanos <= COALESCE((SELECT spent_nanos FROM key_spend s WHERE s.key_id = k.id AND s.window_start_ms = 0), 0)`,
      describe: row => `key ${row.id} has used up its overall cap but is still active`,
    },
    {
      sql: `SELECT 'negative' AS what, id FROM leases WHERE amount_nanos < 0
            UNION ALL SELECT 'over-leased', org_id FROM balances WHERE prepaid_leased_nanos < 0
            UNION ALL SELECT 'over-leased', org_id FROM allowances WHERE leased_nanos < 0 OR (used_nanos <= granted_nanos AND used_nanos + leased_nanos > granted_nanos)
            UNION ALL SELECT 'over-used', org_id FROM allowances WHERE used_nanos > granted_nanos`,
      describe: row => (row.what === 'over-used' ? `a month's allowance on ${row.id} is used beyond its grant` : `${row.what} lease total on ${row.id}`),
    },
    {
      // 5. The append-only triggers and the idempotency index exist, and idempotency keys are unique.
      sql: `SELECT name FROM (SELECT 'ledger_entries_no_update' AS name UNION ALL SELECT 'ledger_entries_no_delete'
              UNION ALL SELECT 'ledger_entries_idempotency_key_unique') expected
            WHERE name NOT IN (SELECT name FROM sqlite_master WHERE type IN ('trigger', 'index'))`,
      describe: row => `missing ${row.name}`,
    },
    {
      // An index of that name only arbitrates claims if it is unique, and on the idempotency key.
      sql: `SELECT name FROM sqlite_master m WHERE type = 'index' AND name = 'ledger_entries_idempotency_key_unique'
              AND NOT EXISTS (SELECT 1 FROM pragma_index_list('ledger_entries') l WHERE l.name = m.name AND l."unique" = 1
                AND (SELECT group_concat(i.name) FROM pragma_index_info(l.name) i) = 'idempotency_key')`,
      describe: row => `${row.name} is not a unique index on ledger_entries(idempotency_key)`,
    },
    {
      // And no two entries share an idempotency key. (Op ids are not unique: a settlement's
      // allowance and prepaid entries share one.) Read from the partial index, not the table.
      sql: `SELECT idempotency_key AS key, COUNT(*) AS entries FROM ledger_entries WHERE idempotency_key IS NOT NULL
            GROUP BY idempotency_key HAVING COUNT(*) > 1`,
      describe: row => `idempotency key ${row.key} is on ${row.entries} ledger entries`,
    },
  ]
  const results = await client.batch(checks.map(check => ({ sql: check.sql, args: check.args ?? [] })), 'read')
  return results.flatMap((result, index) => result.rows.map(row => checks[index]!.describe(row as Record<string, unknown>)))
}

const orphaned = (org: unknown, table: string, rows: unknown) => `org ${org} does not exist but has ${table} rows (${rows})`
