-- Fewer index pages per ledger entry (bench/README.md, "Leaner ledger_entries indexes"): no op_id
-- index; the idempotency and key/cap-window indexes hold only the entries that have a value; the
-- org index is (org_id, source). Upgrade every instance together: older code's
-- `ON CONFLICT(idempotency_key)` no longer matches the partial unique index (README.md, Operations).
DROP INDEX `ledger_entries_op`;--> statement-breakpoint
DROP INDEX `ledger_entries_idempotency_key_unique`;--> statement-breakpoint
DROP INDEX `ledger_entries_org`;--> statement-breakpoint
DROP INDEX `ledger_entries_key`;--> statement-breakpoint
CREATE UNIQUE INDEX `ledger_entries_idempotency_key_unique` ON `ledger_entries` (`idempotency_key`) WHERE "ledger_entries"."idempotency_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX `ledger_entries_org` ON `ledger_entries` (`org_id`,`source`);--> statement-breakpoint
CREATE INDEX `ledger_entries_key` ON `ledger_entries` (`key_id`,`cap_window_start_ms`) WHERE "ledger_entries"."cap_window_start_ms" IS NOT NULL;