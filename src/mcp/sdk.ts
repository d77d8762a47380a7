/**
 * The parts of the MCP SDK the hosted server uses, in one module that McpService imports on the
 * first POST /mcp (src/lib/lazy.ts): the SDK brings zod, zod-to-json-schema and ajv, ~240
 * modules that a gateway serving only chat never needs (bench/README.md, "Boot footprint").
 */
export { Server } from '@modelcontextprotocol/sdk/server/index.js'
export { Protocol } from '@modelcontextprotocol/sdk/shared/protocol.js'
export { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
export {
  CallToolRequestSchema, CancelledNotificationSchema, ErrorCode, InitializeRequestSchema, LATEST_PROTOCOL_VERSION, ListToolsRequestSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js'

import { ErrorCode } from '@modelcontextprotocol/sdk/types.js'
import { z } from 'zod'
import { JsonRpcError } from './json-rpc'

/**
 * A request as the SDK's protocol layer parses it before any handler: loosely (any params, or
 * none: in zod 4 a z.unknown() key is still required unless optional). Registered with the SDK's
 * strict schemas, a request whose params do not fit (no params on tools/call, initialize without
 * protocolVersion, tools/list with a numeric cursor) was answered -32603 (an internal error) with
 * zod's dump; the handler checks them with `checkParams` instead, which answers -32602 (invalid
 * params), what the caller did wrong, in words.
 */
function looseRequest<M extends string>(method: M) {
  return z.object({ method: z.literal(method), params: z.unknown().optional() })
}

export const LooseInitializeRequestSchema = looseRequest('initialize')
export const LooseListToolsRequestSchema = looseRequest('tools/list')
export const LooseCallToolRequestSchema = looseRequest('tools/call')

/** At most this many problems are named: the first ones say what to fix. */
const MAX_PROBLEMS = 3

/**
 * The request checked against the SDK's strict schema for its method: the parsed request, or
 * JSON-RPC error -32602 naming each problem by its path ("params.protocolVersion: expected string,
 * received undefined"), never zod's JSON dump.
 */
export function checkParams<T>(schema: { safeParse(value: unknown): { success: true; data: T } | { success: false; error: { issues: ReadonlyArray<{ path: PropertyKey[]; message: string }> } } }, request: unknown): T {
  const parsed = schema.safeParse(request)
  if (parsed.success) return parsed.data
  const problems = parsed.error.issues.slice(0, MAX_PROBLEMS).map(issue => {
    const path = issue.path.map(String).join('.') || 'params'
    return `${path}: ${issue.message.replace(/^Invalid input: /, '')}`
  })
  throw new JsonRpcError(ErrorCode.InvalidParams, `Invalid params: ${problems.join('; ')}`)
}

/**
 * The message or batch with the `task` member dropped from its requests' params. MCP 2025-11-25
 * (Tasks, "Task Support and Handling"): a receiver that does not declare the task capability for
 * a request type MUST process such requests normally, ignoring the task metadata. This server
 * declares none, but the SDK's Protocol checks the capability before any handler runs and answers
 * a task-augmented tools/call -32603 ("Server does not support task creation"); without the
 * member, the call runs as any other and its result is answered directly.
 */
export function withoutTaskAugmentation(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(message => withoutTaskAugmentation(message))
  const message = body as { method?: unknown; params?: unknown } | null
  if (typeof message?.method !== 'string' || typeof message.params !== 'object' || message.params === null || !('task' in message.params)) return body
  const params: Record<string, unknown> = { ...message.params }
  delete params.task
  return { ...message, params }
}
