import type { CallToolRequest, CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { Value } from '@sinclair/typebox/value'
import type { TObject } from '@sinclair/typebox'
import { ApiError } from '../http/errors'
import { choiceText, explainUnion, PATTERN_MEANING, problemOf } from '../http/validation-message'
import { refuseEncrypted } from '../inference/encrypted'
import { lazy } from '../lib/lazy'
import type { Principal } from '../keys/principal'
import type { Limits } from '../limits/admission'
import type { GatewayMetrics } from '../observability/gateway-metrics'
import { CLIENT_CLOSED_REQUEST, recordFailure, recordOf } from '../observability/request-log'
import type { InFlightCalls } from './in-flight-calls'
import { JsonRpcError, MCP_ERROR } from './json-rpc'
import { ProgressFlow } from './progress-flow'
import type { McpTool, ToolContext } from './tools/types'

/** The MCP SDK, loaded on the first POST /mcp (see ./sdk.ts). */
const loadSdk = lazy(() => import('./sdk'))


/**
 * Turns a tool's failure into what MCP expects: a JSON-RPC error for refusals, else an isError
 * result. The request's line and the refusal count follow the HTTP error handler's rule
 * (recordFailure): a client that left is `cancelled` and refused nothing.
 */
function failure(error: unknown, call: McpCall, metrics: GatewayMetrics | undefined): CallToolResult {
  if (error instanceof JsonRpcError) throw error
  const apiError = error instanceof ApiError ? error : new ApiError('internal_error', 'the tool failed unexpectedly')
  recordFailure(call.httpRequest, apiError, metrics)
  const data = { code: apiError.code, status: apiError.status, ...(apiError.param ? { param: apiError.param } : {}) }
  if (apiError.code === 'unauthorized') throw new JsonRpcError(MCP_ERROR.auth, apiError.message, data)
  // Inside a tool, 403 can only mean the plan lacks the feature (Fusion access): a payment matter.
  if (apiError.code === 'insufficient_quota' || apiError.code === 'forbidden') throw new JsonRpcError(MCP_ERROR.payment, apiError.message, data)
  if (apiError.code === 'rate_limited') {
    // Header names vary in case (the limiter's `Retry-After`, an upstream's passed-on `retry-after`).
    const retryAfter = Number(new Headers(apiError.headers).get('retry-after') ?? 1)
    throw new JsonRpcError(MCP_ERROR.rateLimited, apiError.message, { ...data, retry_after_s: retryAfter })
  }
  return { content: [{ type: 'text', text: apiError.message }], isError: true, structuredContent: undefined }
}

/**
 * The first problem with a tool's arguments, named as the HTTP routes name a body's: a value
 * outside a set of literals lists the set, not TypeBox's "Expected union value".
 */
function argumentProblem(schema: TObject, args: unknown): string {
  const first = Value.Errors(schema, args).First()
  if (first === undefined) return 'arguments: do not match the input schema'
  const explained = explainUnion(first)
  const path = 'error' in explained ? explained.error.path : explained.path
  const where = path.replace(/^\//, '').replaceAll('/', '.') || 'arguments'
  return `${where}: ${'error' in explained ? problemOf(explained.error) : `must be ${choiceText(explained.choices)}`}`
}

/**
 * A TypeBox schema as plain JSON Schema (TypeBox adds symbol keys; JSON drops them), without
 * the gateway's own pattern meanings (a strict JSON Schema compiler refuses unknown keywords).
 */
function jsonSchema(schema: object): Record<string, unknown> & { type: 'object' } {
  return JSON.parse(JSON.stringify(schema, (key, value) => (key === PATTERN_MEANING ? undefined : value)))
}

export interface McpCall {
  principal: Principal
  requestId: string
  httpRequest: Request
  /** The parsed JSON-RPC message or batch (the body was read under the route's cap). */
  body: unknown
  disableIdleTimeout?: () => void
}

/**
 * The hosted MCP server: one SDK `Server` and stateless web-standard Streamable HTTP transport
 * per POST (the session id issued at initialize is kept nowhere, so any instance answers any
 * request and nothing is kept between requests). Responses are JSON, except a tools/call whose
 * client sent a progressToken: that one is answered as SSE, with notifications/progress before
 * the result.
 */
export class McpService {
  private readonly byName: Map<string, McpTool>
  /** The tools/list answer, built once. */
  private readonly listed: Array<Record<string, unknown> & { name: string; inputSchema: { type: 'object' } }>

  constructor(
    readonly tools: readonly McpTool[],
    private readonly limits: Limits,
    private readonly version: string,
    /** The process's tools/call requests in flight: what notifications/cancelled looks up. */
    private readonly calls: InFlightCalls,
    private readonly metrics?: GatewayMetrics,
  ) {
    this.byName = new Map(tools.map(tool => [tool.name, tool]))
    this.listed = tools.map(tool => ({
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: jsonSchema(tool.inputSchema),
      ...(tool.outputSchema ? { outputSchema: jsonSchema(tool.outputSchema) } : {}),
      ...(tool.annotations ? { annotations: { title: tool.title, ...tool.annotations } } : {}),
    }))
  }

  async handle(call: McpCall): Promise<Response> {
    const sdk = await loadSdk()
    const { Server, ErrorCode, WebStandardStreamableHTTPServerTransport, checkParams } = sdk
    const serverInfo = { name: 'svc-gateway', version: this.version }
    const capabilities = { tools: { listChanged: false } }
    const server = new Server(serverInfo, { capabilities })
    const session = sessionOf(call.httpRequest)
    const streams = wantsProgress(call.body)
    const batched = requestCount(call.body) > 1
    const flow = streams ? new ProgressFlow() : undefined
    // The request's line waits for each tool call and for a progress stream's end, so that it
    // carries the billed call's model, outcome, usage and charge (README, Metrics and logs).
    const record = recordOf(call.httpRequest)
    // Loose schemas, then the SDK's strict ones with a readable -32602 (see sdk.ts). initialize
    // does what the SDK's own handler (Server._oninitialize) does for a stateless server:
    // negotiate the version (the client's if supported, else the latest) and state capabilities.
    server.setRequestHandler(sdk.LooseInitializeRequestSchema, async loose => {
      const { protocolVersion } = checkParams(sdk.InitializeRequestSchema, loose).params
      const negotiated = sdk.SUPPORTED_PROTOCOL_VERSIONS.includes(protocolVersion) ? protocolVersion : sdk.LATEST_PROTOCOL_VERSION
      return { protocolVersion: negotiated, capabilities, serverInfo }
    })
    server.setRequestHandler(sdk.LooseListToolsRequestSchema, async loose => {
      const { params } = checkParams(sdk.ListToolsRequestSchema, loose)
      // One page, so no cursor was ever handed out (MCP, "Pagination": an invalid cursor SHOULD be -32602).
      if (params?.cursor !== undefined) throw new JsonRpcError(ErrorCode.InvalidParams, 'Invalid params: cursor: tools/list has one page and hands out no cursor')
      return { tools: this.listed }
    })
    // The cancel comes in its own POST, so this Server has nothing in flight: the process's
    // registry finds the caller's call (same principal, same id). Unknown ids are ignored; the
    // transport answers a notification 202 either way.
    server.setNotificationHandler(sdk.CancelledNotificationSchema, notification => {
      const { requestId, reason } = notification.params
      if (requestId !== undefined) this.calls.cancel(call.principal, session, requestId, reason)
    })
    // A cancelled call gets no response (MCP, "Cancellation"). The SDK sends none for a handler
    // whose own signal aborted, which closing the Server does; closing it also ends an SSE
    // response's stream with no reply in it. A JSON response would wait for the reply forever:
    // `dropped` answers the POST instead (see below).
    let dropped: () => void = () => {}
    const droppedReply = new Promise<undefined>(resolve => (dropped = () => resolve(undefined)))
    const dropReply = async () => {
      await server.close()
      dropped()
    }
    // Through Protocol's registration, not Server's: Server wraps a tools/call handler in its own
    // strict check, answering -32602 with zod's JSON dump before this handler can say it in words.
    // (Its other addition checks task-augmented calls, a capability this server does not offer:
    // their `task` member is dropped before the SDK reads them, see withoutTaskAugmentation.)
    sdk.Protocol.prototype.setRequestHandler.call(server, sdk.LooseCallToolRequestSchema, async (loose, extra) => {
      const request: CallToolRequest = checkParams(sdk.CallToolRequestSchema, loose)
      const tool = this.byName.get(request.params.name)
      if (!tool) throw new JsonRpcError(ErrorCode.InvalidParams, `unknown tool "${request.params.name.slice(0, 100)}"; tools/list names the tools`)
      const args = request.params.arguments ?? {}
      // Bad arguments are a tool error (not a protocol error), so the model can correct itself.
      if (!Value.Check(tool.inputSchema, args)) {
        if (record !== undefined) record.outcome ??= 'invalid_request'
        return { content: [{ type: 'text', text: `invalid arguments: ${argumentProblem(tool.inputSchema, args)}` }], isError: true }
      }
      const token = request.params._meta?.progressToken
      const running = this.calls.start(call.principal, session, extra.requestId, call.httpRequest.signal)
      const context: ToolContext = {
        principal: call.principal, requestId: call.requestId, httpRequest: call.httpRequest, signal: running.signal, disableIdleTimeout: call.disableIdleTimeout,
      }
      if (token !== undefined) {
        context.progress = (progress, message, total) => {
          const params = { progressToken: token, progress, ...(total !== undefined ? { total } : {}), ...(message ? { message } : {}) }
          flow?.notified()
          extra.sendNotification({ method: 'notifications/progress', params }).catch(() => {})
        }
        if (flow !== undefined) context.ready = () => flow.ready()
      }
      if (record !== undefined) record.sink.defer(record)
      try {
        // Encrypted exists only on POST /v1/chat/completions (spec §4.10): a request carrying the
        // svc-encrypted headers is someone's Encrypted chat sent to the wrong door, whatever the tool.
        refuseEncrypted(call.httpRequest.headers, undefined, `MCP (${tool.name})`)
        // Billed tools count against the same inference buckets as the HTTP routes (one request each).
        if (tool.billed) this.limits.checkInference(call.principal)
        const result = await tool.run(args as never, context)
        return {
          content: [{ type: 'text', text: result.text }],
          ...(result.structured ? { structuredContent: result.structured } : {}),
          ...(result.isError ? { isError: true } : {}),
        }
      } catch (error) {
        if (running.cancelled()) {
          // The tool stopped on its signal (the upstream cut, billed as for a client that left):
          // no reply, and its line says `cancelled`, never a refusal. A tool that finished before
          // the cancel took effect answers as usual (the spec lets a completed request ignore it).
          if (record !== undefined) record.outcome ??= 'cancelled'
          // In a batch, dropping the reply would drop the whole POST's (the SDK's transport answers
          // once every request of it has its reply), and the other calls, still running and billed,
          // would reach no one: this one is answered as cancelled instead (the spec's SHOULD).
          if (batched) return { content: [{ type: 'text', text: (running.signal.reason as Error).message }], isError: true }
          await dropReply()
          throw error
        }
        return failure(error, call, this.metrics)
      } finally {
        running.end()
        if (record !== undefined) record.sink.end(record)
      }
    })

    // keepAliveMs 0: the SDK's own keep-alive (a `: keepalive` comment every 15 s, on a timer per
    // stream) is off. A progress stream is pinged by ProgressFlow, as every stream is; the SDK's
    // comments, read through it as messages, marked the stream written (so the gateway never
    // pinged) and counted as notifications read (so more than MAX_UNREAD_FRAMES went unread).
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !streams, keepAliveMs: 0 })
    await server.connect(transport)
    const followed = record !== undefined && flow !== undefined
    if (followed) record.sink.defer(record)
    let response: Response | undefined
    try {
      response = await Promise.race([transport.handleRequest(call.httpRequest, { parsedBody: sdk.withoutTaskAugmentation(call.body) }), droppedReply])
    } catch (error) {
      if (followed) record.sink.end(record)
      throw error
    }
    // A cancelled call answered as JSON: Streamable HTTP wants JSON or SSE for a POST carrying a
    // request, and the spec no response for it, so an SSE stream that ends with no message (the
    // SDK client reads it and stops; it rejected the call when it sent the cancel).
    if (response === undefined) {
      if (followed) record.sink.end(record)
      return new Response('', { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } })
    }
    // A JSON response is complete here; an SSE response closes its transport when the last reply is written.
    if (flow === undefined) {
      await server.close()
      // The session id comes with the InitializeResult (MCP, "Session Management"), never with a
      // refused initialize (a -32602 is a 200 too). Only initialize's small answer is read here.
      if (isInitialize(call.body)) {
        const answer = await jsonAnswer(response)
        if (answer !== undefined) {
          response = answerWith(response, answer)
          if (isResult(answer)) response.headers.set('mcp-session-id', crypto.randomUUID())
        }
      }
      // JSON-RPC 2.0 §6: a batch is answered with an array, even of one reply; the SDK's transport
      // sends a batch's lone reply bare. (An SSE answer sends each reply as its own event, batch or
      // not; a batch of notifications only is 202 with no body.)
      if (Array.isArray(call.body) && requestCount(call.body) === 1) {
        const answer = await jsonAnswer(response)
        if (answer !== undefined) response = answerWith(response, Array.isArray(answer) ? answer : [answer])
      }
      // A client that left before its answer is logged as the chat route logs it: 499 (no one reads this).
      return record?.outcome === 'cancelled' && call.httpRequest.signal.aborted ? new Response(null, { status: CLIENT_CLOSED_REQUEST }) : response
    }
    // The stream's end writes the line (and puts back the idle timeout a long tool lifted).
    const ended = (left: boolean) => {
      if (record === undefined) return
      // A client gone before the answer: `cancelled`, unless the call already has its outcome.
      if (left) record.outcome ??= 'cancelled'
      record.sink.end(record)
    }
    if (response.headers.get('content-type')?.startsWith('text/event-stream')) {
      // In svc_open_streams from here to its end, once (the tool's own chat stream, read in
      // this process, is not counted again: pipeline.ts).
      const metrics = this.metrics
      if (metrics) metrics.openStreams += 1
      return flow.wrap(response, left => {
        if (metrics) metrics.openStreams -= 1
        ended(left)
      })
    }
    ended(false)
    return response
  }
}

// The session a request names: an Mcp-Session-Id the client got at initialize and sends back. It
// is kept nowhere (any instance answers any request) and checked for nothing but its form: all it
// does is tell apart, for notifications/cancelled, the calls of hosts that share one approval
// (in-flight-calls.ts); a client naming another's session could only cancel calls of its own grant.
const SESSION_ID = /^[\x21-\x7e]{1,128}$/

function sessionOf(request: Request): string | null {
  const session = request.headers.get('mcp-session-id')
  return session !== null && SESSION_ID.test(session) ? session : null
}

/** True for an initialize request alone (never in a batch: refused there). */
function isInitialize(body: unknown): boolean {
  return !Array.isArray(body) && (body as { method?: unknown } | null)?.method === 'initialize'
}

/**
 * The JSON-RPC message (or batch) a 200 JSON answer carries; undefined, with the body unread, for
 * any other answer (SSE, 202, an HTTP error). Once read, the answer is sent with `answerWith`.
 */
async function jsonAnswer(response: Response): Promise<unknown> {
  if (response.status !== 200 || !response.headers.get('content-type')?.startsWith('application/json')) return undefined
  return response.json()
}

/** True for a JSON-RPC success response (a reply with a `result`). */
function isResult(message: unknown): boolean {
  return typeof message === 'object' && message !== null && !Array.isArray(message) && 'result' in message
}

/** The answer (its status and headers) carrying `message` as its body. */
function answerWith(response: Response, message: unknown): Response {
  return new Response(JSON.stringify(message), { status: response.status, headers: response.headers })
}

/** The requests (messages with a method and an id) in the message or batch. */
function requestCount(body: unknown): number {
  const messages = Array.isArray(body) ? body : [body]
  return messages.filter(message => typeof (message as { method?: unknown } | null)?.method === 'string' && (message as { id?: unknown }).id !== undefined).length
}

/** True when a tools/call in the message (or batch) asks for progress notifications. */
function wantsProgress(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body]
  return messages.some(message => {
    const params = (message as { method?: unknown; params?: { _meta?: { progressToken?: unknown } } } | null)?.params
    return (message as { method?: unknown } | null)?.method === 'tools/call' && params?._meta?.progressToken !== undefined
  })
}
