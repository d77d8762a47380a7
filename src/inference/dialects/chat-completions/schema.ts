import { t } from 'elysia'
import { documentedOnly, JsonInteger, MaxCharacters } from '../../../http/openapi-schemas'
import { HOSTED_LIMITS } from '../hosted-tool-schema'
import { IMAGE_URL_RULES } from '../image-url'
import { Metadata } from '../metadata-schema'

// OpenAI Chat Completions request body (the fields the gateway understands). Unknown fields are
// rejected, as OpenAI itself does ("Unrecognized request argument"), rather than silently dropped.

const TextPart = t.Object({ type: t.Literal('text'), text: t.String() }, { additionalProperties: false })
const ImagePart = t.Object(
  {
    type: t.Literal('image_url'),
    image_url: t.Object({ url: t.String({ minLength: 1, description: `${IMAGE_URL_RULES} Or a base64 data URL (data:image/…;base64,…) of at most 1 MiB decoded.` }), detail: t.Optional(t.Union([t.Literal('auto'), t.Literal('low'), t.Literal('high')])) }, { additionalProperties: false }),
  },
  { additionalProperties: false },
)
const FilePart = t.Object(
  {
    type: t.Literal('file'),
    file: t.Object(
      {
        file_data: t.Optional(t.String()),
        filename: t.Optional(t.String()),
        file_id: t.Optional(t.String({ description: 'Refused (400): there is no file upload API; send the document inline as file_data (a base64 data URL)' })),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)
// Audio is not available on the API (spec §1); the part is recognised so the refusal is clear.
const AudioPart = t.Object({ type: t.Literal('input_audio'), input_audio: t.Unknown() }, { description: 'Refused (400): audio input is not available on this API' })
const RefusalPart = t.Object({ type: t.Literal('refusal'), refusal: t.String() }, { additionalProperties: false })

// A system or user message of no parts is refused in decode.ts (a tool result may be empty).
const NOT_EMPTY = 'A string, or at least one content part (an empty array is a 400)'
const UserContent = t.Union([t.String(), t.Array(t.Union([TextPart, ImagePart, FilePart, AudioPart]))], { description: NOT_EMPTY })
const TextContent = t.Union([t.String(), t.Array(TextPart)])

const ToolCall = t.Object(
  {
    id: t.String({ minLength: 1 }),
    type: t.Literal('function'),
    function: t.Object(
      {
        name: t.String({ minLength: 1 }),
        arguments: t.String(),
        // The openai SDK's stream and parse helpers add this output-only field to a strict call
        // (the arguments parsed); a reply appended to the history carries it back. Not read.
        parsed_arguments: t.Optional(t.Unknown()),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)

const SystemMessage = t.Object(
  { role: t.Union([t.Literal('system'), t.Literal('developer')]), content: t.Union([t.String(), t.Array(TextPart)], { description: NOT_EMPTY }), name: t.Optional(t.String()) },
  { additionalProperties: false },
)
const UserMessage = t.Object({ role: t.Literal('user'), content: UserContent, name: t.Optional(t.String()) }, { additionalProperties: false })
const AssistantMessage = t.Object(
  {
    role: t.Literal('assistant'),
    content: t.Optional(t.Union([t.String(), t.Null(), t.Array(t.Union([TextPart, RefusalPart]))])),
    name: t.Optional(t.String()),
    tool_calls: t.Optional(t.Array(ToolCall)),
    refusal: t.Optional(t.Union([t.String(), t.Null()])),
    // Reasoning returned by the gateway (or vLLM/DeepSeek) and sent back by the client.
    reasoning_content: t.Optional(t.Union([t.String(), t.Null()])),
    // Output-only fields that SDKs echo back when a reply is appended to the history
    // (`parsed` is the openai SDK's own); they carry nothing to send upstream.
    annotations: t.Optional(t.Array(t.Unknown())),
    audio: t.Optional(t.Null()),
    function_call: t.Optional(t.Null()),
    parsed: t.Optional(t.Unknown()),
  },
  { additionalProperties: false },
)
const ToolMessage = t.Object({ role: t.Literal('tool'), tool_call_id: t.String({ minLength: 1 }), content: TextContent }, { additionalProperties: false })

/** One Chat Completions message (also Fusion's conversation format). */
export const ChatMessage = t.Union([SystemMessage, UserMessage, AssistantMessage, ToolMessage])

const FunctionTool = t.Object(
  {
    type: t.Literal('function'),
    function: t.Object(
      {
        name: t.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', error: 'tool function names must be 1-64 letters, digits, underscores or dashes' }),
        description: t.Optional(t.String()),
        parameters: t.Optional(t.Record(t.String(), t.Unknown())),
        strict: t.Optional(t.Union([t.Boolean(), t.Null()])),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)
// Hosted tools (web fetch and search, the gateway's extension) with the limits it applies; any
// other key is refused by name in decode.ts (hosted-tool-options.ts).
const HostedTool = t.Object(
  { type: t.Union([t.Literal('web_fetch'), t.Literal('web_search')]), ...HOSTED_LIMITS },
  { additionalProperties: true, description: 'Hosted web_fetch or web_search in this turn (the same as the web_fetch / web_search switches, with limits)' },
)

const ToolChoice = t.Union([
  t.Literal('auto'),
  t.Literal('none'),
  t.Literal('required'),
  t.Object({ type: t.Literal('function'), function: t.Object({ name: t.String() }, { additionalProperties: false }) }, { additionalProperties: false }),
])

const ResponseFormat = t.Union([
  t.Object({ type: t.Literal('text') }, { additionalProperties: false }),
  t.Object({ type: t.Literal('json_object') }, { additionalProperties: false }),
  t.Object(
    {
      type: t.Literal('json_schema'),
      json_schema: t.Object(
        {
          name: MaxCharacters(64, { minLength: 1 }),
          description: t.Optional(t.String()),
          schema: t.Optional(t.Record(t.String(), t.Unknown())),
          strict: t.Optional(t.Union([t.Boolean(), t.Null()])),
        },
        { additionalProperties: false },
      ),
    },
    { additionalProperties: false },
  ),
])

export const ChatCompletionsBody = t.Object(
  {
    model: MaxCharacters(256, { minLength: 1 }),
    messages: t.Array(ChatMessage, { minItems: 1 }),
    stream: t.Optional(t.Union([t.Boolean(), t.Null()])),
    stream_options: t.Optional(t.Union([t.Object({ include_usage: t.Optional(t.Boolean()), include_obfuscation: t.Optional(t.Boolean()) }, { additionalProperties: false }), t.Null()])),
    tools: t.Optional(t.Array(t.Union([FunctionTool, HostedTool]))),
    tool_choice: t.Optional(ToolChoice),
    parallel_tool_calls: t.Optional(t.Boolean()),
    temperature: t.Optional(t.Union([t.Number({ minimum: 0, maximum: 2 }), t.Null()])),
    top_p: t.Optional(t.Union([t.Number({ minimum: 0, maximum: 1 }), t.Null()])),
    max_tokens: t.Optional(t.Union([JsonInteger({ minimum: 1 }), t.Null()])),
    max_completion_tokens: t.Optional(t.Union([JsonInteger({ minimum: 1 }), t.Null()])),
    stop: t.Optional(t.Union([t.String(), t.Array(t.String(), { maxItems: 4 }), t.Null()])),
    seed: t.Optional(t.Union([JsonInteger(), t.Null()])),
    user: t.Optional(MaxCharacters(256)),
    // OpenAI's successors of `user`: the end user's id (kept for the gateway, never forwarded,
    // as `user` is) and a cache-routing hint (accepted, not used), as on the Responses route.
    safety_identifier: t.Optional(t.Union([MaxCharacters(256), t.Null()])),
    prompt_cache_key: t.Optional(t.Union([MaxCharacters(1024), t.Null()])),
    response_format: t.Optional(ResponseFormat),
    // Nullable as OpenAI documents it (the SDK's types say `| null`): null is no effort asked, as on the Responses route.
    reasoning_effort: t.Optional(t.Union([t.Literal('minimal'), t.Literal('low'), t.Literal('medium'), t.Literal('high'), t.Literal('xhigh'), t.Literal('max'), t.Null()])),
    n: t.Optional(t.Union([t.Literal(1), t.Null()], { error: 'n must be 1: one choice per request' })),
    presence_penalty: t.Optional(t.Union([t.Number({ minimum: -2, maximum: 2 }), t.Null()], { description: 'Only 0 or null: penalties are not applied (any other value is a 400)' })),
    frequency_penalty: t.Optional(t.Union([t.Number({ minimum: -2, maximum: 2 }), t.Null()], { description: 'Only 0 or null: penalties are not applied (any other value is a 400)' })),
    logprobs: t.Optional(t.Union([t.Boolean(), t.Null()], { description: 'Only false or null: log probabilities are not offered (true is a 400)' })),
    top_logprobs: t.Optional(t.Union([JsonInteger({ minimum: 0, maximum: 20 }), t.Null()], { description: 'Only 0 or null: log probabilities are not offered (any other value is a 400)' })),
    // Accepted with the values the gateway honours (as on the Responses route); others are a 400 naming them.
    service_tier: t.Optional(t.Union([t.String(), t.Null()], { description: 'auto or default (accepted, no effect); any other tier is a 400' })),
    verbosity: t.Optional(t.Union([t.Literal('low'), t.Literal('medium'), t.Literal('high'), t.Null()], { description: 'Only medium (or null) is honoured; low and high are a 400' })),
    modalities: t.Optional(t.Union([t.Array(t.Union([t.Literal('text'), t.Literal('audio')])), t.Null()], { description: 'Text only: audio output is a 400' })),
    metadata: t.Optional(t.Union([Metadata, t.Null()])),
    store: t.Optional(t.Union([t.Boolean(), t.Null()], { description: 'Only false or null: the gateway keeps no completions (true is a 400)' })),
    // Documented nullable by OpenAI (the SDK's types say `| null`): null, or an empty bias, is no
    // request at all; anything else asks for what the gateway does not offer and is a 400 naming it.
    logit_bias: t.Optional(t.Union([t.Record(t.String(), t.Number()), t.Null()], { description: 'Only {} or null: token biases are not applied (any other value is a 400)' })),
    prediction: t.Optional(t.Union([t.Record(t.String(), t.Unknown()), t.Null()], { description: 'Only null: predicted outputs are not supported (a prediction is a 400)' })),
    audio: t.Optional(t.Union([t.Record(t.String(), t.Unknown()), t.Null()], { description: 'Only null: audio output is not supported (audio parameters are a 400)' })),
    // Hosted tools as body flags (spec §4.7); tool entries of the same types work too.
    web_fetch: t.Optional(t.Boolean()),
    web_search: t.Optional(t.Boolean()),
    uncensored: t.Optional(t.Boolean()),
  },
  { additionalProperties: false },
)

export type ChatCompletionsRequest = typeof ChatCompletionsBody.static

/**
 * The non-streamed reply (documented loosely: the official SDK's types are the reference).
 * Documented only, not checked per reply (see documentedOnly).
 */
export const ChatCompletionResponse = documentedOnly(t.Object(
  {
    id: t.String(),
    object: t.Literal('chat.completion'),
    created: JsonInteger(),
    model: t.String(),
    choices: t.Array(t.Object({ index: JsonInteger(), message: t.Record(t.String(), t.Unknown()), finish_reason: t.String() }, { additionalProperties: true })),
    usage: t.Object({ prompt_tokens: JsonInteger(), completion_tokens: JsonInteger(), total_tokens: JsonInteger() }, { additionalProperties: true }),
  },
  {
    additionalProperties: true,
    description: 'A chat.completion object; with stream: true, text/event-stream chat.completion.chunk events ending in [DONE]' },
))
