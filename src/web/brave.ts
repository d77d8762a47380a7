import { oneLine, toIsoDate } from './page-text'
import { getJson, hostOf, plainSnippet, resultUrl, type SearchBackend, type SearchOutcome, type SearchQuery, type SearchResult } from './search'

// Brave Search API (`GET /res/v1/web/search`, header X-Subscription-Token). Its answer:
// { type: "search", query: {...}, web: { type: "search", results: [{ title, url, description,
// page_age?, age?, profile: { name, ... }, meta_url: { hostname, ... }, ... }] }, ... }.
// `description` marks matches with <strong>; `page_age` is ISO, `age` is prose ("2 days ago").
interface BraveAnswer {
  web?: { results?: Array<{ title?: unknown; url?: unknown; description?: unknown; page_age?: unknown; profile?: { name?: unknown }; meta_url?: { hostname?: unknown } }> }
}

const FRESHNESS = { day: 'pd', week: 'pw', month: 'pm', year: 'py' } as const

/** The hosted choice: Brave's own count (1–20), offset (0–9 pages) and filters map one to one. */
export class BraveBackend implements SearchBackend {
  readonly name = 'brave'

  constructor(private readonly baseUrl: string, private readonly apiKey: string, private readonly timeoutMs: number) {}

  unsupported(): string | null {
    return null
  }

  async search(query: SearchQuery, signal: AbortSignal): Promise<SearchOutcome> {
    const params = new URLSearchParams({ q: query.query, count: String(query.count), offset: String(query.offset) })
    if (query.freshness) params.set('freshness', FRESHNESS[query.freshness])
    if (query.country) params.set('country', query.country)
    if (query.safeSearch) params.set('safesearch', query.safeSearch)
    const answer = await getJson(`${this.baseUrl.replace(/\/+$/, '')}/web/search?${params}`, { 'x-subscription-token': this.apiKey }, this.timeoutMs, signal, 'brave')
    if (!answer.ok) return { ok: false, kind: 'failed', message: answer.message }
    const body = answer.body as BraveAnswer
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return { ok: false, kind: 'failed', message: 'the brave search backend answered something that is not an object' }
    // No `web` section means no web results (Brave omits it for an empty answer).
    const items = Array.isArray(body.web?.results) ? body.web.results : []
    const results: SearchResult[] = []
    for (const item of items) {
      if (results.length >= query.count) break
      const url = resultUrl(item?.url)
      if (url === null) continue
      const profile = typeof item.profile?.name === 'string' ? item.profile.name : undefined
      const host = typeof item.meta_url?.hostname === 'string' ? item.meta_url.hostname.replace(/^www\./, '') : hostOf(url)
      results.push({
        title: typeof item.title === 'string' ? plainSnippet(item.title) : '',
        url,
        description: typeof item.description === 'string' ? plainSnippet(item.description) : '',
        published: typeof item.page_age === 'string' ? toIsoDate(item.page_age) : null,
        siteName: oneLine(profile ?? host),
      })
    }
    return { ok: true, results }
  }
}
