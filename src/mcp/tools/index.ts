import type { Catalog } from '../../catalog/catalog'
import type { PipelineDeps } from '../../inference/pipeline'
import { chatTool } from './chat'
import { listModelsTool } from './list-models'
import type { McpTool } from './types'

/** What the tools are built from (the services the HTTP routes use). */
export interface ToolDeps {
  catalog: Catalog
  pipeline: PipelineDeps
}

/**
 * The registry: every tool the MCP server offers, one file each. Only working tools are listed;
 * svc.chat_fusion, svc.web_search and svc.web_fetch have their schemas in ./planned.ts and are
 * added here once their services exist.
 */
export function createTools(deps: ToolDeps): McpTool[] {
  return [chatTool(deps.catalog, deps.pipeline), listModelsTool(deps.catalog)]
}
