import { cacheWritePrice } from '../billing/pricing'
import type { Backend, Capabilities, Price } from '../catalog/types'
import { MAX_NANOS, parseUsd, type Nanos } from '../lib/money'
import type { ModelConfig, ProviderConfig } from './config'
import type { FileBackend, FileModel } from './schema'

/**
 * The `models:` section → frozen ModelConfig list, cross-checked against the providers.
 * Adds to `problems` (naming the model) for: duplicate ids, a backend naming an unknown
 * provider, a `private` model with a backend whose provider does not declare
 * `retention: none` (issue 4 point 6), an attested provider on the unsuffixed level or a
 * non-attested one on `confidential`/`encrypted` (and `encrypted` needs a proof_format with an
 * E2EE protocol), a provider/model bound twice in one level's list, a `thinking` form on a
 * backend that is not Anthropic (no other translation reads it), max output above the context
 * length, and prices past int64 nanos.
 */
export function buildModels(entries: readonly FileModel[], providers: readonly ProviderConfig[], problems: string[]): ModelConfig[] {
  const providerById = new Map(providers.map(provider => [provider.id, provider]))
  const seen = new Set<string>()
  const models: ModelConfig[] = []
  entries.forEach((entry, index) => {
    const path = `models.${index}`
    const name = `model "${entry.id}"`
    if (seen.has(entry.id)) problems.push(`${path}.id: duplicate model id "${entry.id}"`)
    seen.add(entry.id)

    const suffixLevels: { confidential?: readonly Backend[]; encrypted?: readonly Backend[] } = {}
    for (const suffix of ['confidential', 'encrypted'] as const) {
      const list = entry[suffix]
      if (list === undefined) continue
      suffixLevels[suffix] = Object.freeze(
        list.map((backend, backendIndex) => {
          const backendPath = `${path}.${suffix}.${backendIndex}`
          const provider = providerById.get(backend.provider)
          if (provider === undefined) problems.push(`${backendPath}.provider: ${name} names unknown provider "${backend.provider}"`)
          else if (provider.type !== 'attested') {
            problems.push(`${backendPath}.provider: ${name}: the ${suffix} level needs an attested provider, "${provider.id}" is ${provider.type}`)
          } else if (suffix === 'encrypted' && provider.attested !== undefined && provider.attested.proofFormat.e2ee === undefined) {
            problems.push(`${backendPath}.provider: ${name}: the encrypted level needs a proof_format with an E2EE protocol, "${provider.id}" has ${provider.attested.proofFormat.name}`)
          }
          checkThinking(backend, provider, backendPath, name, problems)
          return toBackend(backend)
        }),
      )
    }

    const level = entry.level ?? 'anonymous'
    const backends = entry.backends.map((backend, backendIndex) => {
      const backendPath = `${path}.backends.${backendIndex}`
      const provider = providerById.get(backend.provider)
      if (provider?.type === 'attested') {
        problems.push(`${backendPath}.provider: ${name}: attested provider "${provider.id}" serves only the :confidential and :encrypted levels`)
      } else if (provider === undefined) {
        const known = providerById.size > 0 ? [...providerById.keys()].join(', ') : 'none'
        problems.push(`${backendPath}.provider: ${name} names unknown provider "${backend.provider}" (known: ${known})`)
      } else if (level === 'private' && provider.retention !== 'none') {
        // The private level promises no retention: only a provider the operator marked so may serve it.
        problems.push(
          `${path}.level: ${name} is private but its backend ${backendIndex} uses provider "${provider.id}", which does not declare retention: none`,
        )
      }
      checkThinking(backend, provider, backendPath, name, problems)
      return toBackend(backend)
    })
    checkBindings(backends, `${path}.backends`, name, problems)
    for (const suffix of ['confidential', 'encrypted'] as const) {
      const list = suffixLevels[suffix]
      if (list !== undefined) checkBindings(list, `${path}.${suffix}`, name, problems)
    }
    // Ordered routing reads no weight: one set there would be silently ignored (QA).
    if ((entry.routing ?? 'ordered') === 'ordered') {
      for (const level of ['backends', 'confidential', 'encrypted'] as const) {
        entry[level]?.forEach((backend, backendIndex) => {
          if (backend.weight !== undefined) problems.push(`${path}.${level}.${backendIndex}.weight: ${name}: weight applies to routing: round-robin only (this model's routing is ordered: strict failover)`)
        })
      }
    }
    // GET /v1/models/{id} takes an id's slashes raw: a path segment that is empty, "." or ".." would
    // be normalized away before routing (QA: "u/.." answered the whole list).
    if (entry.id.split('/').some(segment => segment === '' || segment === '.' || segment === '..')) {
      problems.push(`${path}.id: ${name}: an id may not have an empty, "." or ".." segment between its slashes, or end in a slash`)
    }

    if (entry.max_output_tokens > entry.context_length) {
      problems.push(`${path}.max_output_tokens: ${name}: ${entry.max_output_tokens} exceeds context_length ${entry.context_length}`)
    }

    models.push(
      Object.freeze({
        id: entry.id,
        level,
        backends: Object.freeze(backends),
        ...suffixLevels,
        routing: entry.routing ?? 'ordered',
        price: toPrice(entry.price, `${path}.price`, problems),
        contextLength: entry.context_length,
        maxOutputTokens: entry.max_output_tokens,
        capabilities: toCapabilities(entry.capabilities),
      }),
    )
  })
  return models
}

/** A level's list binds each provider/model once: a repeat is an unstated weight, and a failed call would retry the same upstream as if it were another. */
function checkBindings(backends: readonly Backend[], path: string, name: string, problems: string[]): void {
  const bindings = new Set<string>()
  backends.forEach((backend, backendIndex) => {
    const key = `${backend.provider}\u0000${backend.model}`
    if (bindings.has(key)) problems.push(`${path}.${backendIndex}: ${name} binds provider "${backend.provider}" model "${backend.model}" twice (use weight instead)`)
    bindings.add(key)
  })
}

/** `thinking` describes an Anthropic upstream model; on any other provider it would be silently ignored. */
function checkThinking(backend: FileBackend, provider: ProviderConfig | undefined, path: string, name: string, problems: string[]): void {
  if (backend.thinking === undefined || provider === undefined || provider.type === 'anthropic') return
  problems.push(`${path}.thinking: ${name}: thinking applies to anthropic providers only, "${provider.id}" is ${provider.type}`)
}

function toBackend(backend: FileBackend): Backend {
  return Object.freeze({
    provider: backend.provider,
    model: backend.model,
    weight: backend.weight ?? 1,
    uncensored: backend.uncensored ?? false,
    ...(backend.thinking !== undefined ? { thinking: backend.thinking } : {}),
  })
}

function toPrice(price: FileModel['price'], path: string, problems: string[]): Price {
  const amount = (field: keyof FileModel['price']): Nanos | undefined => {
    const text = price[field]
    if (text === undefined) return undefined
    // The schema checked the decimal shape; parseUsd also bounds it to int64 nanos.
    const nanos = parseUsd(text)
    if (nanos === null) problems.push(`${path}.${field}: amount too large`)
    return nanos ?? 0n
  }
  const result: { -readonly [K in keyof Price]: Price[K] } = { inputPerMillion: amount('input_per_mtok')!, outputPerMillion: amount('output_per_mtok')! }
  // Optional prices stay absent so their defaults (the input or output price, or a multiple of the
  // input's for cache writes) stay visible to pricing.
  const cached = amount('cached_input_per_mtok')
  if (cached !== undefined) result.cachedInputPerMillion = cached
  const write = amount('cache_write_input_per_mtok')
  if (write !== undefined) result.cacheWriteInputPerMillion = write
  const writeHour = amount('cache_write_1h_input_per_mtok')
  if (writeHour !== undefined) result.cacheWrite1hInputPerMillion = writeHour
  const reasoning = amount('reasoning_per_mtok')
  if (reasoning !== undefined) result.reasoningPerMillion = reasoning
  // A default write price is a multiple of the input's, so an input price past half the largest
  // amount would publish and charge a 1-hour write price past it (QA: /api/v1/models showed one
  // beyond int64). Such a model states its write prices, each bounded as every amount is.
  for (const [field, ttl, multiple] of [['cache_write_input_per_mtok', '5m', '1.25×'], ['cache_write_1h_input_per_mtok', '1h', '2×']] as const) {
    if (price[field] === undefined && cacheWritePrice(result, ttl) > MAX_NANOS) {
      problems.push(`${path}.input_per_mtok: amount too large for the default ${field} (${multiple} the input price); set ${field}`)
    }
  }
  return Object.freeze(result)
}

/** An absent capability is false: the catalog never advertises what the operator did not state. */
function toCapabilities(capabilities: FileModel['capabilities']): Capabilities {
  return Object.freeze({
    tools: capabilities?.tools ?? false,
    reasoning: capabilities?.reasoning ?? false,
    vision: capabilities?.vision ?? false,
    fileInput: capabilities?.file_input ?? false,
    supportsWebFetch: capabilities?.supports_web_fetch ?? false,
    supportsWebSearch: capabilities?.supports_web_search ?? false,
  })
}
