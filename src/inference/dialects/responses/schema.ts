import { t, type Static } from 'elysia'
import { documentedOnly, JsonInteger, MaxCharacters } from '../../../http/openapi-schemas'
import { plainPattern } from '../../../http/validation-message'
import { IMAGE_URL_RULES } from '../image-url'
import { Metadata } from '../metadata-schema'
import { ToolCallCaller } from '../tool-call-caller'

// OpenAI Responses request body (the fields the gateway understands). Unknown fields are rejected,
// as OpenAI itself does, rather than silently dropped. Item and tool types the gateway cannot
// carry are recognised (OtherItem, OtherTool) so that decode.ts can refuse them by name.

// The description goes on the union: the document merges it with its null, keeping the outer keys.
const nullable = <T extends Parameters<typeof t.Optional>[0]>(schema: T, description?: string) =>
  t.Optional(t.Union([schema, t.Null()], description === undefined ? {} : { description }))

const InputText = t.Object({ type: t.Literal('input_text'), text: t.String() }, { additionalProperties: false })
const InputImage = t.Object(
  {
    type: t.Literal('input_image'),
    image_url: nullable(t.String(), `${IMAGE_URL_RULES} Or a base64 data URL (data:image/…;base64,…) of at most 1 MiB decoded.`),
    file_id: nullable(t.String()),
    detail: t.Optional(t.Union([t.Literal('auto'), t.Literal('low'), t.Literal('high'), t.Literal('original')])),
  },
  { additionalProperties: false },
)
const InputFile = t.Object(
  {
    type: t.Literal('input_file'),
    file_data: t.Optional(t.String()),
    file_id: nullable(t.String()),
    file_url: t.Optional(t.String()),
    filename: t.Optional(MaxCharacters(1024)),
    detail: t.Optional(t.Union([t.Literal('auto'), t.Literal('low'), t.Literal('high')])),
  },
  { additionalProperties: false },
)
// Output content a client echoes back when it appends a previous response's output to `input`
// (`parsed` is the openai SDK's own output-only field: its stream helper and parse() add it to
// every content part of a message, refusals included; it is ignored).
const OutputText = t.Object(
  { type: t.Literal('output_text'), text: t.String(), annotations: t.Optional(t.Array(t.Unknown())), logprobs: t.Optional(t.Array(t.Unknown())), parsed: t.Optional(t.Unknown()) },
  { additionalProperties: false },
)
const Refusal = t.Object({ type: t.Literal('refusal'), refusal: t.String(), parsed: t.Optional(t.Unknown()) }, { additionalProperties: false })

export const MessageContent = t.Union([InputText, InputImage, InputFile, OutputText, Refusal], {
  error: 'a content part must be a valid input_text, input_image, input_file, output_text or refusal part',
})
const Status = nullable(t.Union([t.Literal('in_progress'), t.Literal('completed'), t.Literal('incomplete')]))

export const MessageItem = t.Object(
  {
    type: t.Optional(t.Literal('message')),
    role: t.Union([t.Literal('user'), t.Literal('system'), t.Literal('developer'), t.Literal('assistant')]),
    content: t.Union([t.String(), t.Array(MessageContent)], { error: 'content must be a string or an array of content parts' }),
    id: nullable(t.String()),
    status: Status,
    phase: nullable(t.Union([t.Literal('commentary'), t.Literal('final_answer')])),
  },
  { additionalProperties: false },
)
export const FunctionCallItem = t.Object(
  {
    type: t.Literal('function_call'),
    call_id: t.String({ minLength: 1 }),
    name: t.String({ minLength: 1 }),
    arguments: t.String(),
    id: nullable(t.String()),
    status: Status,
    // The openai SDK's stream helper adds this output-only field to function calls.
    parsed_arguments: t.Optional(t.Unknown()),
    // Fields of OpenAI's own function_call items, so a history from OpenAI replays: their defaults
    // (a direct call, not async) pass; a namespace or a programmatic caller is refused by name.
    caller: ToolCallCaller,
    namespace: nullable(t.String()),
    async: nullable(t.Boolean()),
  },
  { additionalProperties: false },
)
export const FunctionCallOutputItem = t.Object(
  {
    type: t.Literal('function_call_output'),
    call_id: t.String({ minLength: 1 }),
    output: t.Union([t.String(), t.Array(t.Union([InputText, InputImage, InputFile], { error: 'an output part must be a valid input_text, input_image or input_file part' }))], {
      error: 'output must be a string or an array of parts',
    }),
    id: nullable(t.String()),
    status: Status,
  },
  { additionalProperties: false },
)
export const ReasoningItem = t.Object(
  {
    type: t.Literal('reasoning'),
    id: nullable(t.String()),
    summary: t.Array(t.Object({ type: t.Literal('summary_text'), text: t.String() }, { additionalProperties: false })),
    content: nullable(t.Array(t.Object({ type: t.Literal('reasoning_text'), text: t.String() }, { additionalProperties: false }))),
    encrypted_content: nullable(t.String()),
    status: Status,
  },
  { additionalProperties: false },
)
export type InputItem = Static<typeof MessageItem> | Static<typeof FunctionCallItem> | Static<typeof FunctionCallOutputItem> | Static<typeof ReasoningItem>

/**
 * In the body schema, items and tools are only objects with a `type`: decode.ts checks each
 * against the schema of its type, so a malformed item is a 400 naming that item and field
 * (a schema union could only say that `input` matched none of its shapes), and an item or tool
 * type the gateway cannot carry is refused by name.
 */
const Typed = (description: string) => t.Object({ type: t.Optional(t.String()) }, { additionalProperties: true, description })

export const FunctionTool = t.Object(
  {
    type: t.Literal('function'),
    name: t.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', error: 'tool function names must be 1-64 letters, digits, underscores or dashes' }),
    description: nullable(t.String()),
    parameters: nullable(t.Record(t.String(), t.Unknown())),
    strict: nullable(t.Boolean()),
  },
  { additionalProperties: false },
)
/** OpenAI's hosted web search (with its dated aliases) and the gateway's hosted web fetch (spec §4.7). */
export const HOSTED_WEB_TOOLS = ['web_search', 'web_search_preview', 'web_search_preview_2025_03_11', 'web_search_2025_08_26', 'web_fetch'] as const

const ToolChoice = t.Union([
  t.Literal('auto'),
  t.Literal('none'),
  t.Literal('required'),
  t.Object({ type: t.Literal('function'), name: t.String() }, { additionalProperties: false }),
  // Hosted-tool, allowed_tools, mcp and custom choices: accepted here only to be refused by name in decode.ts.
  t.Object(
    { type: t.String(plainPattern('^(?!function$)', 'a hosted tool choice type (a function choice is {type: "function", name})')) },
    {
      additionalProperties: true,
      description: 'Refused (400): a choice of any other type (a hosted tool such as web_search, allowed_tools, mcp, custom) is not supported; use auto, none, required or a function',
    },
  ),
])

const TextFormat = t.Union([
  t.Object({ type: t.Literal('text') }, { additionalProperties: false }),
  t.Object({ type: t.Literal('json_object') }, { additionalProperties: false }),
  t.Object(
    {
      type: t.Literal('json_schema'),
      name: t.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', error: 'text.format.name must be 1-64 letters, digits, underscores or dashes' }),
      schema: t.Record(t.String(), t.Unknown()),
      description: t.Optional(t.String()),
      strict: nullable(t.Boolean()),
    },
    { additionalProperties: false },
  ),
])

const Effort = t.Union(['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'].map(name => t.Literal(name)))
const SummaryLevel = t.Union([t.Literal('auto'), t.Literal('concise'), t.Literal('detailed')])
const SUMMARY_NOTE =
  'Asks for the reasoning text (Anthropic display: summarized; every value alike); without effort, reasoning at the model\'s default. On a model without reasoning: accepted, no effect'

const TypedInputItem = Typed(
  'An input item: message (the default type), function_call, function_call_output or reasoning, each with the fields OpenAI gives it. ' +
    'Any other type (item_reference among them) is a 400, and so is a key the item\'s type does not have',
)

export const ResponsesBody = t.Object(
  {
    model: MaxCharacters(256, { minLength: 1 }),
    input: t.Union([t.String(), t.Array(TypedInputItem)], {
      error: 'input must be a string or an array of input items',
    }),
    instructions: nullable(t.String()),
    stream: nullable(t.Boolean()),
    stream_options: nullable(t.Object({ include_obfuscation: t.Optional(t.Boolean()) }, { additionalProperties: false })),
    tools: t.Optional(
      t.Array(
        t.Object(
          { type: t.String() },
          {
            additionalProperties: true,
            description:
              'A function tool, or a hosted web_search / web_fetch tool. web_search (and its dated and preview aliases) takes filters.allowed_domains (applied: ' +
              'results outside it are left out) and user_location and search_context_size (accepted, not applied); web_fetch, the gateway\'s own, takes ' +
              'max_uses, allowed_domains and blocked_domains (applied, as on Messages). Any other key is a 400 naming it',
          },
        ),
      ),
    ),
    tool_choice: t.Optional(ToolChoice),
    parallel_tool_calls: nullable(t.Boolean()),
    reasoning: nullable(
      t.Object(
        {
          // `none` (reasoning off) has no carrier: a backend given no effort reasons at its default (decode.ts).
          effort: nullable(Effort, '"none" is refused (400): reasoning cannot be turned off; omit effort for the model\'s default. minimal is sent as low'),
          summary: nullable(SummaryLevel, SUMMARY_NOTE),
          generate_summary: nullable(SummaryLevel, `Deprecated name of summary. ${SUMMARY_NOTE}`),
        },
        { additionalProperties: false },
      ),
    ),
    max_output_tokens: nullable(JsonInteger({ minimum: 1 })),
    temperature: nullable(t.Number({ minimum: 0, maximum: 2 })),
    top_p: nullable(t.Number({ minimum: 0, maximum: 1 })),
    text: t.Optional(
      t.Object(
        { format: t.Optional(TextFormat), verbosity: nullable(t.Union([t.Literal('low'), t.Literal('medium'), t.Literal('high')]), 'Only medium (or null) is honoured; low and high are a 400') },
        { additionalProperties: false },
      ),
    ),
    user: t.Optional(MaxCharacters(256)),
    safety_identifier: nullable(MaxCharacters(256)),
    metadata: nullable(Metadata),
    include: nullable(t.Array(t.String()), 'Only reasoning.encrypted_content (returned anyway when the upstream signs its reasoning); any other entry is a 400'),
    // Accepted as the cache-routing hint it is; nothing is stored under it.
    prompt_cache_key: nullable(MaxCharacters(1024)),
    service_tier: nullable(t.String(), 'auto or default (accepted, no effect); any other tier is a 400'),
    truncation: nullable(t.Union([t.Literal('auto'), t.Literal('disabled')]), 'Only disabled (or null): the gateway never drops input items, so auto is a 400'),
    top_logprobs: nullable(JsonInteger({ minimum: 0, maximum: 20 }), 'Only 0 or null: log probabilities are not offered (any other value is a 400)'),
    max_tool_calls: nullable(JsonInteger({ minimum: 1 }), 'Not supported: only null (any value is a 400)'),
    // Not supported (nothing is stored): present so the refusal names them (decode.ts).
    store: nullable(t.Boolean(), 'Only false or null: the gateway stores no responses (true is a 400)'),
    previous_response_id: nullable(t.String(), 'Not supported: only null (any id is a 400; send the whole conversation in input)'),
    conversation: t.Optional(t.Unknown({ description: 'Not supported: only null (any other value is a 400; send the whole conversation in input)' })),
    background: nullable(t.Boolean(), 'Only false or null: background responses need stored ones (true is a 400)'),
    prompt: t.Optional(t.Unknown({ description: 'Not supported: only null (a stored prompt template is a 400; send instructions and input)' })),
    // Gateway extensions, as on /v1/chat/completions.
    web_fetch: t.Optional(t.Boolean()),
    web_search: t.Optional(t.Boolean()),
    uncensored: t.Optional(t.Boolean()),
  },
  { additionalProperties: false },
)

export type ResponsesRequest = typeof ResponsesBody.static

/** The non-streamed reply (documented loosely: the official SDK's types are the reference). */
export const ResponseObject = documentedOnly(t.Object(
  {
    id: t.String(),
    object: t.Literal('response'),
    created_at: JsonInteger(),
    status: t.String(),
    model: t.String(),
    output: t.Array(t.Record(t.String(), t.Unknown()), {
      description: 'reasoning, message and function_call items, each with its status: completed, or incomplete for the item max_output_tokens cut',
    }),
    usage: t.Union([t.Record(t.String(), t.Unknown()), t.Null()]),
  },
  {
    additionalProperties: true,
    description:
      'A `response` object; with stream: true, text/event-stream events from response.created to response.completed ' +
      '(or response.incomplete / response.failed), each with its sequence_number',
  },
))
