/**
 * What Elysia's OpenAPI generator cannot say, added to its document once (it caches the object).
 *
 * - A streamed reply's media type. The generator writes one `application/json` content per status
 *   from the route's `response` schema and overwrites `detail.responses`, so a route that streams
 *   marks its detail with `eventStream(…)` and the event stream is added to its 200 here.
 * - Parameters a route reads itself (headers, or query parameters of a second wire format): the
 *   generator writes `parameters` from the route's schemas only, overwriting `detail.parameters`,
 *   and a `headers` or `query` schema would make Elysia build and check those objects on every
 *   request. Such a route marks its detail with `readsParameters(…)`.
 * - The optional `X-Org-ID` header (spec §6: it must match the credential's organization), on every
 *   authenticated operation, for the same reason.
 * - A body-less reply (`t.Void()`, a 204): the generator writes the schema itself where the map of
 *   media types belongs, which OpenAPI validators reject.
 * - The X-RateLimit-* headers of a success: the auth step sets them before the handler runs
 *   (src/http/auth.ts admit), on every route it rate-limits, which is every route whose 429
 *   documents them (authErrors). They are copied from that 429 to each 2xx.
 * - A nullable enum or const (`t.Union([t.Literal(…), t.Null()])`): the plugin's nullToOpenApi
 *   merges the union into `type: [..., "null"]` but keeps the `enum` or `const`, which then
 *   refuses the null the type allows (and the server takes). null joins the enum; a const X
 *   becomes `enum: [X, null]`.
 * - A wildcard route (`/a/:b/*`): the generator keeps the `*` in the path, where no template
 *   variable can hold it. It is written `{rest}`, which the route documents with
 *   `readsParameters` as a path parameter (`params['*']` is what its handler reads).
 */

/** The detail keys a route sets (OpenAPI extension names, removed when applied). */
const EVENT_STREAM = 'x-svc-event-stream'
const PARAMETERS = 'x-svc-parameters'

/** Spread into a route's `detail`: its 200 is also `text/event-stream`, described by `description`. */
export function eventStream(description: string): Record<string, string> {
  return { [EVENT_STREAM]: description }
}

/** An OpenAPI parameter object. */
export interface ParameterDoc {
  name: string
  in: 'header' | 'query' | 'path'
  required?: boolean
  description: string
  schema: Record<string, unknown>
}

/** Spread into a route's `detail`: parameters the handler reads itself, documented after the generated ones. */
export function readsParameters(parameters: ParameterDoc[]): Record<string, ParameterDoc[]> {
  return { [PARAMETERS]: parameters }
}

/** The template variable a trailing wildcard is documented as. */
const WILDCARD = '{rest}'

const ORG_HEADER: ParameterDoc = {
  name: 'X-Org-ID',
  in: 'header',
  required: false,
  schema: { type: 'string', format: 'uuid' },
  description: 'The organization the caller means to act for (case-insensitive). Optional: the credential already names its organization; when sent and different, 403 forbidden.',
}

type Operation = {
  security?: unknown[]
  parameters?: Array<{ name: string; in: string }>
  responses?: Record<string, { content?: Record<string, unknown>; headers?: Record<string, unknown> }>
  [EVENT_STREAM]?: string
  [PARAMETERS]?: ParameterDoc[]
}

const completed = new WeakSet<object>()

/** Completes `document` in place (once per document object). */
export function completeDocument(document: { paths?: Record<string, Record<string, Operation>> }): void {
  if (completed.has(document)) return
  completed.add(document)
  if (document.paths !== undefined) document.paths = withNamedWildcards(document.paths)
  tidySchemas(document)
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item)) {
      const stream = operation[EVENT_STREAM]
      delete operation[EVENT_STREAM]
      const read = operation[PARAMETERS] ?? []
      delete operation[PARAMETERS]
      const responses = operation.responses ?? {}
      for (const [status, response] of Object.entries(responses)) {
        // A map of media types has only type/subtype keys; anything else is a schema put in its place.
        if (response.content !== undefined && Object.keys(response.content).some(key => !key.includes('/'))) {
          const { content: _, ...rest } = response
          responses[status] = rest
        }
      }
      const limits = Object.fromEntries(Object.entries(responses['429']?.headers ?? {}).filter(([name]) => name.startsWith('X-RateLimit-')))
      for (const [status, response] of Object.entries(responses)) {
        // New objects, as below.
        if (status.startsWith('2') && Object.keys(limits).length > 0) responses[status] = { ...response, headers: { ...response.headers, ...limits } }
      }
      const ok = responses['200']
      // A new object: a route may share one response object between statuses.
      if (stream !== undefined && ok !== undefined) responses['200'] = { ...ok, content: { ...ok.content, 'text/event-stream': { schema: { type: 'string', description: stream } } } }
      const declared = new Set((operation.parameters ?? []).map(parameter => `${parameter.in} ${parameter.name.toLowerCase()}`))
      // X-Org-ID where an organization's credential is taken (not the metrics token's route).
      const org = operation.security?.some(scheme => !Object.hasOwn(scheme as object, 'metricsToken')) === true
      const added = [...read, ...(org ? [ORG_HEADER] : [])].filter(parameter => !declared.has(`${parameter.in} ${parameter.name.toLowerCase()}`))
      if (added.length > 0) operation.parameters = [...(operation.parameters ?? []), ...added]
    }
  }
}

/** `paths` with a trailing `/*` written `/{rest}`, in the same order. */
function withNamedWildcards<T>(paths: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(paths).map(([path, item]) => [path.endsWith('/*') ? `${path.slice(0, -1)}${WILDCARD}` : path, item]))
}

/** Keys of a schema whose values are data, not schemas: never rewritten. */
const VALUE_KEYS = new Set(['example', 'examples', 'default', 'const', 'enum'])
/** Keys of a schema whose values are maps of names to schemas (a property may be named `default`). */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'dependentSchemas'])

/**
 * Every schema under `node`: one whose type takes null gets null in its enum, or its const as
 * `enum: [X, null]`; TypeBox's `error` (the validation message the gateway answers with, not a
 * JSON Schema keyword) is dropped.
 */
function tidySchemas(node: unknown): void {
  if (node === null || typeof node !== 'object') return
  if (Array.isArray(node)) {
    for (const item of node) tidySchemas(item)
    return
  }
  const object = node as Record<string, unknown>
  if (Array.isArray(object.type) && object.type.includes('null')) {
    if (Array.isArray(object.enum) && !object.enum.includes(null)) object.enum = [...object.enum, null]
    if ('const' in object && object.const !== null) {
      object.enum = [object.const, null]
      delete object.const
    }
  }
  // Anything else (a path item, a response, a map of responses whose `default` is a response) is walked whole.
  const isSchema = 'type' in object || 'anyOf' in object || 'oneOf' in object || 'allOf' in object || 'properties' in object
  if (isSchema && typeof object.error === 'string') delete object.error
  for (const [key, value] of Object.entries(object)) {
    if (SCHEMA_MAPS.has(key) && isSchema && value !== null && typeof value === 'object') for (const child of Object.values(value)) tidySchemas(child)
    else if (!(isSchema && VALUE_KEYS.has(key)) && key !== 'example' && key !== 'examples') tidySchemas(value)
  }
}
