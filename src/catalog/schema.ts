import { Type } from '@sinclair/typebox'
import { t } from 'elysia'

// Wire schemas for GET /v1/models and GET /api/v1/models (spec §4.11: "response shape: not
// shown", so /v1 follows OpenAI's list shape and /api/v1 is ours).

// Elysia's `t.Integer` coerces from strings (meant for query params) and documents as a union;
// these are plain JSON integers, so use TypeBox 0.34's own (the package `t` is built on).
const Count = Type.Integer

const Level = t.Union([t.Literal('anonymous'), t.Literal('private'), t.Literal('confidential'), t.Literal('encrypted')])

/** `?privacy_tier=`: the only query parameter; anything else is 400. */
export const ModelsQuery = t.Object(
  {
    privacy_tier: t.Optional(
      t.Union([t.Literal('anonymous'), t.Literal('private'), t.Literal('confidential'), t.Literal('encrypted')], {
        error: 'privacy_tier must be one of anonymous, private, confidential, encrypted',
        description: 'Only models offered at this privacy level',
      }),
    ),
  },
  { additionalProperties: false },
)

export const OpenAIModel = t.Object(
  {
    id: t.String({ description: 'The id to send as `model`: the unsuffixed id, or `<id>:confidential` / `<id>:encrypted`', examples: ['demo-private'] }),
    object: t.Literal('model'),
    created: Count({ description: 'Unix seconds; the gateway does not track release dates, so always 0' }),
    owned_by: t.String({ examples: ['svc'] }),
    privacy_level: Level,
    context_length: Count({ minimum: 1 }),
    max_output_tokens: Count({ minimum: 1 }),
  },
  { description: 'One callable model id (one entry per privacy level offered)' },
)

export const OpenAIModelList = t.Object({ object: t.Literal('list'), data: t.Array(OpenAIModel) })

const PerMillion = (description: string) => t.String({ pattern: '^[0-9]+$', description, examples: ['100000000'] })

export const CatalogEntry = t.Object(
  {
    id: t.String({ description: 'Logical model id (the unsuffixed id)', examples: ['demo-private'] }),
    object: t.Literal('model'),
    privacy_levels: t.Array(Level, {
      description: 'Levels offered, in order anonymous, private, confidential, encrypted. The unsuffixed id is the anonymous or private level; `:confidential` and `:encrypted` select those',
    }),
    capabilities: t.Object({
      tools: t.Boolean({ description: 'Function tools' }),
      reasoning: t.Boolean({ description: 'Reasoning controls and reasoning output' }),
      vision: t.Boolean({ description: 'Image input' }),
      file_input: t.Boolean({ description: 'File content parts (documents turned into text)' }),
      supports_web_fetch: t.Boolean({ description: 'Hosted web fetch inside chat' }),
      supports_web_search: t.Boolean({ description: 'Hosted web search inside chat' }),
    }),
    pricing: t.Object(
      {
        input_per_mtok_nanos: PerMillion('Input tokens, USD nanos per million'),
        output_per_mtok_nanos: PerMillion('Output tokens, USD nanos per million'),
        cached_input_per_mtok_nanos: PerMillion('Cached input tokens, USD nanos per million (the input price unless set lower)'),
        cache_write_input_per_mtok_nanos: PerMillion(
          'Input tokens written to the prompt cache for 5 minutes (Anthropic backends, on cache_control hints), USD nanos per million (1.25× the input price, rounded up, unless set)',
        ),
        cache_write_1h_input_per_mtok_nanos: PerMillion('Input tokens written to the prompt cache for 1 hour, USD nanos per million (2× the input price unless set)'),
        reasoning_per_mtok_nanos: PerMillion('Reasoning tokens, USD nanos per million (the output price unless set)'),
      },
      { description: 'Integer USD nanos per million tokens, as decimal strings (1000000000 = 1 USD). Each charge is rounded up to a whole nano' },
    ),
    context_length: Count({ minimum: 1, description: 'Tokens of input and output together' }),
    max_output_tokens: Count({ minimum: 1 }),
  },
  { description: 'A logical model with its privacy levels, capabilities and prices' },
)

export const CatalogList = t.Object({ data: t.Array(CatalogEntry) })
