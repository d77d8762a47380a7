import { t } from 'elysia'
import { documentedOnly, JsonInteger, MaxCharacters } from '../../../http/openapi-schemas'
import { plainPattern } from '../../../http/validation-message'
import { HOSTED_LIMITS, hint, MAX_CONTENT_TOKENS } from '../hosted-tool-schema'
import { IMAGE_URL_RULES } from '../image-url'
import { ToolCallCaller } from '../tool-call-caller'

// Anthropic Messages request body (the fields the gateway understands). Unknown fields are
// rejected rather than silently dropped. `cache_control` is accepted everywhere Anthropic allows
// it: an Anthropic backend is sent each hint where the client put it (prompt caching); other
// backends ignore them, the answer being the same without. How many breakpoints a request may
// set (4) is the upstream's to judge: its 400 reaches the client with its message.

const CACHE_TTL_RULE = 'The cache lifetime: "5m" (the default) or "1h"; cache writes are billed at the model\'s write price for that lifetime'
const cacheControl = (description: string) =>
  t.Optional(
    t.Union(
      [
        t.Object(
          { type: t.Literal('ephemeral'), ttl: t.Optional(t.Union([t.Literal('5m'), t.Literal('1h')], { description: CACHE_TTL_RULE })) },
          { additionalProperties: false },
        ),
        t.Null(),
      ],
      { description },
    ),
  )
const CacheControl = cacheControl('A prompt-cache breakpoint: sent to Anthropic backends on this block, ignored by other backends')
// Citations are requested per document and returned on text blocks; the gateway has no citations
// channel, so a request that enables them is refused in decode.ts.
const CitationsConfig = t.Optional(
  t.Union([t.Object({ enabled: t.Optional(t.Boolean()) }, { additionalProperties: false }), t.Null()], {
    description: 'enabled: true is refused (400): the gateway has no citations channel',
  }),
)

const TextBlock = t.Object(
  { type: t.Literal('text'), text: t.String(), cache_control: CacheControl, citations: t.Optional(t.Union([t.Array(t.Unknown()), t.Null()])) },
  { additionalProperties: false },
)
const ImageSource = t.Union([
  t.Object({ type: t.Literal('base64'), media_type: t.String(), data: t.String() }, { additionalProperties: false }),
  t.Object({ type: t.Literal('url'), url: t.String({ minLength: 1, description: IMAGE_URL_RULES }) }, { additionalProperties: false }),
  // Provider-hosted files are not available on this API (spec §1): recognised so the refusal is clear.
  t.Object(
    { type: t.Literal('file'), file_id: t.String() },
    { additionalProperties: false, description: 'Refused (400): file ids are not available on this API; send the image inline (base64) or by URL' },
  ),
])
const ImageBlock = t.Object({ type: t.Literal('image'), source: ImageSource, cache_control: CacheControl }, { additionalProperties: false })
// Documents are request-local (spec §1): no fetching by URL, no hosted file ids. The other
// sources are recognised so that decode.ts refuses them by name.
const REFUSED_DOCUMENT = { additionalProperties: false, description: 'Refused (400): send the document inline, as a base64 PDF or a text/plain source' }
const DocumentSource = t.Union([
  t.Object({ type: t.Literal('base64'), media_type: t.String(), data: t.String() }, { additionalProperties: false }),
  t.Object({ type: t.Literal('text'), media_type: t.String(), data: t.String() }, { additionalProperties: false }),
  t.Object({ type: t.Literal('url'), url: t.String() }, REFUSED_DOCUMENT),
  t.Object({ type: t.Literal('content'), content: t.Unknown() }, REFUSED_DOCUMENT),
  t.Object({ type: t.Literal('file'), file_id: t.String() }, REFUSED_DOCUMENT),
])
const DocumentBlock = t.Object(
  {
    type: t.Literal('document'),
    source: DocumentSource,
    title: t.Optional(t.Union([t.String(), t.Null()])),
    context: t.Optional(t.Union([t.String(), t.Null()])),
    citations: CitationsConfig,
    cache_control: CacheControl,
  },
  { additionalProperties: false },
)
// Signatures are opaque; an empty one comes back from answers whose upstream does not sign.
const ThinkingBlock = t.Object({ type: t.Literal('thinking'), thinking: t.String(), signature: t.String() }, { additionalProperties: false })
const RedactedThinkingBlock = t.Object({ type: t.Literal('redacted_thinking'), data: t.String() }, { additionalProperties: false })
const ToolUseBlock = t.Object(
  // `caller` as Anthropic returns it, so a transcript replays: a direct call (tool-call-caller.ts).
  { type: t.Literal('tool_use'), id: t.String({ minLength: 1 }), name: t.String({ minLength: 1 }), input: t.Unknown(), caller: ToolCallCaller, cache_control: CacheControl },
  { additionalProperties: false },
)
const ToolResultBlock = t.Object(
  {
    type: t.Literal('tool_result'),
    tool_use_id: t.String({ minLength: 1 }),
    // The canonical tool result is text: image and document blocks are refused in decode.ts.
    content: t.Optional(
      t.Union([t.String(), t.Array(t.Union([TextBlock, ImageBlock, DocumentBlock]))], {
        description: 'A string or text blocks: image and document blocks are refused (400), as a tool result is carried as text',
      }),
    ),
    is_error: t.Optional(t.Boolean()),
    cache_control: CacheControl,
  },
  { additionalProperties: false },
)

const ContentBlock = t.Union([TextBlock, ImageBlock, DocumentBlock, ThinkingBlock, RedactedThinkingBlock, ToolUseBlock, ToolResultBlock])

const Message = t.Object(
  {
    role: t.Union([t.Literal('user'), t.Literal('assistant')]),
    // Refused in decode.ts, as Anthropic refuses it.
    content: t.Union([t.String(), t.Array(ContentBlock)], { description: 'Empty ("" or []) only in a final assistant message (a prefill); anywhere else a 400' }),
  },
  { additionalProperties: false },
)

const CustomTool = t.Object(
  {
    name: MaxCharacters(128, { minLength: 1 }),
    description: t.Optional(t.String()),
    input_schema: t.Record(t.String(), t.Unknown()),
    strict: t.Optional(t.Boolean({ description: 'strict tool use: the tool input follows input_schema exactly (Anthropic strict, OpenAI-compatible function.strict)' })),
    type: t.Optional(t.Union([t.Literal('custom'), t.Null()])),
    cache_control: CacheControl,
  },
  { additionalProperties: false },
)
// Anthropic's hosted (server) tools are typed `<name>_<date>` (web_search_20250305,
// web_fetch_20250910, bash_20250124...). Which ones the gateway hosts, and which options each
// takes (any other key is a 400 naming it), is decided in decode.ts; the gateway applies the
// limits itself (enrich/web.ts), so they are documented here.
const ServerTool = t.Object(
  {
    type: t.String(plainPattern('^[a-z_]+_[0-9]{8}$', 'a dated server tool type such as web_search_20250305, web_fetch or web_search (the gateway\'s own), or "custom" (or none) for a tool of your own')),
    name: t.String(),
    ...HOSTED_LIMITS,
    max_content_tokens: MAX_CONTENT_TOKENS,
    citations: hint('web_fetch citations (the gateway has no citations channel)'),
    user_location: hint("web_search's user location (the search backend is not localised per request)"),
    cache_control: CacheControl,
  },
  { additionalProperties: true, description: 'A hosted web_search_* or web_fetch_* tool (other keys are refused by name)' },
)
// The gateway's own hosted tool types (spec §4.7), as on Chat Completions and Responses, with the
// same options there; `name` may be given, as Anthropic's tools carry one. Other keys: decode.ts.
const GatewayHostedTool = t.Object(
  { type: t.Union([t.Literal('web_fetch'), t.Literal('web_search')]), name: t.Optional(t.String()), ...HOSTED_LIMITS },
  { additionalProperties: true, description: 'Hosted web_fetch or web_search in this turn (the same as the web_fetch / web_search switches, with limits; other keys are refused by name)' },
)

const ToolChoice = t.Union([
  t.Object({ type: t.Literal('auto'), disable_parallel_tool_use: t.Optional(t.Boolean()) }, { additionalProperties: false }),
  t.Object({ type: t.Literal('any'), disable_parallel_tool_use: t.Optional(t.Boolean()) }, { additionalProperties: false }),
  t.Object({ type: t.Literal('tool'), name: t.String({ minLength: 1 }), disable_parallel_tool_use: t.Optional(t.Boolean()) }, { additionalProperties: false }),
  t.Object({ type: t.Literal('none') }, { additionalProperties: false }),
])

// `display: "omitted"` is recognised so that decode.ts can refuse it by name (see there).
const ThinkingDisplay = t.Optional(
  t.Union([t.Literal('summarized'), t.Literal('omitted'), t.Null()], { description: '"summarized" is sent to Anthropic backends; "omitted" is refused (400)' }),
)
const Thinking = t.Union([
  t.Object({ type: t.Literal('enabled'), budget_tokens: JsonInteger({ minimum: 1024 }), display: ThinkingDisplay }, { additionalProperties: false }),
  t.Object({ type: t.Literal('adaptive'), display: ThinkingDisplay }, { additionalProperties: false }),
  t.Object({ type: t.Literal('disabled') }, { additionalProperties: false }),
])

// Structured outputs (`format`, what the SDK's messages.parse() sends) and the effort level.
const OutputConfig = t.Object(
  {
    format: t.Optional(t.Union([t.Object({ type: t.Literal('json_schema'), schema: t.Record(t.String(), t.Unknown()) }, { additionalProperties: false }), t.Null()])),
    effort: t.Optional(t.Union([t.Literal('low'), t.Literal('medium'), t.Literal('high'), t.Literal('xhigh'), t.Literal('max'), t.Null()])),
  },
  {
    additionalProperties: false,
    description:
      'format: structured output (a json_schema response format on every backend; Anthropic output_config.format, OpenAI-compatible response_format). ' +
      'effort: a reasoning effort (xhigh and max as written to an Anthropic backend with adaptive thinking, else as high); refused (400) with thinking disabled',
  },
)

/** Fields shared by POST /v1/messages and POST /v1/messages/count_tokens. */
const common = {
  model: t.String({ minLength: 1 }),
  messages: t.Array(Message, { minItems: 1 }),
  system: t.Optional(t.Union([t.String(), t.Array(TextBlock)])),
  tools: t.Optional(t.Array(t.Union([CustomTool, ServerTool, GatewayHostedTool]))),
  tool_choice: t.Optional(ToolChoice),
  thinking: t.Optional(Thinking),
  output_config: t.Optional(OutputConfig),
  // Automatic prompt caching (the upstream puts the breakpoint on the last cacheable block), which
  // the SDK sends at the top level.
  cache_control: cacheControl('Automatic prompt caching: sent to Anthropic backends as it is, ignored by other backends'),
  // Hosted tools as body flags (spec §4.7, as on the other routes); tool entries work too.
  web_fetch: t.Optional(t.Boolean()),
  web_search: t.Optional(t.Boolean()),
}

export const MessagesBody = t.Object(
  {
    ...common,
    max_tokens: JsonInteger({ minimum: 1, error: 'max_tokens is required: a positive integer' }),
    metadata: t.Optional(t.Object({ user_id: t.Optional(t.Union([MaxCharacters(256), t.Null()])) }, { additionalProperties: false })),
    stop_sequences: t.Optional(t.Array(t.String())),
    stream: t.Optional(t.Boolean()),
    temperature: t.Optional(t.Number({ minimum: 0, maximum: 1 })),
    top_p: t.Optional(t.Number({ minimum: 0, maximum: 1 })),
    top_k: t.Optional(JsonInteger({ minimum: 0 })),
    service_tier: t.Optional(t.Union([t.Literal('auto'), t.Literal('standard_only')])),
    // The gateway's own extension, as on Chat Completions and Responses (README, Privacy levels).
    uncensored: t.Optional(t.Boolean({ description: "The gateway's extension: true selects a backend marked uncensored (a 400 where the model has none)" })),
    thread: t.Optional(
      t.Unknown({
        description:
          'Anthropic message threads (beta; the SDK\'s tool runner sends one by default): not supported, the conversation is not stored. ' +
          'Any value but null is 400 with error.details.error_code thread_unsupported_request, on which the SDK continues without a thread ' +
          'when given unsupportedRequestBehavior: "continue_unthreaded"; or pass thread: false',
      }),
    ),
  },
  { additionalProperties: false },
)

export type MessagesRequest = typeof MessagesBody.static

export const CountTokensBody = t.Object(common, { additionalProperties: false })

export type CountTokensRequest = typeof CountTokensBody.static

/**
 * The non-streamed reply (documented loosely: the official SDK's types are the reference).
 * Documented only, not checked per reply (see documentedOnly).
 */
export const MessageResponse = documentedOnly(t.Object(
  {
    id: t.String(),
    type: t.Literal('message'),
    role: t.Literal('assistant'),
    model: t.String(),
    content: t.Array(t.Record(t.String(), t.Unknown())),
    stop_reason: t.Union([t.String(), t.Null()]),
    stop_sequence: t.Union([t.String(), t.Null()]),
    usage: t.Object(
      {
        input_tokens: JsonInteger({ description: 'Prompt tokens neither read from nor written to the prompt cache' }),
        output_tokens: JsonInteger(),
        cache_read_input_tokens: t.Optional(JsonInteger({ description: "Prompt tokens read from the backend's prompt cache (an Anthropic backend's; 0 from others)" })),
        cache_creation_input_tokens: t.Optional(JsonInteger({ description: "Prompt tokens written to the backend's prompt cache on cache_control hints (an Anthropic backend's; 0 from others)" })),
        cache_creation: t.Optional(
          t.Object(
            { ephemeral_5m_input_tokens: JsonInteger(), ephemeral_1h_input_tokens: JsonInteger() },
            { additionalProperties: true, description: 'cache_creation_input_tokens by lifetime, as billed; present when there are writes' },
          ),
        ),
      },
      { additionalProperties: true },
    ),
  },
  {
    additionalProperties: true,
    description:
      'A message object; with stream: true, text/event-stream events message_start, content_block_start/_delta/_stop, ping, message_delta, message_stop (or error)',
  },
))

export const TokenCountResponse = t.Object(
  { input_tokens: JsonInteger({ description: 'Exact from an Anthropic backend; otherwise the gateway estimate (see the route description)' }) },
  { additionalProperties: false },
)
