import { toIsoDate } from './page-text'
import { getJson, hostOf, plainSnippet, resultUrl, type SearchBackend, type SearchOutcome, type SearchQuery, type SearchResult } from './search'

// SearXNG's JSON API (`GET /search?format=json`; the instance must list `json` under
// `search.formats`). Its answer: { query, number_of_results, results: [{ url, title, content,
// engine, parsed_url, publishedDate?, ... }], answers, suggestions, unresponsive_engines }.
interface SearxngAnswer {
  results?: Array<{ url?: unknown; title?: unknown; content?: unknown; publishedDate?: unknown }>
}

const TIME_RANGE = { day: 'day', week: 'week', month: 'month', year: 'year' } as const
const SAFE = { off: '0', moderate: '1', strict: '2' } as const

/** The self-hosted choice. `offset` selects SearXNG's own result page; `count` trims it. */
export class SearxngBackend implements SearchBackend {
  readonly name = 'searxng'

  constructor(private readonly baseUrl: string, private readonly timeoutMs: number) {}

  // SearXNG filters by language, not country: refuse rather than silently ignore it.
  unsupported(query: SearchQuery): string | null {
    return query.country === undefined ? null : 'country is not supported by the configured search backend (searxng)'
  }

  async search(query: SearchQuery, signal: AbortSignal): Promise<SearchOutcome> {
    const params = new URLSearchParams({ q: query.query, format: 'json', pageno: String(query.offset + 1) })
    if (query.freshness) params.set('time_range', TIME_RANGE[query.freshness])
    if (query.safeSearch) params.set('safesearch', SAFE[query.safeSearch])
    const answer = await getJson(`${this.baseUrl.replace(/\/+$/, '')}/search?${params}`, {}, this.timeoutMs, signal, 'searxng')
    if (!answer.ok) return { ok: false, kind: 'failed', message: answer.message }
    const body = answer.body as SearxngAnswer
    if (typeof body !== 'object' || body === null || !Array.isArray(body.results)) {
      return { ok: false, kind: 'failed', message: 'the searxng search backend answered without a results list' }
    }
    const results: SearchResult[] = []
    for (const item of body.results) {
      if (results.length >= query.count) break
      const url = resultUrl(item?.url)
      if (url === null) continue
      results.push({
        title: typeof item.title === 'string' ? plainSnippet(item.title) : '',
        url,
        description: typeof item.content === 'string' ? plainSnippet(item.content) : '',
        published: typeof item.publishedDate === 'string' ? toIsoDate(item.publishedDate) : null,
        // The URL's host name, not SearXNG's parsed_url[1]: that is the netloc, with any port or userinfo.
        siteName: hostOf(url),
      })
    }
    return { ok: true, results }
  }
}
