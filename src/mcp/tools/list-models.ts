import { Type } from '@sinclair/typebox'
import type { Catalog } from '../../catalog/catalog'
import { apiEntry } from '../../catalog/routes'
import { tool } from './types'

/** svc.list_models: the live catalog, as GET /api/v1/models shows it. Free and unmetered. */
export function listModelsTool(catalog: Catalog) {
  return tool({
    name: 'svc.list_models',
    title: 'List models',
    description:
      'Lists the models this gateway serves: ids to pass to svc.chat, the privacy levels each is offered at ' +
      '(anonymous, private, confidential, encrypted), capabilities, context length and prices (USD nanos per million tokens). Free.',
    inputSchema: Type.Object(
      {
        privacy_level: Type.Optional(
          Type.Union([Type.Literal('anonymous'), Type.Literal('private'), Type.Literal('confidential'), Type.Literal('encrypted')], {
            description: 'Only models offered at this level',
          }),
        ),
      },
      { additionalProperties: false },
    ),
    outputSchema: Type.Object({ models: Type.Array(Type.Object({ id: Type.String() })) }),
    billed: false,
    annotations: { readOnlyHint: true, openWorldHint: false, idempotentHint: true },
    async run(args) {
      const models = catalog.list({ level: args.privacy_level }).map(apiEntry)
      const lines = models.map(model => `${model.id} (${model.privacy_levels.join(', ')}; context ${model.context_length} tokens)`)
      return { text: lines.length > 0 ? lines.join('\n') : 'No models match.', structured: { models } }
    },
  })
}
