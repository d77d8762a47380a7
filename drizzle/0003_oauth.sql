CREATE TABLE `oauth_clients` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`redirect_uris` text NOT NULL,
	`grant_types` text NOT NULL,
	`created_at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `oauth_codes` (
	`hash` text PRIMARY KEY NOT NULL,
	`client_id` text NOT NULL,
	`user_id` text NOT NULL,
	`org_id` text NOT NULL,
	`redirect_uri` text NOT NULL,
	`code_challenge` text NOT NULL,
	`scope` text NOT NULL,
	`resource` text,
	`expires_at_ms` integer NOT NULL,
	`used_at_ms` integer,
	`grant_id` text
);
--> statement-breakpoint
CREATE TABLE `oauth_device_codes` (
	`hash` text PRIMARY KEY NOT NULL,
	`user_code` text NOT NULL,
	`client_id` text NOT NULL,
	`scope` text NOT NULL,
	`status` text NOT NULL,
	`user_id` text,
	`org_id` text,
	`interval_s` integer NOT NULL,
	`last_polled_at_ms` integer,
	`created_at_ms` integer NOT NULL,
	`expires_at_ms` integer NOT NULL,
	CONSTRAINT "oauth_device_codes_status_check" CHECK("oauth_device_codes"."status" in ('pending', 'approved', 'denied', 'used'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `oauth_device_codes_user_code_unique` ON `oauth_device_codes` (`user_code`);--> statement-breakpoint
CREATE TABLE `oauth_grants` (
	`id` text PRIMARY KEY NOT NULL,
	`client_id` text NOT NULL,
	`user_id` text NOT NULL,
	`org_id` text NOT NULL,
	`scope` text NOT NULL,
	`resource` text,
	`created_at_ms` integer NOT NULL,
	`revoked_at_ms` integer,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`org_id`) REFERENCES `orgs`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "oauth_grants_scope_check" CHECK("oauth_grants"."scope" in ('mcp:inference', 'cli:inference'))
);
--> statement-breakpoint
CREATE INDEX `oauth_grants_user` ON `oauth_grants` (`user_id`);--> statement-breakpoint
CREATE TABLE `oauth_tokens` (
	`hash` text PRIMARY KEY NOT NULL,
	`grant_id` text NOT NULL,
	`kind` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	`expires_at_ms` integer NOT NULL,
	`used_at_ms` integer,
	FOREIGN KEY (`grant_id`) REFERENCES `oauth_grants`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "oauth_tokens_kind_check" CHECK("oauth_tokens"."kind" in ('access', 'refresh'))
);
--> statement-breakpoint
CREATE INDEX `oauth_tokens_grant` ON `oauth_tokens` (`grant_id`);