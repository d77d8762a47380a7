import type { Static, TSchema } from '@sinclair/typebox'
import { TypeCompiler, type TypeCheck, type ValueError } from '@sinclair/typebox/compiler'
import { ValueErrorType } from '@sinclair/typebox/errors'
import type { ModelRoute } from '../../../catalog/types'
import { ApiError } from '../../../http/errors'
import { choiceText, explainUnion, problemOf } from '../../../http/validation-message'
import type { ChatRequest, Effort, FunctionTool, Message, Part, ResponseFormat, ToolChoice } from '../../canonical'
import { decodeImage } from '../chat-completions/decode'
import { inlineBytes, parseDataUrl } from '../inline-data'
import { addHostedTool, HOSTED_TOOL_OPTIONS, type HostedOption } from '../hosted-tool-options'
import { directCall } from '../tool-call-caller'
import { toolResultText } from '../tool-result-text'
import { HOSTED_WEB_TOOLS, FunctionCallItem, FunctionCallOutputItem, FunctionTool as FunctionToolSchema, MessageItem, ReasoningItem, type InputItem, type ResponsesRequest } from './schema'

type Body = ResponsesRequest
type Item = InputItem
type Content = Extract<Item, { role: string }>['content']
type WireTool = Static<typeof FunctionToolSchema>

// Compiled once: each input item and function tool is checked against the schema of its type.
const ITEM_CHECKS: Record<string, TypeCheck<TSchema>> = {
  message: TypeCompiler.Compile(MessageItem),
  function_call: TypeCompiler.Compile(FunctionCallItem),
  function_call_output: TypeCompiler.Compile(FunctionCallOutputItem),
  reasoning: TypeCompiler.Compile(ReasoningItem),
}
const FUNCTION_TOOL_CHECK = TypeCompiler.Compile(FunctionToolSchema)

/**
 * Marks an encrypted_content that carries an upstream's redacted reasoning (Anthropic's
 * redacted_thinking data) rather than the signature of visible reasoning. encrypted_content is
 * opaque to clients, so the gateway chooses its encoding; this prefix cannot begin a base64
 * signature.
 */
export const REDACTED_PREFIX = 'redacted:'

const unsupported = (param: string, message: string) => new ApiError('invalid_request', message, param)

// OpenAI's web_search options (WebSearchTool, WebSearchPreviewTool): filters.allowed_domains is
// applied, user_location and search_context_size are hints the gateway cannot apply (README).
// The gateway's own web_fetch takes its options on every route (HOSTED_TOOL_OPTIONS).
const WEB_SEARCH_OPTIONS: HostedOption[] = ['filters', 'user_location', 'search_context_size']

/**
 * Responses wire → canonical. Anything the gateway cannot honour is a 400 naming the field;
 * nothing is dropped silently (ARCHITECTURE.md §6). Nothing is stored, so nothing that refers
 * to stored state (store: true, previous_response_id, conversation, item_reference) is accepted.
 */
export function decodeResponses(body: Body, route: ModelRoute): ChatRequest {
  // Spec §4.10: Encrypted requests exist only on Chat Completions.
  if (route.level === 'encrypted') {
    throw unsupported('model', `${route.id} is an Encrypted model: the Responses API does not carry Encrypted requests; use POST /v1/chat/completions`)
  }
  refuseStoredState(body)
  refuseUnsupported(body)

  const tools: FunctionTool[] = []
  const hosted: ChatRequest['hosted'] = { webSearch: body.web_search === true, webFetch: body.web_fetch === true }
  for (const [index, tool] of (body.tools ?? []).entries()) {
    if (tool.type === 'function') {
      const fn = checked<WireTool>(FUNCTION_TOOL_CHECK, tool, `tools.${index}`)
      if (tools.some(existing => existing.name === fn.name)) throw unsupported(`tools.${index}`, `duplicate tool name "${fn.name}"`)
      tools.push({ name: fn.name, description: fn.description ?? undefined, parameters: fn.parameters ?? { type: 'object', properties: {} }, strict: fn.strict ?? undefined })
    } else if (tool.type === 'web_fetch') addHostedTool(hosted, 'fetch', tool, `tools.${index}`, HOSTED_TOOL_OPTIONS)
    else if ((HOSTED_WEB_TOOLS as readonly string[]).includes(tool.type)) addHostedTool(hosted, 'search', tool, `tools.${index}`, WEB_SEARCH_OPTIONS)
    else throw unsupported(`tools.${index}`, `tool type "${tool.type}" is not supported: function, web_search and web_fetch tools are`)
  }

  const effort = body.reasoning?.effort ?? undefined
  // `none` (reasoning off) has no carrier: a backend given no effort reasons at its default.
  if (effort === 'none') {
    throw unsupported('reasoning.effort', 'reasoning effort "none" is not supported: omit reasoning.effort for the model\'s default, or use minimal (= low), low, medium, high, xhigh or max')
  }
  // Checked here, before policy, so that the error names this API's fields.
  if (effort !== undefined && !route.capabilities.reasoning) throw unsupported('reasoning.effort', `model ${route.id} does not advertise reasoning controls`)
  // A summary (generate_summary is its deprecated name) asks for the reasoning text: Anthropic's
  // newer models omit it unless asked (display: "summarized"); auto, concise and detailed all ask
  // for it, as Anthropic has one summarised form. Without an effort OpenAI reasons at the model's
  // default and summarises, so this asks for reasoning at the backend's default. A model that does
  // not reason has nothing to summarise: OpenAI accepts a summary alone there, and so does this.
  const summary = body.reasoning?.summary ?? body.reasoning?.generate_summary ?? undefined
  const summarized = summary !== undefined && route.capabilities.reasoning ? { summarized: true } : undefined
  const maxOutputTokens = body.max_output_tokens ?? undefined
  if (maxOutputTokens !== undefined && maxOutputTokens > route.maxOutputTokens) {
    throw unsupported('max_output_tokens', `max_output_tokens ${maxOutputTokens} exceeds model ${route.id}'s maximum output of ${route.maxOutputTokens} tokens`)
  }

  const messages: Message[] = []
  if (body.instructions) messages.push({ role: 'system', parts: [{ type: 'text', text: body.instructions }] })
  messages.push(...decodeInput(body.input))
  if (!messages.some(message => message.role !== 'system')) throw unsupported('input', 'input must hold at least one message or item')

  return {
    model: body.model,
    route,
    messages,
    tools,
    toolChoice: decodeToolChoice(body.tool_choice, tools),
    parallelToolCalls: body.parallel_tool_calls ?? undefined,
    sampling: { temperature: body.temperature ?? undefined, topP: body.top_p ?? undefined, maxOutputTokens },
    // `minimal` is OpenAI's smallest effort; the canonical scale starts at low.
    reasoning: effort === undefined ? summarized : { effort: effort === 'minimal' ? 'low' : (effort as Effort), ...summarized },
    responseFormat: decodeFormat(body.text?.format),
    hosted,
    user: body.safety_identifier ?? body.user,
    stream: body.stream === true,
  }
}

function refuseStoredState(body: Body): void {
  if (body.store === true) throw unsupported('store', 'store: true is not supported: the gateway stores no responses (send store: false or omit it)')
  if (body.previous_response_id != null) {
    throw unsupported('previous_response_id', 'previous_response_id is not supported: the gateway stores no responses; send the whole conversation in input')
  }
  if (body.conversation != null) throw unsupported('conversation', 'conversation is not supported: the gateway stores no conversations; send the whole conversation in input')
  if (body.background === true) throw unsupported('background', 'background responses are not supported: they need stored responses')
  if (body.prompt != null) throw unsupported('prompt', 'stored prompt templates are not supported; send instructions and input')
}

function refuseUnsupported(body: Body): void {
  for (const [index, entry] of (body.include ?? []).entries()) {
    // Encrypted reasoning is always returned when the upstream signs its reasoning.
    if (entry !== 'reasoning.encrypted_content') throw unsupported(`include.${index}`, `include "${entry}" is not supported (only reasoning.encrypted_content)`)
  }
  if (body.truncation === 'auto') throw unsupported('truncation', 'truncation "auto" is not supported: the gateway never drops input items')
  if (body.top_logprobs) throw unsupported('top_logprobs', 'logprobs are not supported')
  if (body.max_tool_calls != null) throw unsupported('max_tool_calls', 'max_tool_calls is not supported')
  if (body.service_tier != null && body.service_tier !== 'auto' && body.service_tier !== 'default') {
    throw unsupported('service_tier', `service_tier "${body.service_tier}" is not supported (auto or default)`)
  }
  const verbosity = body.text?.verbosity
  if (verbosity != null && verbosity !== 'medium') throw unsupported('text.verbosity', `text.verbosity "${verbosity}" is not supported (only medium)`)
}

/**
 * Flat input items → role-grouped canonical messages. Consecutive assistant-side items
 * (reasoning, assistant messages, function calls) form one assistant turn, in their order, so
 * reasoning stays next to the calls it led to; each function_call_output is a tool message.
 */
function decodeInput(input: Body['input']): Message[] {
  if (typeof input === 'string') return [{ role: 'user', parts: [{ type: 'text', text: input }] }]
  const messages: Message[] = []
  const calls = new Set<string>()
  let assistant: Message | undefined
  const turn = (): Part[] => {
    if (assistant === undefined) {
      assistant = { role: 'assistant', parts: [] }
      messages.push(assistant)
    }
    return assistant.parts
  }
  for (const [index, raw] of input.entries()) {
    const param = `input.${index}`
    const type = raw.type ?? 'message'
    // Own keys only: "toString" names Object.prototype's function, not an item type.
    const check = typeof type === 'string' && Object.hasOwn(ITEM_CHECKS, type) ? ITEM_CHECKS[type] : undefined
    if (check === undefined) {
      if (type === 'item_reference') throw unsupported(param, 'item_reference is not supported: the gateway stores no items; send the items themselves')
      throw unsupported(`${param}.type`, `input item type "${type}" is not supported: message, function_call, function_call_output and reasoning are`)
    }
    const item = checked<Item>(check, raw, param)
    switch (item.type) {
      case undefined:
      case 'message': {
        const message = item as Extract<Item, { role: string }>
        // A message of no parts says nothing; sent on, it would reach the upstream as an empty
        // turn, or as none at all (OpenAI refuses it too). An empty string is the client's text.
        if (Array.isArray(message.content) && message.content.length === 0) {
          throw unsupported(`${param}.content`, `${param}.content must not be empty: a message needs at least one content part (or a string)`)
        }
        if (message.role === 'assistant') turn().push(...contentParts(message.content, 'assistant', param))
        else {
          assistant = undefined
          messages.push({ role: message.role === 'user' ? 'user' : 'system', parts: contentParts(message.content, message.role, param) })
        }
        break
      }
      case 'reasoning': {
        const part = reasoningPart(item as Extract<Item, { type: 'reasoning' }>)
        if (part) turn().push(part)
        break
      }
      case 'function_call': {
        const call = item as Extract<Item, { type: 'function_call' }>
        directCall(call.caller, `${param}.caller`)
        if (call.namespace != null) throw unsupported(`${param}.namespace`, 'function calls in a namespace are not supported')
        if (call.async === true) throw unsupported(`${param}.async`, 'async function calls are not supported')
        calls.add(call.call_id)
        turn().push({ type: 'tool-call', callId: call.call_id, name: call.name, arguments: call.arguments })
        break
      }
      case 'function_call_output': {
        const result = item as Extract<Item, { type: 'function_call_output' }>
        if (!calls.has(result.call_id)) {
          throw unsupported(`${param}.call_id`, `no function_call with call_id "${result.call_id}" precedes this function_call_output`)
        }
        assistant = undefined
        messages.push({ role: 'tool', parts: [{ type: 'tool-result', callId: result.call_id, content: toolOutput(result.output, `${param}.output`) }] })
        break
      }
    }
  }
  return messages
}

/** `value` as checked by `check`, or a 400 naming the first offending field under `param`. */
function checked<T>(check: TypeCheck<TSchema>, value: unknown, param: string): T {
  if (check.Check(value)) return value as T
  const first = check.Errors(value).First()
  const issue = first && deepest(first)
  const where = `${param}${(issue?.path ?? '').replaceAll('/', '.')}`
  if (issue === undefined) throw unsupported(param, `${param} is not valid`)
  if (issue.message === 'Unexpected property') throw unsupported(where, `unknown field "${where}"`)
  const custom = (issue.schema as { error?: unknown }).error
  if (typeof custom !== 'string' && issue.type === ValueErrorType.Union) {
    // A value none of a union's literals (a role, a status): the choices, not "Expected union value".
    const explained = explainUnion(issue)
    if ('choices' in explained) {
      const at = `${param}${explained.path.replaceAll('/', '.')}`
      throw unsupported(at, `${at}: should be ${choiceText(explained.choices)}`)
    }
  }
  // A pattern's meaning, never its regular expression (a filename's limit in characters).
  throw unsupported(where, `${where}: ${typeof custom === 'string' ? custom : problemOf(issue)}`)
}

/**
 * A union reports only that no variant matched. When the value names its `type` and a variant
 * has that type, that variant's own error is the one at fault (e.g. a content part's missing
 * `text`); a type no variant has keeps the union's message; otherwise the variant that got
 * furthest into the value (the longest path) is taken.
 */
function deepest(issue: ValueError): ValueError {
  if (issue.errors.length === 0) return issue
  const type = typeof issue.value === 'object' && issue.value !== null ? (issue.value as { type?: unknown }).type : undefined
  const variants = (issue.schema as { anyOf?: Array<{ properties?: { type?: { const?: unknown } } }> }).anyOf ?? []
  if (typeof type === 'string' && variants.some(variant => variant.properties?.type?.const !== undefined)) {
    const index = variants.findIndex(variant => variant.properties?.type?.const === type)
    const first = index === -1 ? undefined : issue.errors[index]?.First()
    return first ? deepest(first) : issue
  }
  let best = issue
  for (const variant of issue.errors) {
    const first = variant.First()
    const candidate = first && deepest(first)
    if (candidate && candidate.path.split('/').length > best.path.split('/').length) best = candidate
  }
  return best
}

/** A reasoning item → a reasoning part; the signature (or redacted data) rides in encrypted_content. */
function reasoningPart(item: Extract<Item, { type: 'reasoning' }>): Part | undefined {
  const encrypted = item.encrypted_content ?? undefined
  if (encrypted?.startsWith(REDACTED_PREFIX)) return { type: 'reasoning', text: '', signature: encrypted.slice(REDACTED_PREFIX.length), redacted: true }
  const content = (item.content ?? []).map(part => part.text).join('')
  const text = content !== '' ? content : item.summary.map(part => part.text).join('\n\n')
  if (text === '' && encrypted === undefined) return undefined
  return { type: 'reasoning', text, ...(encrypted !== undefined ? { signature: encrypted } : {}) }
}

function contentParts(content: Content, role: string, param: string): Part[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }]
  return content.map((part, partIndex): Part => {
    const where = `${param}.content.${partIndex}`
    switch (part.type) {
      case 'input_text':
      case 'output_text':
        return { type: 'text', text: part.text }
      case 'refusal':
        return { type: 'text', text: part.refusal }
      case 'input_image':
      case 'input_file':
        if (role !== 'user') throw unsupported(where, `${part.type} is only accepted in user messages`)
        return part.type === 'input_image' ? imagePart(part, where) : filePart(part, where)
    }
  })
}

function imagePart(part: { image_url?: string | null; file_id?: string | null }, param: string): Part {
  if (part.file_id != null) throw unsupported(`${param}.file_id`, 'file_id is not supported: there is no file storage; send image_url (an https URL or a base64 data URL)')
  if (!part.image_url) throw unsupported(`${param}.image_url`, 'input_image needs image_url (an https URL or a base64 data URL)')
  return decodeImage(part.image_url, `${param}.image_url`)
}

/** input_file with inline file_data (a base64 data URL, or bare base64) → a canonical file part. */
function filePart(part: { file_data?: string; file_id?: string | null; file_url?: string; filename?: string }, param: string): Part {
  if (part.file_id != null) throw unsupported(`${param}.file_id`, 'file_id is not supported: there is no file storage (spec §1); send file_data inline')
  if (part.file_url !== undefined) throw unsupported(`${param}.file_url`, 'file_url is not supported: send the document inline as file_data')
  if (part.file_data === undefined) throw unsupported(`${param}.file_data`, 'input_file needs file_data (a base64 data URL)')
  const dataUrl = parseDataUrl(part.file_data)
  const data = inlineBytes(dataUrl?.base64 ?? part.file_data, problem =>
    unsupported(`${param}.file_data`, problem === 'malformed' ? 'file_data must be a base64 data URL (data:<type>;base64,<data>)' : 'inline files are limited to 1 MiB decoded'),
  )
  if (data.byteLength === 0) throw unsupported(`${param}.file_data`, 'file_data is empty')
  // Bare base64 carries no type: the document parser recognises the format from its bytes.
  const mediaType = dataUrl?.mediaType ?? 'application/octet-stream'
  return { type: 'file', mediaType, ...(part.filename !== undefined ? { filename: part.filename } : {}), data }
}

/** function_call_output: a string, or text parts (the canonical tool result is text). */
function toolOutput(output: Extract<Item, { type: 'function_call_output' }>['output'], param: string): string {
  if (typeof output === 'string') return output
  return toolResultText(
    output.map((part, index) => {
      if (part.type === 'input_text') return part.text
      throw unsupported(`${param}.${index}`, `${part.type} in a function_call_output is not supported: tool results carry text`)
    }),
  )
}

function decodeToolChoice(choice: Body['tool_choice'], tools: FunctionTool[]): ToolChoice | undefined {
  if (choice === undefined) return undefined
  if (typeof choice === 'string') {
    if (choice === 'required' && tools.length === 0) throw unsupported('tool_choice', 'tool_choice "required" needs at least one function tool')
    return choice
  }
  if (choice.type !== 'function') throw unsupported('tool_choice', `tool_choice of type "${choice.type}" is not supported: auto, none, required or a function`)
  const name = (choice as { name: string }).name
  if (!tools.some(tool => tool.name === name)) throw unsupported('tool_choice', `tool_choice names "${name}", which is not among the tools`)
  return { name }
}

function decodeFormat(format: NonNullable<Body['text']>['format']): ResponseFormat | undefined {
  if (format === undefined) return undefined
  if (format.type !== 'json_schema') return { type: format.type }
  const spec = format as Extract<typeof format, { type: 'json_schema' }>
  return { type: 'json_schema', name: spec.name, schema: spec.schema, strict: spec.strict ?? undefined, description: spec.description }
}

/** Policy names Chat Completions fields; on this route the same checks concern these (renameParam). */
export const RESPONSES_PARAMS: Readonly<Record<string, string>> = { messages: 'input', max_tokens: 'max_output_tokens', reasoning_effort: 'reasoning.effort', response_format: 'text.format' }
