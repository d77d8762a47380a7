CREATE TABLE `allowances` (
	`org_id` text NOT NULL,
	`period_start_ms` integer NOT NULL,
	`granted_nanos` integer NOT NULL,
	`used_nanos` integer NOT NULL,
	`leased_nanos` integer NOT NULL,
	PRIMARY KEY(`org_id`, `period_start_ms`)
);
--> statement-breakpoint
CREATE TABLE `balances` (
	`org_id` text PRIMARY KEY NOT NULL,
	`prepaid_nanos` integer NOT NULL,
	`prepaid_leased_nanos` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `instances` (
	`instance_id` text PRIMARY KEY NOT NULL,
	`boot_id` text NOT NULL,
	`started_at_ms` integer NOT NULL,
	`heartbeat_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `key_spend` (
	`key_id` text NOT NULL,
	`window_start_ms` integer NOT NULL,
	`spent_nanos` integer NOT NULL,
	`leased_nanos` integer NOT NULL,
	PRIMARY KEY(`key_id`, `window_start_ms`)
);
--> statement-breakpoint
CREATE TABLE `leases` (
	`id` text PRIMARY KEY NOT NULL,
	`instance_id` text NOT NULL,
	`boot_id` text NOT NULL,
	`scope` text NOT NULL,
	`org_id` text NOT NULL,
	`key_id` text,
	`period_start_ms` integer NOT NULL,
	`amount_nanos` integer NOT NULL,
	`last_grant_nanos` integer NOT NULL,
	`updated_at_ms` integer NOT NULL,
	CONSTRAINT "leases_scope_check" CHECK("leases"."scope" in ('prepaid', 'allowance', 'key_cap')),
	CONSTRAINT "leases_amount_check" CHECK("leases"."amount_nanos" >= 0)
);
--> statement-breakpoint
CREATE INDEX `leases_instance` ON `leases` (`instance_id`,`boot_id`);--> statement-breakpoint
CREATE INDEX `leases_org` ON `leases` (`org_id`,`scope`,`period_start_ms`);--> statement-breakpoint
CREATE INDEX `leases_key` ON `leases` (`key_id`,`period_start_ms`);--> statement-breakpoint
CREATE TABLE `ledger_entries` (
	`id` integer PRIMARY KEY NOT NULL,
	`op_id` text NOT NULL,
	`idempotency_key` text,
	`org_id` text NOT NULL,
	`key_id` text,
	`kind` text NOT NULL,
	`source` text NOT NULL,
	`amount_nanos` integer NOT NULL,
	`period_start_ms` integer,
	`cap_window_start_ms` integer,
	`purpose` text,
	`request_id` text,
	`note` text,
	`created_at_ms` integer NOT NULL,
	CONSTRAINT "ledger_entries_kind_check" CHECK("ledger_entries"."kind" in ('top_up', 'settle', 'adjust')),
	CONSTRAINT "ledger_entries_source_check" CHECK("ledger_entries"."source" in ('allowance', 'top_up')),
	CONSTRAINT "ledger_entries_amount_check" CHECK("ledger_entries"."kind" = 'adjust' or "ledger_entries"."amount_nanos" >= 0)
);
--> statement-breakpoint
CREATE UNIQUE INDEX `ledger_entries_idempotency_key_unique` ON `ledger_entries` (`idempotency_key`);--> statement-breakpoint
CREATE INDEX `ledger_entries_op` ON `ledger_entries` (`op_id`);--> statement-breakpoint
CREATE INDEX `ledger_entries_org` ON `ledger_entries` (`org_id`,`kind`,`source`);--> statement-breakpoint
CREATE INDEX `ledger_entries_key` ON `ledger_entries` (`key_id`,`cap_window_start_ms`);