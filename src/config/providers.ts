import { SIGNING_ALGOS } from '../tee/keys'
import { parseProofFormat, PROOF_FORMATS } from '../tee/proof-format'
import { displayUrl } from '../observability/logger'
import type { ProviderConfig } from './config'
import type { FileProvider } from './schema'

/** Base URL of a provider type when the config omits it (`undefined`: the type needs it written out). */
const DEFAULT_BASE_URL: Record<ProviderConfig['type'], string | undefined> = {
  'openai-compatible': undefined,
  anthropic: 'https://api.anthropic.com/v1',
  demo: undefined,
  attested: undefined,
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000
const DEFAULT_IDLE_TIMEOUT_MS = 60_000
const DEFAULT_RESPONSE_TIMEOUT_MS = 600_000

/**
 * The `providers:` section → frozen ProviderConfig list, adding to `problems` for every
 * entry that cannot be used. `secret` reads the environment variable an entry names (the
 * caller, load.ts, is the only env reader).
 */
export function buildProviders(entries: readonly FileProvider[], secret: (name: string) => string | undefined, problems: string[]): ProviderConfig[] {
  const seen = new Set<string>()
  const providers: ProviderConfig[] = []
  entries.forEach((entry, index) => {
    const path = `providers.${index}`
    if (seen.has(entry.id)) problems.push(`${path}.id: duplicate provider id "${entry.id}"`)
    seen.add(entry.id)

    let attested: ProviderConfig['attested']
    if (entry.type === 'attested') {
      const format = entry.proof_format === undefined ? null : parseProofFormat(entry.proof_format)
      if (entry.proof_format === undefined) problems.push(`${path}.proof_format: provider "${entry.id}": type attested needs proof_format (one of ${PROOF_FORMATS.join(', ')})`)
      else if (format === null) problems.push(`${path}.proof_format: provider "${entry.id}": unknown proof_format "${entry.proof_format}" (known: ${PROOF_FORMATS.join(', ')})`)
      if (format !== null) attested = Object.freeze({ proofFormat: format, signingAlgos: Object.freeze([...(entry.signing_algos ?? SIGNING_ALGOS)]) })
    }
    if (entry.proof_format !== undefined && entry.type !== 'attested') {
      problems.push(`${path}.proof_format: provider "${entry.id}": proof_format applies only to type attested`)
    }
    if (entry.signing_algos !== undefined && entry.type !== 'attested') {
      problems.push(`${path}.signing_algos: provider "${entry.id}": signing_algos applies only to type attested`)
    }

    for (const key of ['max_tokens_field', 'reasoning_history'] as const) {
      if (entry[key] !== undefined && entry.type !== 'openai-compatible') problems.push(`${path}.${key}: provider "${entry.id}": ${key} applies only to type openai-compatible`)
    }

    const baseUrl = resolveBaseUrl(entry, `${path}.base_url`, problems)
    const chatCompletions =
      entry.type === 'openai-compatible'
        ? Object.freeze({ maxTokensField: entry.max_tokens_field ?? defaultMaxTokensField(baseUrl), reasoningHistory: entry.reasoning_history ?? 'drop' })
        : undefined
    let apiKey: string | undefined
    if (entry.api_key_env !== undefined) {
      apiKey = secret(entry.api_key_env) || undefined
      // The demo provider ignores keys, so a missing one is no reason to stop the boot.
      if (apiKey === undefined && entry.type !== 'demo') {
        problems.push(`${path}.api_key_env: provider "${entry.id}": environment variable ${entry.api_key_env} is not set`)
      }
    } else if (entry.type === 'anthropic') {
      problems.push(`${path}.api_key_env: provider "${entry.id}": type anthropic needs api_key_env (the Anthropic API always takes a key)`)
    }

    providers.push(
      Object.freeze({
        id: entry.id,
        type: entry.type,
        baseUrl,
        apiKey,
        retention: entry.retention ?? 'unknown',
        connectTimeoutMs: entry.connect_timeout_ms ?? DEFAULT_CONNECT_TIMEOUT_MS,
        idleTimeoutMs: entry.idle_timeout_ms ?? DEFAULT_IDLE_TIMEOUT_MS,
        responseTimeoutMs: entry.response_timeout_ms ?? DEFAULT_RESPONSE_TIMEOUT_MS,
        ...(chatCompletions ? { chatCompletions } : {}),
        ...(attested ? { attested } : {}),
      }),
    )
  })
  return providers
}

/**
 * OpenAI's own API refuses `max_tokens` on its reasoning models (o-series, GPT-5) and takes
 * `max_completion_tokens` on every model; the servers that copy its API read `max_tokens`.
 */
function defaultMaxTokensField(baseUrl: string | undefined): 'max_tokens' | 'max_completion_tokens' {
  return baseUrl !== undefined && new URL(baseUrl).hostname === 'api.openai.com' ? 'max_completion_tokens' : 'max_tokens'
}

/** The demo provider has no upstream; every other type needs an http(s) base URL (some have a default). */
function resolveBaseUrl(entry: FileProvider, path: string, problems: string[]): string | undefined {
  if (entry.type === 'demo') {
    if (entry.base_url !== undefined) problems.push(`${path}: provider "${entry.id}": the demo provider has no upstream, remove base_url`)
    return undefined
  }
  const raw = entry.base_url ?? DEFAULT_BASE_URL[entry.type]
  if (raw === undefined) {
    problems.push(`${path}: provider "${entry.id}": type ${entry.type} needs base_url`)
    return undefined
  }
  const checked = checkBaseUrl(raw)
  if (typeof checked === 'object') {
    problems.push(`${path}: provider "${entry.id}": ${checked.problem}, got "${displayUrl(raw)}"`)
    return undefined
  }
  return checked
}

/**
 * An upstream base URL: absolute http(s), no credentials, query or fragment (secrets go in
 * api_key_env; adapters append paths). Returned without a trailing slash.
 */
export function checkBaseUrl(raw: string): string | { problem: string } {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { problem: 'must be an absolute http:// or https:// URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { problem: 'must be an absolute http:// or https:// URL' }
  if (url.username !== '' || url.password !== '') return { problem: 'must not carry credentials (use api_key_env)' }
  if (url.search !== '' || url.hash !== '' || raw.includes('?') || raw.includes('#')) return { problem: 'must not have a query or fragment' }
  return url.href.replace(/\/+$/, '')
}
