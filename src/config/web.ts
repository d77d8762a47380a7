import { parseUsd } from '../lib/money'
import { isCidr } from '../web/address-policy'
import type { SearchConfig, UnitPrices, WebConfig } from './config'
import type { FileConfig } from './schema'

const BRAVE_BASE_URL = 'https://api.search.brave.com/res/v1'

/** `web:` and `prices:` from the file, with defaults; problems are reported by path. */
export function buildWeb(file: FileConfig, env: (name: string) => string | undefined, problems: string[]): { web: WebConfig; prices: UnitPrices } {
  const fetch = file.web?.fetch
  const cidrs = fetch?.unsafe_test_allow_cidrs ?? []
  for (const [index, cidr] of cidrs.entries()) {
    if (!isCidr(cidr)) problems.push(`web.fetch.unsafe_test_allow_cidrs.${index}: "${cidr}" is not a CIDR (for example 127.0.0.0/8)`)
  }
  const raw = file.web?.search
  let search: SearchConfig | null = null
  if (raw?.backend === 'searxng') {
    if (!/^https?:\/\/[^/?#]+(\/[^?#]*)?$/.test(raw.base_url)) problems.push('web.search.base_url: must be an http(s) URL without query or fragment')
    search = Object.freeze({ backend: 'searxng', baseUrl: raw.base_url, timeoutMs: raw.timeout_ms ?? 10_000 })
  } else if (raw?.backend === 'brave') {
    const apiKey = env(raw.api_key_env)
    if (!apiKey) problems.push(`web.search.api_key_env: environment variable ${raw.api_key_env} is not set`)
    const baseUrl = raw.base_url ?? BRAVE_BASE_URL
    if (!/^https?:\/\/[^/?#]+(\/[^?#]*)?$/.test(baseUrl)) problems.push('web.search.base_url: must be an http(s) URL without query or fragment')
    search = Object.freeze({ backend: 'brave', baseUrl, apiKey: apiKey ?? '', timeoutMs: raw.timeout_ms ?? 10_000 })
  }
  const price = (name: 'web_fetch' | 'web_search', fallback: string) => {
    const nanos = parseUsd(file.prices?.[name] ?? fallback)
    if (nanos === null) problems.push(`prices.${name}: amount too large`)
    return nanos ?? 0n
  }
  return {
    web: Object.freeze({
      fetch: Object.freeze({
        maxUrls: fetch?.max_urls ?? 3,
        timeoutMs: fetch?.timeout_ms ?? 10_000,
        connectTimeoutMs: fetch?.connect_timeout_ms ?? 5_000,
        maxBytes: fetch?.max_bytes ?? 2_000_000,
        maxRedirects: fetch?.max_redirects ?? 5,
        maxContentChars: fetch?.max_content_chars ?? 100_000,
        unsafeTestAllowCidrs: Object.freeze([...cidrs]),
      }),
      search,
    }),
    prices: Object.freeze({ webFetch: price('web_fetch', '0.002'), webSearch: price('web_search', '0.005') }),
  }
}
