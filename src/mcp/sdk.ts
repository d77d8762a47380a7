/**
 * The parts of the MCP SDK the hosted server uses, in one module that McpService imports on the
 * first POST /mcp (src/lib/lazy.ts): the SDK brings zod, zod-to-json-schema and ajv, ~240
 * modules that a gateway serving only chat never needs (bench/README.md, "Boot footprint").
 */
export { Server } from '@modelcontextprotocol/sdk/server/index.js'
export { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
export { CancelledNotificationSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js'

import { z } from 'zod'

/**
 * tools/call as the SDK's protocol layer parses it before any handler: loosely. Registered with
 * the strict CallToolRequestSchema, a request whose params do not fit (`arguments` an array) was
 * answered -32603 (an internal error) with zod's dump; the SDK's Server still checks the strict
 * schema next, and answers a mismatch -32602 (invalid params), which is what the caller did wrong.
 */
export const LooseCallToolRequestSchema = z.object({ method: z.literal('tools/call'), params: z.unknown() })
