import type { ApiError, ErrorCode } from '../http/errors'

// The JSON-RPC 2.0 error shape of POST /mcp: every answer an MCP client gets there, a refusal
// before dispatch (Origin, credential, body) or a failure the gateway's error handler renders
// (a database outage, an unexpected error), is a JSON-RPC error object, under the HTTP status
// the failure has on every other route (Streamable HTTP lets an error status carry one).

export type JsonRpcId = string | number | null

/**
 * JSON-RPC error codes for gateway refusals inside MCP (the codes other hosted-MCP gateways use,
 * reference/PEERS.md): a tool call refused for credentials, for money, or for rate.
 */
export const MCP_ERROR = { auth: -32001, payment: -32002, rateLimited: -32003 } as const

/**
 * A JSON-RPC error an MCP handler throws: the SDK's protocol layer sends its `code`, `message` and
 * `data` as they are. Not the SDK's McpError, whose constructor writes "MCP error <code>: " into
 * the message, which then went out on the wire, and SDK clients (building their own McpError)
 * showed it twice: "MCP error -32002: MCP error -32002: insufficient funds".
 */
export class JsonRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message)
  }
}

/** The JSON-RPC code of each gateway error code when it is raised outside a tool. */
const CODE: Record<ErrorCode, number> = {
  invalid_request: -32600,
  payload_too_large: -32600,
  not_found: -32601,
  method_not_allowed: -32601,
  unauthorized: MCP_ERROR.auth,
  forbidden: MCP_ERROR.auth,
  insufficient_quota: MCP_ERROR.payment,
  rate_limited: MCP_ERROR.rateLimited,
  internal_error: -32603,
  provider_error: -32603,
  unavailable: -32603,
}

/** A JSON-RPC error response body. */
export function jsonRpcErrorBody(id: JsonRpcId, code: number, message: string, data?: Record<string, unknown>) {
  return { jsonrpc: '2.0' as const, id, error: { code, message, ...(data ? { data } : {}) } }
}

/** A gateway error as a JSON-RPC error: `data` carries the gateway's own code and status, as a tool's refusals do. */
export function apiErrorAsJsonRpc(error: ApiError, id: JsonRpcId, requestId: string) {
  const data = { code: error.code, status: error.status, ...(error.param ? { param: error.param } : {}), request_id: requestId }
  return jsonRpcErrorBody(id, CODE[error.code], error.message, data)
}

/**
 * Why a parsed body is not a JSON-RPC 2.0 message or batch of them (§4, §5), or undefined. Valid
 * JSON that is no valid message is an Invalid Request (-32600), not a parse error (-32700), which
 * the SDK's transport answers for both. A batch with one such member is refused whole (§6 would
 * answer the others; the SDK's transport takes a batch only whole, and MCP dropped batches in
 * 2025-06-18).
 */
export function invalidRequest(body: unknown): string | undefined {
  if (Array.isArray(body)) {
    if (body.length === 0) return 'an empty batch'
    // Each request's answer is found by its id (the SDK's transport keys its streams by it): two
    // requests of one batch with one id would both run, and be billed, and one go unanswered.
    const requestIds = new Set<unknown>()
    for (const message of body) {
      const problem = invalidMessage(message)
      if (problem !== undefined) return `in the batch, ${problem}`
      const { id, method } = message as { id?: unknown; method?: unknown }
      // MCP 2025-03-26 (the version that had batches): initialize must not be part of one. The SDK
      // answered a batch of one initialize, without the session id its answer alone carries.
      if (method === 'initialize') return 'in the batch, an initialize request; initialize must be sent alone'
      if (id === undefined || method === undefined) continue
      if (requestIds.has(id)) return `in the batch, two requests have the id ${JSON.stringify(id)}; each request needs an id of its own`
      requestIds.add(id)
    }
    return undefined
  }
  return invalidMessage(body)
}

const REQUEST_MEMBERS = new Set(['jsonrpc', 'id', 'method', 'params'])
const RESPONSE_MEMBERS = new Set(['jsonrpc', 'id', 'result', 'error'])

function invalidMessage(message: unknown): string | undefined {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return 'a message must be a JSON object'
  const { jsonrpc, method, id, params } = message as Record<string, unknown>
  if (jsonrpc !== '2.0') return '"jsonrpc" must be "2.0"'
  // JSON-RPC §4.2 takes them by position or by name; MCP only by name (an object), as does the
  // SDK's transport, which answered anything else -32700.
  if (params !== undefined && (typeof params !== 'object' || params === null || Array.isArray(params))) return '"params" must be an object'
  const meta = (params as { _meta?: unknown } | undefined)?._meta
  if (meta !== undefined && (typeof meta !== 'object' || meta === null || Array.isArray(meta))) return '"params._meta" must be an object'
  // MCP: a request's id is a string or an integer, never null.
  if (id !== undefined && typeof id !== 'string' && !Number.isSafeInteger(id)) return '"id" must be a string or an integer'
  // A progress token is an id of the same kind (the SDK's schema refuses any other).
  const token = (meta as { progressToken?: unknown } | undefined)?.progressToken
  if (token !== undefined && typeof token !== 'string' && !Number.isSafeInteger(token)) return '"params._meta.progressToken" must be a string or an integer'
  // The SDK's message schemas are strict: a member of neither kind of message is refused there.
  const allowed = method !== undefined ? REQUEST_MEMBERS : RESPONSE_MEMBERS
  const unknown = Object.keys(message).find(key => !allowed.has(key))
  if (unknown !== undefined) return `a message has no member "${unknown.slice(0, 50)}"`
  if (method !== undefined) return typeof method === 'string' ? undefined : '"method" must be a string'
  // An error response may lack its id (JSON-RPC §5: the request's id could not be read; MCP's
  // schema makes it optional).
  if ('error' in message) return undefined
  if (id === undefined || !('result' in message)) return 'a message needs a "method" (a request or notification), or an "id" with a "result" or "error" (a response)'
  return undefined
}

// The id of the JSON-RPC request a POST /mcp carries, once its body is read, so a failure after
// that point answers that request (the error handler has the Request, not the body).
const ids = new WeakMap<Request, JsonRpcId>()

/** Remembers the id of a single JSON-RPC request; a batch, a notification or anything else has none. */
export function noteJsonRpcId(request: Request, body: unknown): void {
  const id = (body as { id?: unknown } | null)?.id
  if (!Array.isArray(body) && (typeof id === 'string' || typeof id === 'number')) ids.set(request, id)
}

/** The id noted for this request, or null (JSON-RPC's id when it is not known). */
export function jsonRpcIdOf(request: Request): JsonRpcId {
  return ids.get(request) ?? null
}
