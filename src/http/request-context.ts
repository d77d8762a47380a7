import type { TSchema } from '@sinclair/typebox'
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'
import { Value } from '@sinclair/typebox/value'
import { Elysia, ValidationError } from 'elysia'
import { choiceText, explainUnion, isKindError, problemOf } from './validation-message'
import { isDatabaseOutage } from '../db/client'
import { cutText } from '../lib/characters'
import { requestIdFrom } from '../lib/ids'
import type { Logger } from '../observability/logger'
import { GatewayMetrics } from '../observability/gateway-metrics'
import { CLIENT_CLOSED_REQUEST, recordFailure, recordOf, RequestLog } from '../observability/request-log'
import { ApiError, renderError, surfaceOf } from './errors'
import { RouteMethods } from './route-methods'
import { jsonRpcIdOf } from '../mcp/json-rpc'

const REQUEST_ID = 'x-request-id'

/** The request id assigned to this request (set on the response headers by onRequest). */
export function requestIdOf(set: { headers: Record<string, unknown> }): string {
  return String(set.headers[REQUEST_ID] ?? '')
}

/**
 * A Response a handler built, sent as it is. While `set.headers` has entries (the request id
 * always does), Elysia rebuilds every returned Response: a merged Headers and
 * `new Response(response.body, …)`, which turns a string or file body into a stream (3.4% of an
 * instant stream's main-thread samples; a file loses Bun's direct send). The set headers go onto
 * the Response here instead (its own headers win, as in Elysia's merge) and `set.headers` is
 * emptied, so Elysia returns it untouched. A status or cookie set beside a Response is left to
 * Elysia's merge, which carries them.
 */
function sendAsBuilt(response: Response, set: { headers: Record<string, unknown>; status?: unknown; cookie?: unknown }): void {
  if ((set.status !== undefined && set.status !== 200) || set.cookie !== undefined) return
  const headers = response.headers
  for (const key in set.headers) if (!headers.has(key)) headers.set(key, String(set.headers[key]))
  set.headers = {}
}

/**
 * Refuses a request whose URL Bun could not build. Without a Host header (HTTP/1.0) Bun hands the
 * request over with a relative URL, on which no route can be found (and URL parsing throws); with
 * a Host that makes no URL (`x.com:99999`, `[zz]`) it passes that on, and every route that read
 * its URL threw a 500 (QA). Both are 400s, in the envelope of any error. The check costs ~40 ns.
 */
export function checkRequestUrl(request: Request): void {
  const url = request.url
  if (url.charCodeAt(0) !== 47 /* / */ && URL.canParse(url)) return
  // A Host holding `/`, `?`, `@`, a backslash or a space also reaches here as a relative URL.
  if (!request.headers.has('host')) throw new ApiError('invalid_request', 'the request has no Host header')
  throw new ApiError('invalid_request', "the request's Host header is not a valid host name and port")
}

/** Paths that need no host, served to a request without one (see hostlessPath). */
const PROBE_PATHS = new Set(['/healthz', '/readyz'])

/**
 * The path of a request without a Host header, which Bun hands over with a relative URL (an
 * HTTP/1.0 probe: HAProxy's default `option httpchk GET /readyz` sends no Host); undefined for
 * any other request. Probes need no host, so both ports serve them by this path.
 */
export function hostlessPath(request: Request): string | undefined {
  const url = request.url
  if (url.charCodeAt(0) !== 47 /* / */ || request.headers.has('host')) return undefined
  const query = url.indexOf('?')
  return query === -1 ? url : url.slice(0, query)
}

/**
 * Global request plumbing: a request id on every response, every failure, expected or not,
 * rendered in the envelope of the route's surface (nothing reaches the client as a bare 500 or
 * as Elysia's default 422/HTML), and one log line and metrics update per request, labelled by
 * the matched route pattern (unmatched paths share one label, so cardinality stays bounded).
 */
export function requestContext(logger: Logger, requestLog: RequestLog = new RequestLog(logger, new GatewayMetrics()), methods = new RouteMethods()) {
  return new Elysia()
    .onRequest(({ request, set }) => {
      const requestId = requestIdFrom(request.headers.get(REQUEST_ID))
      set.headers[REQUEST_ID] = requestId
      requestLog.begin(request, requestId)
      // A probe without a Host is served on /healthz and /readyz (without metrics.port they are the
      // load balancer's targets). Elysia finds their routes in the relative URL: it reads the path
      // from the first '/' at index 7 or later (app.ts), or from the start when there is none, as
      // in these two. Any other request without a Host is a 400.
      const probe = hostlessPath(request)
      if (probe === undefined || !PROBE_PATHS.has(probe)) checkRequestUrl(request)
    })
    .onAfterHandle({ as: 'global' }, ({ request, route, set, responseValue }) => {
      const built = responseValue instanceof Response
      if (built) sendAsBuilt(responseValue, set)
      const record = recordOf(request)
      if (record === undefined) return
      const status = built ? responseValue.status : typeof set.status === 'number' ? set.status : 200
      requestLog.respond(record, route, status)
    })
    .onError({ as: 'global' }, ({ code, error, path, set, request, route }) => {
      const requestId = requestIdOf(set) || requestIdFrom(null)
      const apiError = toApiError(code, error, path, request.method, methods)
      if (apiError.code === 'internal_error') {
        logger.error('unhandled error', { request_id: requestId, path, error: String(error), stack: (error as Error)?.stack })
      }
      const record = recordFailure(request, apiError, requestLog.metrics)
      if (record !== undefined) {
        const status = record.outcome === 'cancelled' ? CLIENT_CLOSED_REQUEST : apiError.status
        // A known path asked with another method is that route's (405), not an unmatched path.
        const label = apiError.code === 'method_not_allowed' ? (methods.patternOf(path) ?? 'unmatched') : code === 'NOT_FOUND' || !route ? 'unmatched' : route
        requestLog.respond(record, label, status)
      }
      const surface = surfaceOf(path, request.headers)
      return renderError(apiError, surface, requestId, surface === 'mcp' ? jsonRpcIdOf(request) : null)
    })
}

function toApiError(code: string | number, error: unknown, path: string, method: string, methods: RouteMethods): ApiError {
  if (error instanceof ApiError) return error
  const cause = (error as { cause?: unknown })?.cause
  if (cause instanceof ApiError) return cause // thrown inside a parse hook, wrapped by Elysia
  if (code === 'VALIDATION' && error instanceof ValidationError) return fromValidation(error)
  // A JSON object with its own "toString" or "valueOf" key (not a function) has no text: Elysia's
  // message for an invalid value (`found: ${value}`) throws on it while it builds the error.
  if (error instanceof TypeError && NO_PRIMITIVE.test(error.message)) {
    return new ApiError('invalid_request', 'the request body holds an object with a key named "toString" or "valueOf" where another kind of value is expected')
  }
  if (code === 'PARSE') return new ApiError('invalid_request', 'request body is not valid JSON')
  if (code === 'NOT_FOUND') {
    const allowed = methods.allowed(path)
    if (allowed.length > 0) return new ApiError('method_not_allowed', `${method} is not allowed on ${path}; it takes ${allowed.join(', ')}`, undefined, { allow: allowed.join(', ') })
    return new ApiError('not_found', `no route for ${method} ${path}`)
  }
  // Validating a pathologically nested body can exhaust the stack: that is the input's fault.
  if (error instanceof RangeError && /call stack/i.test(error.message)) return new ApiError('invalid_request', 'request body is nested too deeply')
  // A database outage (unreachable, read-only) on any route is a dependency failure: 503.
  if (isDatabaseOutage(error)) return new ApiError('unavailable', 'the database is unavailable; retry shortly')
  return new ApiError('internal_error', 'internal error')
}

interface SchemaIssue {
  path: string
  message: string
  type?: number
  errors?: unknown
  summary?: string
  schema?: { error?: unknown }
}

/** JavaScriptCore's messages when a value cannot be converted to a primitive (ToPrimitive). */
const NO_PRIMITIVE = /^(No default value|Cannot convert object to primitive value)$/

/**
 * The failures, with Elysia's summaries; without them when building those throws (a value with
 * its own "toString" key from JSON: see toApiError): TypeBox's own errors then, which keep the path.
 */
function issuesOf(error: ValidationError): SchemaIssue[] {
  try {
    return error.all as SchemaIssue[]
  } catch {
    const validator = error.validator as { Errors?: (value: unknown) => Iterable<SchemaIssue> }
    const errors = validator.Errors ? validator.Errors(error.value) : (Value.Errors(error.validator as TSchema, error.value) as Iterable<SchemaIssue>)
    for (const issue of errors) return [issue]
    return []
  }
}

/** Maps a TypeBox failure to 400 invalid_request naming the offending field. */
function fromValidation(error: ValidationError): ApiError {
  const issue = issuesOf(error)[0]
  const where = error.type === 'body' ? 'body' : error.type
  if (!issue) return new ApiError('invalid_request', `invalid ${where}`)
  // A schema may carry a human message in `error`.
  if (typeof issue.schema?.error === 'string') return new ApiError('invalid_request', issue.schema.error, paramOf(issue.path))
  if (issue.type === ValueErrorType.Union && Array.isArray(issue.errors)) {
    const explained = explainUnion(issue as unknown as ValueError)
    if ('choices' in explained) return refused(where, explained.path, `should be ${choiceText(explained.choices)}`)
    const leaf = explained.error
    if (leaf !== (issue as unknown as ValueError)) {
      // The variant's own message, as for a field outside a union (a tool function's name).
      if (typeof leaf.schema.error === 'string') return new ApiError('invalid_request', leaf.schema.error, paramOf(leaf.path))
      if (leaf.type === ValueErrorType.ObjectRequiredProperty) return refused(where, leaf.path, 'is missing')
      const problem = problemOf(leaf)
      return refused(where, leaf.path, `is invalid: ${problem.charAt(0).toLowerCase()}${problem.slice(1)}`)
    }
  }
  const param = paramOf(issue.path)
  // Elysia's summary of a value of the wrong kind reads "to be string but found: [object Object]"
  // (an array [1] "found: 1"); TypeBox's own message is plain. A pattern says what it means.
  const plain = isKindError(issue as unknown as ValueError) || issue.type === ValueErrorType.StringPattern
  let message = plain ? problemOf(issue as unknown as ValueError) : (issue.summary ?? issue.message)
  if (param === undefined) message = `${where}: ${message}`
  // Anthropic's envelope has no `param`: a message must name its field itself.
  else if (!message.includes(`'${param}'`)) message = `${param}: ${message}`
  if (issue.message === 'Unexpected property' && param) message = `unknown field "${param}"`
  return new ApiError('invalid_request', message, param)
}

/**
 * A JSON pointer as the dotted field name clients know (`/messages/0/role` → `messages.0.role`).
 * A segment that is a client's own key (metadata's, an unknown field's) is cut at 200 UTF-16
 * units, never inside a surrogate pair: a 100 KB key was echoed whole in the reply and the log (QA).
 */
function paramOf(path: string): string | undefined {
  const dotted = path.replace(/^\//, '').replaceAll('/', '.')
  if (dotted.length <= MAX_SEGMENT) return dotted || undefined
  return dotted.split('.').map(segment => (segment.length > MAX_SEGMENT ? `${cutText(segment, MAX_SEGMENT)}…` : segment)).join('.')
}

const MAX_SEGMENT = 200

function refused(where: string, path: string, problem: string): ApiError {
  const param = paramOf(path)
  return new ApiError('invalid_request', param === undefined ? `${where} ${problem}` : `Property '${param}' ${problem}`, param)
}
