/**
 * The parts of the MCP SDK the hosted server uses, in one module that McpService imports on the
 * first POST /mcp (src/lib/lazy.ts): the SDK brings zod, zod-to-json-schema and ajv, ~240
 * modules that a gateway serving only chat never needs (bench/README.md, "Boot footprint").
 */
export { Server } from '@modelcontextprotocol/sdk/server/index.js'
export { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
export { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js'
