import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

/** The official MCP SDK client, connected over Streamable HTTP to `${baseUrl}/mcp` with a bearer token (and any extra headers). */
export async function connectMcp(baseUrl: string, bearer: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'svc-test', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${bearer}`, ...headers } } }))
  return client
}
