import { Elysia, t } from 'elysia'
import { ApiError } from '../http/errors'
import { ErrorResponse } from '../http/openapi-schemas'
import { checkQueryNames } from '../http/query'
import { readsParameters, type ParameterDoc } from '../http/openapi-complete'
import { requestIdOf } from '../http/request-context'
import { AnthropicErrorResponse, OpenAIErrorResponse } from '../http/openapi-schemas'
import { cacheWritePrice } from '../billing/pricing'
import { formatNanos } from '../lib/money'
import { ANTHROPIC_QUERY_PARAMS, LIFECYCLE_PARAMS, AnthropicModel, AnthropicModelList, anthropicEntry, anthropicPage, isAnthropicClient } from './anthropic'
import { PRIVACY_LEVELS, type Catalog, type CatalogModel } from './catalog'
import type { PrivacyLevel } from './types'
import { CatalogList, ModelsQuery, OpenAIModel, OpenAIModelList } from './schema'

type OpenAIList = typeof OpenAIModelList.static
type ApiList = typeof CatalogList.static

/** `owned_by` of every /v1 entry: the gateway serves them, whichever upstream runs them. */
const OWNED_BY = 'svc'

/** One /v1 entry per callable id: the unsuffixed id, and `<id>:<level>` for suffix levels. */
function openAIEntries(model: CatalogModel, only?: PrivacyLevel): OpenAIList['data'] {
  return model.routes
    .filter(route => only === undefined || route.level === only)
    .map(route => ({
      id: route.id,
      object: 'model' as const,
      created: 0,
      owned_by: OWNED_BY,
      privacy_level: route.level,
      context_length: route.contextLength,
      max_output_tokens: route.maxOutputTokens,
    }))
}

/** One /api/v1/models entry (also the MCP tool svc.list_models). */
export function apiEntry(model: CatalogModel): ApiList['data'][number] {
  const { price, capabilities } = model
  return {
    id: model.id,
    object: 'model',
    privacy_levels: [...model.levels],
    capabilities: {
      tools: capabilities.tools,
      reasoning: capabilities.reasoning,
      vision: capabilities.vision,
      file_input: capabilities.fileInput,
      supports_web_fetch: capabilities.supportsWebFetch,
      supports_web_search: capabilities.supportsWebSearch,
    },
    // The effective prices: absent cached/reasoning/cache-write prices fall back as pricing does (catalog/types.ts Price).
    pricing: {
      input_per_mtok_nanos: formatNanos(price.inputPerMillion),
      output_per_mtok_nanos: formatNanos(price.outputPerMillion),
      cached_input_per_mtok_nanos: formatNanos(price.cachedInputPerMillion ?? price.inputPerMillion),
      cache_write_input_per_mtok_nanos: formatNanos(cacheWritePrice(price, '5m')),
      cache_write_1h_input_per_mtok_nanos: formatNanos(cacheWritePrice(price, '1h')),
      reasoning_per_mtok_nanos: formatNanos(price.reasoningPerMillion ?? price.outputPerMillion),
    },
    context_length: model.contextLength,
    max_output_tokens: model.maxOutputTokens,
  }
}

/** The raw tail of a slash id; a malformed escape stays as sent (and so matches no id: 404). */
function decodeRest(rest: string): string {
  try {
    return decodeURIComponent(rest)
  } catch {
    return rest
  }
}

/**
 * Runs before query validation so the message names a query parameter (not a body field),
 * and so a repeated parameter is refused instead of one copy silently winning. An Anthropic
 * client on /v1/models may also page (limit, after_id, before_id), filter by lifecycle and send
 * beta: those are read
 * (or ignored) by the handler, so they are taken out of the query the schema checks.
 */
function checkModelsQuery({ request, query }: { request: Request; query: Record<string, unknown> }): void {
  const params = new URL(request.url).searchParams
  const paging = isAnthropicClient(request) && new URL(request.url).pathname === '/v1/models'
  checkQueryNames(
    params,
    paging ? 'privacy_tier, limit, after_id, before_id, lifecycle and beta are accepted' : 'only privacy_tier is accepted',
    name => name === 'privacy_tier' || (paging && ANTHROPIC_QUERY_PARAMS.has(name)),
    name => paging && LIFECYCLE_PARAMS.includes(name),
  )
  for (const name of new Set(params.keys())) if (name !== 'privacy_tier') delete query[name]
}

/**
 * GET /v1/models and GET /api/v1/models (spec §4.11): public, so identical with or without a
 * credential or X-Org-ID (no auth step runs at all). The catalog is fixed at boot, so every
 * answer is built once here. Unknown query parameters and tiers are 400.
 */
export function modelRoutes(catalog: Catalog) {
  const all = (level?: PrivacyLevel) => catalog.list(level === undefined ? {} : { level })
  const openAI = new Map<PrivacyLevel | undefined, OpenAIList>()
  const api = new Map<PrivacyLevel | undefined, ApiList>()
  for (const level of [undefined, ...PRIVACY_LEVELS]) {
    openAI.set(level, { object: 'list', data: all(level).flatMap(model => openAIEntries(model, level)) })
    api.set(level, { data: all(level).map(apiEntry) })
  }

  const byId = new Map(openAI.get(undefined)!.data.map(entry => [entry.id, entry]))
  // Anthropic's shape of the same callable ids (see ./anthropic.ts), paged per request.
  const anthropic = new Map<PrivacyLevel | undefined, (typeof AnthropicModel.static)[]>()
  for (const level of [undefined, ...PRIVACY_LEVELS]) {
    anthropic.set(level, all(level).flatMap(model => model.routes.filter(route => level === undefined || route.level === level)).map(anthropicEntry))
  }
  const anthropicById = new Map(anthropic.get(undefined)!.map(entry => [entry.id, entry]))
  /** Whether the request is an Anthropic SDK's, whose answers carry `request-id` (message._request_id) as Anthropic's do. */
  const anthropicFor = (request: Request, set: { headers: Record<string, unknown> }) => {
    if (!isAnthropicClient(request)) return false
    set.headers['request-id'] = requestIdOf(set)
    return true
  }
  const retrieve = (id: string, request: Request, set: { headers: Record<string, unknown> }) => {
    const anthropicClient = anthropicFor(request, set)
    // As on the list: no query parameter but `beta=true`, which older Anthropic SDKs append to beta.models.retrieve().
    if (request.url.includes('?')) checkQueryNames(new URL(request.url).searchParams, anthropicClient ? 'only beta is accepted' : 'this route takes none', name => anthropicClient && name === 'beta')
    const entry = anthropicClient ? anthropicById.get(id) : byId.get(id)
    if (entry === undefined) throw new ApiError('not_found', `model "${id.slice(0, 200)}" does not exist; GET /v1/models lists the callable ids`, 'model')
    return entry
  }

  const anthropicVersion: ParameterDoc = {
    name: 'anthropic-version', in: 'header', required: false, schema: { type: 'string', examples: ['2023-06-01'] },
    description: 'Any value selects Anthropic\'s shape (the Anthropic SDKs send one); not interpreted otherwise',
  }
  const beta: ParameterDoc = { name: 'beta', in: 'query', required: false, schema: { type: 'string', enum: ['true'] }, description: 'With anthropic-version only: accepted (older Anthropic SDKs append it) and ignored' }
  // Both retrieval routes are one lookup (`retrieve`): they document the same answers from here.
  const retrieval = {
    response: { 200: t.Union([OpenAIModel, AnthropicModel]), 400: t.Union([OpenAIErrorResponse, AnthropicErrorResponse]), 404: t.Union([OpenAIErrorResponse, AnthropicErrorResponse]) },
    description:
      'Public. The entry GET /v1/models lists for this callable id (what the OpenAI and Anthropic SDKs call `models.retrieve`; ' +
      'Anthropic\'s shape, and its error envelope, with an `anthropic-version` header); 404 for an id the gateway does not serve; ' +
      '400 for any query parameter (with anthropic-version, any but `beta`).',
  }
  const anthropicPaging: ParameterDoc[] = [
    anthropicVersion,
    { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 1000, default: 20 }, description: 'With anthropic-version only: entries per page' },
    { name: 'after_id', in: 'query', required: false, schema: { type: 'string' }, description: 'With anthropic-version only: the page after this id' },
    { name: 'before_id', in: 'query', required: false, schema: { type: 'string' }, description: 'With anthropic-version only: the page before this id' },
    {
      name: 'lifecycle[]', in: 'query', required: false, schema: { type: 'array', items: { type: 'string', enum: ['active', 'deprecated', 'retired'] } },
      description: 'With anthropic-version only: keep entries in these stages (repeatable, or comma-separated; also as `lifecycle`); every model served is active',
    },
    beta,
  ]

  return new Elysia({ tags: ['Models'] })
    .get(
      '/v1/models',
      ({ query, request, set }) =>
        anthropicFor(request, set) ? anthropicPage(anthropic.get(query.privacy_tier)!, new URL(request.url).searchParams) : openAI.get(query.privacy_tier)!,
      {
        transform: checkModelsQuery,
        query: ModelsQuery,
        response: { 200: t.Union([OpenAIModelList, AnthropicModelList]), 400: t.Union([OpenAIErrorResponse, AnthropicErrorResponse]) },
        detail: {
          ...readsParameters(anthropicPaging),
          summary: 'List models (OpenAI shape, or Anthropic with anthropic-version)',
          description:
            'Public. One entry per callable id: the unsuffixed id is the anonymous or private level, `<id>:confidential` and ' +
            '`<id>:encrypted` the suffix levels. `privacy_tier` keeps only ids at that level. Entries add `privacy_level`, ' +
            '`context_length` and `max_output_tokens` to the OpenAI fields. Identical with or without credentials. ' +
            'With an `anthropic-version` header (the Anthropic SDKs send one) the answer is Anthropic\'s page instead: ' +
            '`{data: [{type, id, display_name, created_at, …}], has_more, first_id, last_id}`, paged by `limit` (1–1000, default 20), ' +
            '`after_id` or `before_id`, with errors in the Anthropic envelope.',
        },
      },
    )
    .get(
      '/v1/models/:model',
      ({ params, request, set }) => retrieve(params.model, request, set),
      {
        params: t.Object({ model: t.String({ description: 'A callable id as listed by GET /v1/models (URL-encode the `:` of a suffix level if your client needs to)' }) }),
        response: retrieval.response,
        detail: {
          ...readsParameters([anthropicVersion, beta]),
          summary: 'Retrieve a model (OpenAI shape, or Anthropic with anthropic-version)',
          description: retrieval.description,
        },
      },
    )
    // Ids may hold `/` (meta-llama/llama-3.3-70b): the SDKs send %2F, which the route above
    // decodes, but curl and plain string formatting send it raw: same answer. The document
    // names the wildcard `{rest}` (openapi-complete.ts), a path parameter read by the handler.
    .get('/v1/models/:model/*', ({ params, request, set }) => retrieve(`${params.model}/${decodeRest(params['*'])}`, request, set), {
      response: retrieval.response,
      detail: {
        ...readsParameters([{ name: 'rest', in: 'path', required: true, schema: { type: 'string' }, description: 'The rest of the id after its first `/`, itself possibly holding more `/`' }, anthropicVersion, beta]),
        operationId: 'getV1ModelsByModelByRest',
        summary: 'Retrieve a model whose id holds `/`, sent unencoded',
        description:
          'As GET /v1/models/{model}, for ids such as `meta-llama/llama-3.3-70b` when the client does not encode the `/` as %2F: ' +
          '`model` is the part of the id before its first `/`. ' + retrieval.description,
      },
    })
    .get('/api/v1/models', ({ query }) => api.get(query.privacy_tier)!, {
      transform: checkModelsQuery,
      query: ModelsQuery,
      response: { 200: CatalogList, 400: ErrorResponse },
      detail: {
        summary: 'List models with capabilities, privacy levels and prices',
        description:
          'Public. One entry per logical model with its privacy levels, capabilities (including `supports_web_fetch` and ' +
          '`supports_web_search`), prices in integer USD nanos per million tokens as decimal strings, context length and ' +
          'maximum output. `privacy_tier` keeps only models offered at that level. Identical with or without credentials.',
      },
    })
}
