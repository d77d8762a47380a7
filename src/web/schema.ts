import { Type } from '@sinclair/typebox'
import { t } from 'elysia'
import { MaxCharacters } from '../http/openapi-schemas'

// Wire schemas of the web routes. Bodies are strict: any other field (a model id, messages,
// privacy options) is a 400 naming it (spec §4.6).

// TypeBox's own Integer: Elysia's `t.Integer` would also accept the string "5".
const Integer = Type.Integer

export const WebFetchBody = t.Object(
  {
    urls: t.Array(t.String({ minLength: 1, maxLength: 4096, description: 'A public http(s) URL in canonical form, at most 400 UTF-8 bytes' }), {
      minItems: 1,
      maxItems: 3,
      description: '1 to 3 distinct URLs (the configured limit may be lower)',
      examples: [['https://en.wikipedia.org/wiki/Server-side_request_forgery']],
    }),
  },
  { additionalProperties: false },
)

export const WebFetchResponse = t.Object({
  results: t.Array(
    t.Object({
      title: t.String({ description: 'Page title (the URL when the page has none)' }),
      url: t.String({ description: 'The URL as requested, exactly as sent' }),
      content: t.String({ description: 'Readable text of the page' }),
      last_updated: t.Union([t.String({ description: 'ISO 8601' }), t.Null()], { description: 'From Last-Modified or the page metadata, else null' }),
    }),
    { description: 'One entry per input URL, in input order' },
  ),
})

/** Results wanted from one search: `count` on POST /api/v1/web/search and on MCP svc.web_search alike. */
export const DEFAULT_SEARCH_COUNT = 10
// No `default` on the route's fields (see keys/schema.ts's `admin`): the route applies them.
const SEARCH_COUNT = { minimum: 1, maximum: 20, description: `Results wanted, 1–20 (default ${DEFAULT_SEARCH_COUNT})` }
export const SearchCount = Integer(SEARCH_COUNT)
/** MCP's svc.web_search publishes the default: its arguments are checked, never copied with defaults applied. */
export const SearchCountWithDefault = Integer({ ...SEARCH_COUNT, default: DEFAULT_SEARCH_COUNT })

export const WebSearchBody = t.Object(
  {
    query: MaxCharacters(400, { minLength: 1, description: 'What to search for (at most 400 characters)' }),
    count: t.Optional(SearchCount),
    offset: t.Optional(Integer({ minimum: 0, maximum: 9, description: 'Zero-based page of results to return (0–9, default 0): pages of `count` results with Brave; with SearXNG the instance\'s own result pages (their size is the instance\'s), each trimmed to `count`' })),
    freshness: t.Optional(t.Union([t.Literal('day'), t.Literal('week'), t.Literal('month'), t.Literal('year')], { description: 'Only pages from the last day, week, month or year' })),
    country: t.Optional(t.String({ pattern: '^[A-Za-z]{2}$', description: 'ISO 3166-1 alpha-2 country to search from (not every backend supports it)', error: 'country must be a two-letter ISO 3166-1 code' })),
    safe_search: t.Optional(t.Union([t.Literal('off'), t.Literal('moderate'), t.Literal('strict')])),
  },
  { additionalProperties: false },
)

export const WebSearchResponse = t.Object({
  object: t.Literal('web.search'),
  query: t.String(),
  results: t.Array(
    t.Object({
      title: t.String(),
      url: t.String(),
      description: t.String({ description: 'Snippet, plain text' }),
      published: t.Union([t.String({ description: 'ISO 8601' }), t.Null()]),
      site_name: t.String(),
    }),
  ),
})
