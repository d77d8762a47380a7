-- Nothing reads ledger_entries per organization or key any more (bench/README.md, "The balance
-- read without the entries"). The balance's top-up projection (spec §2.2) becomes two running
-- totals in balances: reading it summed every top-up entry of the organization (~60–125 ms per
-- million entries, on the event loop). Then the organization and key/cap-window indexes go:
-- every settlement wrote them, and only `svc ledger verify` read them, which now sums each total
-- in one scan. The backfill runs first, while the organization index still serves it. Upgrade
-- every instance together: older code books without keeping the new totals, which the balance
-- then shows as unavailable and `svc ledger verify` reports (README.md, Operations).
ALTER TABLE `balances` ADD `top_up_credited_nanos` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `balances` ADD `top_up_spent_nanos` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE `balances` SET
  `top_up_credited_nanos` = (SELECT COALESCE(SUM(`amount_nanos`), 0) FROM `ledger_entries` e
    WHERE e.`org_id` = `balances`.`org_id` AND e.`source` = 'top_up' AND e.`kind` <> 'settle'),
  `top_up_spent_nanos` = (SELECT COALESCE(SUM(`amount_nanos`), 0) FROM `ledger_entries` e
    WHERE e.`org_id` = `balances`.`org_id` AND e.`source` = 'top_up' AND e.`kind` = 'settle');--> statement-breakpoint
DROP INDEX `ledger_entries_org`;--> statement-breakpoint
DROP INDEX `ledger_entries_key`;
