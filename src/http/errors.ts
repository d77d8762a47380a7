import { apiErrorAsJsonRpc, type JsonRpcId } from '../mcp/json-rpc'

/**
 * The closed table of error codes (ARCHITECTURE.md §10). Every error the gateway sends
 * has one of these codes; the status follows from the code.
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  payload_too_large: 413,
  rate_limited: 429,
  insufficient_quota: 429,
  internal_error: 500,
  provider_error: 502,
  unavailable: 503,
} as const

export type ErrorCode = keyof typeof ERROR_STATUS

/** The one error class routes throw for an expected failure. */
export class ApiError extends Error {
  readonly status: number
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly param?: string,
    /** Extra response headers (Retry-After, X-RateLimit-*). */
    readonly headers?: Record<string, string>,
    /** Machine-readable details an SDK branches on (Anthropic's `error.details`). */
    readonly details?: Record<string, unknown>,
  ) {
    super(message)
    this.status = ERROR_STATUS[code]
  }
}

/**
 * An upstream provider's refusal passed on to the client (its 429 with its Retry-After): the
 * client's answer is the same, but it is not one of the gateway's own limits, so
 * `svc_refusals_total` does not count it.
 */
export class UpstreamRefusal extends ApiError {}

/** Which envelope a path's clients expect. */
export type Surface = 'api' | 'openai' | 'anthropic' | 'mcp'

export function surfaceOf(path: string, headers?: Headers): Surface {
  // MCP clients read JSON-RPC error objects (src/mcp/json-rpc.ts).
  if (path === '/mcp') return 'mcp'
  if (path.startsWith('/v1/messages')) return 'anthropic'
  // /v1/models serves both SDKs; Anthropic's always sends anthropic-version (catalog/anthropic.ts).
  if ((path === '/v1/models' || path.startsWith('/v1/models/')) && headers?.has('anthropic-version')) return 'anthropic'
  if (path.startsWith('/v1/') || path === '/v1') return 'openai'
  return 'api'
}

// OpenAI's `error.type` values, as its SDKs branch on them.
const OPENAI_TYPE: Record<ErrorCode, string> = {
  invalid_request: 'invalid_request_error',
  unauthorized: 'authentication_error',
  forbidden: 'permission_error',
  not_found: 'invalid_request_error',
  method_not_allowed: 'invalid_request_error',
  payload_too_large: 'invalid_request_error',
  rate_limited: 'rate_limit_error',
  insufficient_quota: 'insufficient_quota',
  internal_error: 'server_error',
  provider_error: 'server_error',
  unavailable: 'server_error',
}

// Anthropic's `error.type` values (its SDK maps them to exception classes).
const ANTHROPIC_TYPE: Record<ErrorCode, string> = {
  invalid_request: 'invalid_request_error',
  unauthorized: 'authentication_error',
  forbidden: 'permission_error',
  not_found: 'not_found_error',
  method_not_allowed: 'invalid_request_error',
  payload_too_large: 'request_too_large',
  rate_limited: 'rate_limit_error',
  // Anthropic's own type for an unfunded account (its status is 402; ours stays 429 per the spec).
  insufficient_quota: 'billing_error',
  internal_error: 'api_error',
  provider_error: 'api_error',
  unavailable: 'overloaded_error',
}

/** Anthropic's error envelope, for HTTP errors and the in-band `event: error` of a stream. */
export function anthropicErrorBody(error: ApiError): { type: 'error'; error: { type: string; message: string; details?: Record<string, unknown> } } {
  // Anthropic's envelope has no param: the message names the field, as Anthropic's own do ("messages.0.content: …").
  const { param, message } = error
  const body = { type: ANTHROPIC_TYPE[error.code], message: param === undefined || message.includes(param) ? message : `${param}: ${message}` }
  return { type: 'error', error: error.details === undefined ? body : { ...body, details: error.details } }
}

/** OpenAI's error envelope, for HTTP errors and the in-band error frame of a Chat Completions stream. */
export function openAIErrorBody(error: ApiError): { error: { message: string; type: string; param: string | null; code: string } } {
  return { error: { message: error.message, type: OPENAI_TYPE[error.code], param: error.param ?? null, code: error.code } }
}

/**
 * Renders an ApiError in the envelope of its surface, with the request id header. On `mcp`,
 * `jsonRpcId` is the id of the JSON-RPC request being answered (null when not known).
 */
export function renderError(error: ApiError, surface: Surface, requestId: string, jsonRpcId: JsonRpcId = null): Response {
  let body: unknown
  if (surface === 'mcp') {
    body = apiErrorAsJsonRpc(error, jsonRpcId, requestId)
  } else if (surface === 'openai') {
    body = openAIErrorBody(error)
  } else if (surface === 'anthropic') {
    body = { ...anthropicErrorBody(error), request_id: requestId }
  } else {
    const inner: Record<string, string> = { code: error.code, message: error.message }
    if (error.param !== undefined) inner.param = error.param
    inner.request_id = requestId
    body = { error: inner }
  }
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': requestId, ...error.headers }
  // A route may send its own challenge (/mcp points at its protected-resource metadata).
  if (error.status === 401) headers['www-authenticate'] ??= 'Bearer'
  // The Anthropic SDK reads the request id from `request-id` (error.requestID).
  if (surface === 'anthropic') headers['request-id'] = requestId
  // Both official SDKs retry every 429 unless told not to: an unfunded account will not fund itself.
  // A refusal by money that calls in flight only hold says otherwise (billing/ledger-rules.ts).
  if (error.code === 'insufficient_quota') headers['x-should-retry'] ??= 'false'
  return new Response(JSON.stringify(body), { status: error.status, headers })
}
