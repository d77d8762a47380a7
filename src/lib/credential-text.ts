// The gateway's own credentials as text (API keys z_sk_, CLI and MCP access tokens): what the
// logger redacts wherever they appear, and what a client-chosen request id may not contain.

/**
 * A credential anywhere in a text. Not anchored at a word boundary: it runs on JSON text, where a
 * key starting a stack-trace line follows `\n` (a word character), as one in a URL-encoded query
 * follows `%3D`.
 */
export const CREDENTIAL = /(z_sk_|svc_cli_|svc_mcp_)[A-Za-z0-9_-]+/g

/** Whether `text` could hold a credential: a superset of what CREDENTIAL matches, and cheaper. */
export function mayHoldCredential(text: string): boolean {
  return text.includes('z_sk_') || text.includes('svc_cli_') || text.includes('svc_mcp_')
}
