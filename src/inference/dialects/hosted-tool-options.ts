import { ApiError } from '../../http/errors'
import { parseDomain } from '../../web/domain-list'
import type { ChatRequest, HostedToolLimits } from '../canonical'

// The options of a hosted web_fetch / web_search tool entry, shared by the three dialects (and
// Fusion's tool entries). Limits the gateway applies (enrich/web.ts) become canonical
// `hosted.fetch` / `hosted.search`; hints it cannot apply are checked and accepted (README,
// "Web retrieval"); any other key is a 400 naming it, never dropped quietly.

/** An option a format's hosted tool may carry. `name` is Messages' tool name (its schema checks it). */
export type HostedOption =
  | 'name' | 'max_uses' | 'allowed_domains' | 'blocked_domains' | 'max_content_tokens' | 'filters'
  | 'user_location' | 'search_context_size' | 'citations' | 'cache_control'

/**
 * The options of the gateway's own hosted tool entries `{type: "web_fetch" | "web_search"}`
 * (spec §4.7), the same on every route: limits it applies.
 */
export const HOSTED_TOOL_OPTIONS: readonly HostedOption[] = ['max_uses', 'allowed_domains', 'blocked_domains']

// The message names the field too: Anthropic's error envelope has no param.
const invalid = (param: string, message: string) => new ApiError('invalid_request', `${param}: ${message}`, param)
const CONTEXT_SIZES = ['low', 'medium', 'high']

/**
 * Adds one hosted tool entry (`tool` at `at`, e.g. "tools.0") to `hosted`: turns the tool on and
 * records its limits. `accepted` lists the options this format defines for it; `type` is the
 * caller's. Two entries that both set limits for the same tool are refused: which would hold is
 * unclear (an entry without any, or the route's boolean switch, only turns the tool on).
 */
export function addHostedTool(hosted: ChatRequest['hosted'], kind: 'fetch' | 'search', tool: Record<string, unknown>, at: string, accepted: readonly HostedOption[]): void {
  const label = kind === 'fetch' ? 'web_fetch' : 'web_search'
  const limits = hostedToolLimits(tool, at, accepted, label)
  if (limits && hosted[kind] !== undefined) throw invalid(at, `a second hosted ${label} tool with options: give its options once`)
  if (kind === 'fetch') hosted.webFetch = true
  else hosted.webSearch = true
  if (limits) hosted[kind] = limits
}

/** The limits one entry sets (undefined when none), after checking every key it carries. */
function hostedToolLimits(tool: Record<string, unknown>, at: string, accepted: readonly HostedOption[], label: string): HostedToolLimits | undefined {
  const limits: HostedToolLimits = {}
  for (const [key, value] of Object.entries(tool)) {
    if (key === 'type') continue
    const param = `${at}.${key}`
    if (!(accepted as readonly string[]).includes(key)) {
      throw invalid(param, `not an option of the hosted ${label} tool here (its options: ${accepted.filter(each => each !== 'name').join(', ')})`)
    }
    if (value === null || value === undefined) continue
    switch (key as HostedOption) {
      case 'max_uses':
        limits.maxUses = positiveInteger(value, param)
        break
      case 'max_content_tokens':
        limits.maxContentTokens = positiveInteger(value, param)
        break
      case 'allowed_domains':
        limits.allowedDomains = domainList(value, param, true)
        break
      case 'blocked_domains':
        limits.blockedDomains = domainList(value, param, false)
        break
      case 'filters':
        limits.allowedDomains = filters(value, param)
        break
      case 'search_context_size':
        if (typeof value !== 'string' || !CONTEXT_SIZES.includes(value)) throw invalid(param, `must be one of ${CONTEXT_SIZES.join(', ')}`)
        break
      case 'user_location':
      case 'citations':
      case 'cache_control':
        // Hints the gateway cannot apply (README): their shape is still the format's.
        if (typeof value !== 'object' || Array.isArray(value)) throw invalid(param, 'must be an object or null')
        break
    }
  }
  if (limits.allowedDomains !== undefined && limits.blockedDomains !== undefined) {
    // Anthropic refuses the pair: an allow list already excludes everything else.
    throw invalid(`${at}.blocked_domains`, 'cannot be used together with allowed_domains: give one of them')
  }
  return Object.keys(limits).length > 0 ? limits : undefined
}

function positiveInteger(value: unknown, param: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) throw invalid(param, 'must be a positive integer or null')
  return value
}

/** A list of host names, normalised; an empty allow list would allow nothing, so it is refused. */
function domainList(value: unknown, param: string, allowList: boolean): string[] | undefined {
  if (!Array.isArray(value)) throw invalid(param, 'must be an array of host names or null')
  if (allowList && value.length === 0) throw invalid(param, 'must name at least one domain (omit it to allow every domain)')
  const domains: string[] = []
  for (const [index, entry] of value.entries()) {
    if (typeof entry !== 'string') throw invalid(`${param}.${index}`, 'must be a host name (a string)')
    const parsed = parseDomain(entry)
    if (!parsed.ok) throw invalid(`${param}.${index}`, `"${entry.slice(0, 100)}" ${parsed.message}`)
    if (!domains.includes(parsed.domain)) domains.push(parsed.domain)
  }
  return domains.length > 0 ? domains : undefined
}

/** OpenAI's web_search `filters`: `allowed_domains` is its only key. */
function filters(value: unknown, param: string): string[] | undefined {
  if (typeof value !== 'object' || Array.isArray(value) || value === null) throw invalid(param, 'must be an object or null')
  for (const key of Object.keys(value)) if (key !== 'allowed_domains') throw invalid(`${param}.${key}`, 'not a web_search filter here (allowed_domains is)')
  const allowed = (value as { allowed_domains?: unknown }).allowed_domains
  return allowed === null || allowed === undefined ? undefined : domainList(allowed, `${param}.allowed_domains`, true)
}
