-- An OAuth grant records the API key the person signed in with (its id; never the secret), and
-- every token of the grant is bounded by that key: its admin flag, spend cap, expiry and status
-- (a token obtained with a key can never do more than the key). The pending authorization code
-- and device-code rows carry the key id until the grant is issued. Grants, codes and device codes
-- from before this migration have no key: their tokens stop verifying (as revoked), their refresh
-- tokens and codes are refused with invalid_grant, and their users sign in again (`svc login`,
-- or reconnect the MCP host).
ALTER TABLE `oauth_codes` ADD `key_id` text;--> statement-breakpoint
ALTER TABLE `oauth_device_codes` ADD `key_id` text;--> statement-breakpoint
ALTER TABLE `oauth_grants` ADD `key_id` text REFERENCES api_keys(id);
