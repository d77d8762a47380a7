import { Elysia } from 'elysia'
import { authMacro } from '../http/auth'
import { KiB } from '../http/body-limit'
import { ApiError } from '../http/errors'
import { authErrors, ErrorResponse } from '../http/openapi-schemas'
import { requestIdOf } from '../http/request-context'
import { refuseEncrypted } from '../inference/encrypted'
import type { KeyService } from '../keys/service'
import type { Limits } from '../limits/admission'
import { DEFAULT_SEARCH_COUNT, WebFetchBody, WebFetchResponse, WebSearchBody, WebSearchResponse } from './schema'
import type { WebService } from './service'

// Both routes are billed per page or search: their 429 may be insufficient_quota.
const errors = { 400: ErrorResponse, ...authErrors(ErrorResponse, { billed: true }), 413: ErrorResponse, 502: ErrorResponse }

/** POST /api/v1/web/fetch and /api/v1/web/search (spec §4.6, §4.13): retrieval without a model. */
export function webRoutes(keys: KeyService, limits: Limits, web: WebService) {
  return new Elysia({ prefix: '/api/v1/web', tags: ['Web'] })
    .use(authMacro(keys, limits))
    .post(
      '/fetch',
      async ({ body, principal, request, set }) => {
        refuseEncrypted(request.headers, undefined, 'POST /api/v1/web/fetch')
        // Content is request-local: nothing is stored, and nothing may cache it.
        set.headers['cache-control'] = 'no-store'
        const pages = await web.fetchUrls({ principal, requestId: requestIdOf(set), signal: request.signal, httpRequest: request }, body.urls)
        return { results: pages.map(page => ({ title: page.title, url: page.url, content: page.content, last_updated: page.lastUpdated })) }
      },
      {
        auth: { mode: 'inference', jsonBody: 64 * KiB },
        body: WebFetchBody,
        response: { 200: WebFetchResponse, ...errors },
        detail: {
          summary: 'Fetch web pages',
          description:
            'Retrieves 1–3 distinct public http(s) URLs (canonical form, at most 400 UTF-8 bytes each) and returns their readable text in input order, ' +
            'each result\'s `url` exactly as sent. URLs naming the same page (differing only in a #fragment, an empty query, a percent-encoded ' +
            'unreserved character or the hex case of an escape) are a 400. ' +
            'Refused with 400 invalid_request, never billed and never connected to: credentials in the URL, private, loopback, link-local or other ' +
            'non-public addresses in any spelling, names that resolve to one, local-use names, port 0 and ports browsers block, sensitive query keys ' +
            '(tokens, keys, secrets, passwords, signatures, sessions, auth codes; the query split on `&` and `;`), redirects to any of those, and pages that are not HTML, text, JSON, JSON Lines, XML, YAML, TOML or PDF. One web_fetch unit is billed ' +
            'per page retrieved (plan allowance first, then prepaid; spend caps and rate limits apply). 502 provider_error means the outcome is unknown: ' +
            'do not retry automatically. A PDF page is read by the document extraction pool and answered as an upload would be: 429 rate_limited ' +
            'with Retry-After while the pool is full, 503 unavailable on an extraction timeout; nothing is billed for either. A call still running ' +
            'at a shutdown\'s drain deadline is cut with 503 unavailable, nothing billed; nor is a call whose client leaves before the answer. Nothing is stored.',
        },
      },
    )
    .post(
      '/search',
      async ({ body, principal, request, set }) => {
        refuseEncrypted(request.headers, undefined, 'POST /api/v1/web/search')
        set.headers['cache-control'] = 'no-store'
        const query = body.query.trim()
        const results = await web.search(
          { principal, requestId: requestIdOf(set), signal: request.signal, httpRequest: request },
          { query, count: body.count ?? DEFAULT_SEARCH_COUNT, offset: body.offset ?? 0, freshness: body.freshness, country: body.country?.toUpperCase(), safeSearch: body.safe_search },
        )
        return {
          object: 'web.search' as const,
          query,
          results: results.map(result => ({ title: result.title, url: result.url, description: result.description, published: result.published, site_name: result.siteName })),
        }
      },
      {
        auth: { mode: 'inference', jsonBody: 16 * KiB },
        body: WebSearchBody,
        response: { 200: WebSearchResponse, ...errors },
        beforeHandle({ body }) {
          if (body.query.trim() === '') throw new ApiError('invalid_request', 'query must not be blank', 'query')
        },
        detail: {
          summary: 'Search the web',
          description:
            'Runs one search on the configured backend (SearXNG or Brave Search) and returns up to `count` results. One web_search unit is billed ' +
            'per search. With no backend configured the route answers 503 unavailable. 502 provider_error: the backend failed; nothing was billed. ' +
            'A search still running at a shutdown\'s drain deadline is cut with 503 unavailable, nothing billed; nor is a search whose client leaves before the answer.',
        },
      },
    )
}
