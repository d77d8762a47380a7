-- A spent refresh token may be exchanged again by its client for a few seconds after its rotation
-- (two refreshes racing, or a retry whose answer was lost), a few times at most; `exchanges`
-- counts its exchanges. Tokens spent before this migration count as exchanged once.
ALTER TABLE `oauth_tokens` ADD `exchanges` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE `oauth_tokens` SET `exchanges` = 1 WHERE `used_at_ms` IS NOT NULL;
