import type { Static, TObject } from '@sinclair/typebox'
import type { Principal } from '../../keys/principal'

/** What a tool call knows about its caller and request. */
export interface ToolContext {
  principal: Principal
  requestId: string
  /** The HTTP request of the tools/call (its headers, its log line). */
  httpRequest: Request
  /**
   * Ends the tool's upstream work: aborts when the client leaves (the request's signal) or
   * cancels the call (notifications/cancelled, mcp/in-flight-calls.ts). Tools watch this one,
   * never the request's signal alone.
   */
  signal: AbortSignal
  disableIdleTimeout?: () => void
  /**
   * Present only when the client asked for progress (a `progressToken`): sends
   * notifications/progress on the SSE response. `progress` must increase; `total`, when known,
   * is the value `progress` reaches at the end.
   */
  progress?: (progress: number, message?: string, total?: number) => void
  /**
   * With `progress`: undefined while the client keeps up with the notifications; else resolves
   * once it has read enough (true) or has gone (false). A tool that reports fast awaits it.
   */
  ready?: () => Promise<boolean> | undefined
}

/** A tool's answer: text for the model, and structured content matching its output schema. */
export interface ToolResult {
  text: string
  structured?: Record<string, unknown>
  /** The work ran but failed as a whole (a Fusion run whose every participant failed): still a result, with its details. */
  isError?: boolean
}

/**
 * One MCP tool (src/mcp/tools/<name>.ts): its JSON Schema (TypeBox), description and handler.
 * A tool throws ApiError for failures: the server turns payment, rate-limit and auth refusals
 * into JSON-RPC errors and everything else into an `isError` result.
 */
export interface McpTool<S extends TObject = TObject> {
  name: string
  title: string
  description: string
  inputSchema: S
  outputSchema?: TObject
  /** Billed tools take one inference request from the caller's key and org buckets, like the HTTP routes. */
  billed: boolean
  annotations?: { readOnlyHint?: boolean; openWorldHint?: boolean; idempotentHint?: boolean; destructiveHint?: boolean }
  run(args: Static<S>, context: ToolContext): Promise<ToolResult>
}

/** Widens a concrete tool for the registry list. */
export function tool<S extends TObject>(definition: McpTool<S>): McpTool {
  return definition as unknown as McpTool
}
