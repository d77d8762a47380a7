import { timingSafeEqual } from 'node:crypto'
import type { OAuthScope } from '../db/schema'

/** Access-token prefixes by scope (spec §5): the prefix alone tells where a token may be used. */
export const PREFIX: Record<OAuthScope, string> = { 'mcp:inference': 'svc_mcp_', 'cli:inference': 'svc_cli_' }
export const SCOPES: readonly OAuthScope[] = ['mcp:inference', 'cli:inference']

/** 32 random bytes, base64url (43 characters), after `prefix`. */
export function randomSecret(prefix = ''): string {
  return prefix + Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url')
}

/** What the database stores for any OAuth secret: hex SHA-256. */
export function hashOf(secret: string): string {
  return Bun.SHA256.hash(secret, 'hex') as string
}

/** The tail after the prefix must look like randomSecret's output (cheap refusal before a lookup). */
export function isWellFormedToken(token: string): boolean {
  return /^svc_(mcp|cli)_[A-Za-z0-9_-]{43}$/.test(token)
}

/** RFC 7636 §4.6: BASE64URL(SHA256(ASCII(code_verifier))). */
export function s256(verifier: string): string {
  return Buffer.from(new Bun.CryptoHasher('sha256').update(verifier).digest()).toString('base64url')
}

/** Constant-time string comparison (same length only). */
export function safeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false
  return timingSafeEqual(Buffer.from(a), Buffer.from(b))
}

/**
 * One scope per token (spec §5: the prefix follows the scope). A space-separated list is
 * accepted when it names a single known scope; undefined when absent.
 */
export function parseScope(raw: string | undefined): OAuthScope | undefined | 'invalid' {
  if (raw === undefined || raw.trim() === '') return undefined
  const names = new Set(raw.trim().split(/\s+/))
  if (names.size !== 1) return 'invalid'
  const [name] = names
  return SCOPES.includes(name as OAuthScope) ? (name as OAuthScope) : 'invalid'
}
