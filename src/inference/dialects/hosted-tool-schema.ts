import { t } from 'elysia'
import { JsonInteger } from '../../http/openapi-schemas'

// The documented options of hosted web_fetch / web_search tool entries, shared by the three
// route schemas (the OpenAPI source). Their meaning is checked in hosted-tool-options.ts, which
// also refuses, by name, any key a format does not define for its tool.

const orNull = <T extends Parameters<typeof t.Union>[0][number]>(schema: T, description: string) => t.Optional(t.Union([schema, t.Null()], { description }))

/** The limits the gateway applies, in the vendors' spellings. */
export const HOSTED_LIMITS = {
  max_uses: orNull(JsonInteger({ minimum: 1 }), 'Applied: web_fetch fetches at most this many of the URLs named in the latest user message; web_search runs at most one search anyway'),
  allowed_domains: orNull(
    t.Array(t.String()),
    'Applied: only hosts equal to or under these domains are fetched (each redirect hop too) or kept among search results. Host names only (no scheme, path or port); not with blocked_domains',
  ),
  blocked_domains: orNull(t.Array(t.String()), 'Applied: hosts equal to or under these domains are never fetched (each redirect hop too) nor kept among search results. Not with allowed_domains'),
}

/** Anthropic web_fetch's cap on each page's text. */
export const MAX_CONTENT_TOKENS = orNull(JsonInteger({ minimum: 1 }), "Applied: each fetched page's text is cut to about this many tokens")

/** Hints a format defines and the gateway accepts without applying them (README, "Web retrieval"). */
export const hint = (description: string) => t.Optional(t.Unknown({ description: `Accepted, not applied: ${description}` }))
