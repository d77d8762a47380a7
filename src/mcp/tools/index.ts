import type { Catalog } from '../../catalog/catalog'
import type { FusionDeps } from '../../fusion/service'
import type { PipelineDeps } from '../../inference/pipeline'
import type { WebService } from '../../web/service'
import { chatTool } from './chat'
import { chatFusionTool } from './chat-fusion'
import { listModelsTool } from './list-models'
import type { McpTool } from './types'
import { webFetchTool } from './web-fetch'
import { webSearchTool } from './web-search'

/** What the tools are built from: the same services the HTTP routes use. */
export interface ToolDeps {
  catalog: Catalog
  pipeline: PipelineDeps
  fusion: FusionDeps
  web: WebService
}

/** The registry: every tool the MCP server offers, one file each. */
export function createTools(deps: ToolDeps): McpTool[] {
  return [
    chatTool(deps.catalog, deps.pipeline),
    chatFusionTool(deps.catalog, deps.fusion, deps.web.searchBackend !== null),
    webSearchTool(deps.web),
    webFetchTool(deps.web),
    listModelsTool(deps.catalog),
  ]
}
