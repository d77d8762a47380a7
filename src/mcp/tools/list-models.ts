import { Type } from '@sinclair/typebox'
import type { Catalog } from '../../catalog/catalog'
import { apiEntry } from '../../catalog/routes'
import { CatalogEntry } from '../../catalog/schema'
import { tool } from './types'

/** svc.list_models: the live catalog, as GET /api/v1/models shows it. Free and unmetered. */
export function listModelsTool(catalog: Catalog) {
  return tool({
    name: 'svc.list_models',
    title: 'List models',
    description:
      'Lists the models this gateway serves: ids to pass to svc.chat, the privacy levels each is offered at ' +
      '(privacy_levels: anonymous, private, confidential, encrypted), capabilities, context length and prices (USD nanos per million tokens). ' +
      'privacy_tier keeps only the models offered at that level, as on GET /v1/models. Free.',
    inputSchema: Type.Object(
      {
        // The name of the HTTP routes' query parameter (spec §4.11), so one word filters everywhere.
        privacy_tier: Type.Optional(
          Type.Union([Type.Literal('anonymous'), Type.Literal('private'), Type.Literal('confidential'), Type.Literal('encrypted')], {
            description: 'Only models offered at this privacy level',
          }),
        ),
      },
      { additionalProperties: false },
    ),
    outputSchema: Type.Object({ models: Type.Array(CatalogEntry) }),
    billed: false,
    annotations: { readOnlyHint: true, openWorldHint: false, idempotentHint: true },
    async run(args) {
      const models = catalog.list({ level: args.privacy_tier }).map(apiEntry)
      const lines = models.map(model => `${model.id} (${model.privacy_levels.join(', ')}; context ${model.context_length} tokens)`)
      return { text: lines.length > 0 ? lines.join('\n') : 'No models match.', structured: { models } }
    },
  })
}
