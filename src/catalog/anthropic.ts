import { t } from 'elysia'
import { ApiError } from '../http/errors'
import { JsonInteger } from '../http/openapi-schemas'
import type { ModelRoute } from './types'

// GET /v1/models as Anthropic clients call it (spec §4.11 leaves the shape open). The
// @anthropic-ai/sdk's models.list()/retrieve() use the same paths as the OpenAI SDK and always
// send `anthropic-version`, so that header picks Anthropic's shape, as peer gateways do.

/** Anthropic's release date field; the gateway tracks none, and Anthropic documents the epoch for "unknown". */
const UNKNOWN_DATE = '1970-01-01T00:00:00Z'

/** Anthropic's page size bounds and default (its API reference: 1 to 1000, default 20). */
const MAX_LIMIT = 1000
const DEFAULT_LIMIT = 20

/** `lifecycle` filter stages, sent as `lifecycle[]=active&lifecycle[]=…` (the SDK's bracket arrays), so repeatable. */
export const LIFECYCLE_PARAMS: readonly string[] = ['lifecycle[]', 'lifecycle']
const LIFECYCLES: ReadonlySet<string> = new Set(['active', 'deprecated', 'retired'])

/**
 * The query parameters Anthropic clients send: the page cursors, and `beta=true`, which earlier
 * SDK releases (bundled in Claude Code) append to beta.models.list() and which changes nothing
 * here. `privacy_tier` is ours, on both shapes.
 */
export const ANTHROPIC_QUERY_PARAMS: ReadonlySet<string> = new Set(['limit', 'after_id', 'before_id', 'beta', ...LIFECYCLE_PARAMS])

export const AnthropicModel = t.Object(
  {
    type: t.Literal('model'),
    id: t.String({ description: 'The id to send as `model` (with its level suffix, if any)' }),
    display_name: t.String({ description: 'The id: the gateway has no display names' }),
    created_at: t.String({ description: 'RFC 3339; the epoch, as the gateway tracks no release dates' }),
    max_input_tokens: JsonInteger({ minimum: 1 }),
    max_tokens: JsonInteger({ minimum: 1 }),
    lifecycle: t.Literal('active'),
    deprecated_at: t.Null(),
    retires_at: t.Null(),
    capabilities: t.Null({ description: "Anthropic's capability tree is not tracked: see GET /api/v1/models" }),
    line: t.Null(),
    privacy_level: t.Union([t.Literal('anonymous'), t.Literal('private'), t.Literal('confidential'), t.Literal('encrypted')]),
  },
  { description: 'One callable model id, Anthropic shape (sent when the request carries anthropic-version)' },
)

export const AnthropicModelList = t.Object(
  {
    data: t.Array(AnthropicModel),
    has_more: t.Boolean(),
    first_id: t.Union([t.String(), t.Null()]),
    last_id: t.Union([t.String(), t.Null()]),
  },
  { description: 'Anthropic page (sent when the request carries anthropic-version)' },
)

type Entry = typeof AnthropicModel.static
type Page = typeof AnthropicModelList.static

export function isAnthropicClient(request: Request): boolean {
  return request.headers.has('anthropic-version')
}

export function anthropicEntry(route: ModelRoute): Entry {
  return {
    type: 'model',
    id: route.id,
    display_name: route.id,
    created_at: UNKNOWN_DATE,
    max_input_tokens: route.contextLength,
    max_tokens: route.maxOutputTokens,
    // The SDK types these as always present (nullable): a catalog model is live until removed.
    lifecycle: 'active',
    deprecated_at: null,
    retires_at: null,
    capabilities: null,
    line: null,
    privacy_level: route.level,
  }
}

/**
 * One page of `entries` per Anthropic's cursors: `after_id` starts after that id, `before_id`
 * ends before it, `has_more` says whether more lie in the direction paged. A cursor that is not
 * a listed id, both cursors, or a limit outside 1..1000 is 400 naming the parameter.
 */
export function anthropicPage(listed: readonly Entry[], query: URLSearchParams): Page {
  let entries = listed
  const limitText = query.get('limit')
  let limit = DEFAULT_LIMIT
  if (limitText !== null) {
    limit = /^[0-9]{1,4}$/.test(limitText) ? Number(limitText) : 0
    if (limit < 1 || limit > MAX_LIMIT) throw new ApiError('invalid_request', `limit must be an integer from 1 to ${MAX_LIMIT}`, 'limit')
  }
  // Every catalog model is active: a lifecycle filter without `active` leaves nothing.
  const stages = LIFECYCLE_PARAMS.flatMap(name => query.getAll(name)).flatMap(value => value.split(','))
  for (const stage of stages) {
    if (!LIFECYCLES.has(stage)) throw new ApiError('invalid_request', `lifecycle must be active, deprecated or retired, got "${stage.slice(0, 100)}"`, 'lifecycle')
  }
  if (stages.length > 0 && !stages.includes('active')) entries = []
  const after = query.get('after_id')
  const before = query.get('before_id')
  if (after !== null && before !== null) throw new ApiError('invalid_request', 'give after_id or before_id, not both', 'before_id')
  const indexOf = (param: 'after_id' | 'before_id', id: string): number => {
    const index = entries.findIndex(entry => entry.id === id)
    if (index === -1) throw new ApiError('invalid_request', `${param} "${id.slice(0, 200)}" is not a listed model id`, param)
    return index
  }
  let start: number
  let end: number
  let hasMore: boolean
  if (before !== null) {
    end = indexOf('before_id', before)
    start = Math.max(0, end - limit)
    hasMore = start > 0
  } else {
    start = after === null ? 0 : indexOf('after_id', after) + 1
    end = Math.min(entries.length, start + limit)
    hasMore = end < entries.length
  }
  const data = entries.slice(start, end)
  return { data, has_more: hasMore, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null }
}
