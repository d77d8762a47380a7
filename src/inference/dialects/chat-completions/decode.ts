import { ApiError } from '../../../http/errors'
import type { ModelRoute } from '../../../catalog/types'
import type { ChatRequest, FunctionTool, Message, Part, ResponseFormat, ToolChoice } from '../../canonical'
import { addHostedTool, HOSTED_TOOL_OPTIONS } from '../hosted-tool-options'
import type { ChatCompletionsRequest } from './schema'
import { imageUrl } from '../image-url'
import { imageType, inlineBytes, parseDataUrl } from '../inline-data'
import { toolResultText } from '../tool-result-text'
import { REQUIRED_WITHOUT_TOOLS, unsupportedValue } from './unsupported-values'

type Body = ChatCompletionsRequest
type UserContent = Extract<Body['messages'][number], { role: 'user' }>['content']

/**
 * Chat Completions wire → canonical. Anything the gateway cannot honour is a 400 naming the
 * field; nothing is dropped silently (ARCHITECTURE.md §6).
 */
const unsupported = (param: string, message: string) => new ApiError('invalid_request', message, param)

/**
 * The values of fields the gateway cannot honour (unsupported-values.ts), refused naming the
 * field: the plain route's rules, which an Encrypted body's plaintext fields follow too.
 */
export function refuseUnsupportedValues(body: Readonly<Record<string, unknown>>): void {
  const refused = unsupportedValue(body)
  if (refused !== undefined) throw unsupported(refused.param, refused.message)
}

/** tool_choice "required" with no function tool to call. */
export const requiredWithoutTools = () => unsupported(REQUIRED_WITHOUT_TOOLS.param, REQUIRED_WITHOUT_TOOLS.message)

export function decodeChatCompletions(body: Body, route: ModelRoute): ChatRequest {
  refuseUnsupportedValues(body)

  const tools: FunctionTool[] = []
  const hosted: ChatRequest['hosted'] = { webSearch: body.web_search === true, webFetch: body.web_fetch === true }
  for (const [index, tool] of (body.tools ?? []).entries()) {
    if (tool.type === 'function' && 'function' in tool) {
      const fn = (tool as Extract<typeof tool, { type: 'function' }>).function
      tools.push({ name: fn.name, description: fn.description, parameters: fn.parameters ?? { type: 'object', properties: {} }, strict: fn.strict ?? undefined })
    } else if (tool.type === 'web_fetch' || tool.type === 'web_search') {
      addHostedTool(hosted, tool.type === 'web_fetch' ? 'fetch' : 'search', tool as Record<string, unknown>, `tools.${index}`, HOSTED_TOOL_OPTIONS)
    } else throw unsupported(`tools.${index}`, 'unsupported tool entry')
  }
  const names = new Set<string>()
  for (const tool of tools) {
    if (names.has(tool.name)) throw unsupported('tools', `duplicate tool name "${tool.name}"`)
    names.add(tool.name)
  }

  const messages = body.messages.map((message, index) => decodeMessage(message, index))
  const maxOutputTokens = body.max_completion_tokens ?? body.max_tokens ?? undefined
  // An empty stop sequence stops nothing: dropped here, for every backend (vLLM refuses one).
  const stop = (typeof body.stop === 'string' ? [body.stop] : (body.stop ?? [])).filter(sequence => sequence !== '')
  return {
    model: body.model,
    route,
    messages,
    tools,
    toolChoice: decodeToolChoice(body.tool_choice, names),
    parallelToolCalls: body.parallel_tool_calls,
    sampling: {
      temperature: body.temperature ?? undefined,
      topP: body.top_p ?? undefined,
      maxOutputTokens,
      stop: stop.length > 0 ? stop : undefined,
      seed: body.seed ?? undefined,
    },
    // `minimal` is OpenAI's smallest effort; the canonical scale starts at low.
    reasoning: body.reasoning_effort ? { effort: body.reasoning_effort === 'minimal' ? 'low' : body.reasoning_effort } : undefined,
    responseFormat: decodeResponseFormat(body.response_format),
    hosted,
    user: body.safety_identifier ?? body.user,
    stream: body.stream === true,
  }
}

function decodeMessage(message: Body['messages'][number], index: number): Message {
  const decoded = decodeRole(message, index)
  // The participant's name goes to backends that carry one (Chat Completions); tool messages have none.
  if ('name' in message && typeof message.name === 'string' && message.name !== '' && decoded.role !== 'tool') decoded.name = message.name
  return decoded
}

function decodeRole(message: Body['messages'][number], index: number): Message {
  // A system or user message of no parts says nothing: sent on, it would reach the upstream as an
  // empty turn (OpenAI refuses it too). An assistant's may be empty beside its tool_calls; an
  // empty one says nothing and is left out by backends that take no empty turn.
  if (message.role !== 'assistant' && message.role !== 'tool' && Array.isArray(message.content) && message.content.length === 0) {
    throw unsupported(`messages.${index}.content`, `messages.${index}.content must not be empty: a ${message.role} message needs at least one content part (or a string)`)
  }
  switch (message.role) {
    case 'system':
    case 'developer':
      return { role: 'system', parts: textParts(message.content) }
    case 'user':
      return { role: 'user', parts: userParts(message.content, index) }
    case 'tool':
      return { role: 'tool', parts: [{ type: 'tool-result', callId: message.tool_call_id, content: typeof message.content === 'string' ? message.content : toolResultText(message.content.map(part => part.text)) }] }
    case 'assistant': {
      const parts: Part[] = []
      if (message.reasoning_content) parts.push({ type: 'reasoning', text: message.reasoning_content })
      if (typeof message.content === 'string') {
        if (message.content !== '') parts.push({ type: 'text', text: message.content })
      } else if (Array.isArray(message.content)) {
        // A refusal is what the assistant said instead of an answer (as the Responses dialect reads it).
        for (const part of message.content) parts.push({ type: 'text', text: part.type === 'text' ? part.text : part.refusal })
      }
      // OpenAI's refused reply: content null and the refusal beside it, appended to the history as is.
      if (message.refusal) parts.push({ type: 'text', text: message.refusal })
      for (const call of message.tool_calls ?? []) parts.push({ type: 'tool-call', callId: call.id, name: call.function.name, arguments: call.function.arguments })
      return { role: 'assistant', parts }
    }
  }
}

function textParts(content: string | Array<{ type: 'text'; text: string }>): Part[] {
  return typeof content === 'string' ? [{ type: 'text', text: content }] : content.map(part => ({ type: 'text', text: part.text }))
}

function userParts(content: UserContent, index: number): Part[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }]
  return content.map((part, partIndex): Part => {
    const param = `messages.${index}.content.${partIndex}`
    if (part.type === 'text') return { type: 'text', text: (part as { text: string }).text }
    if (part.type === 'image_url') return decodeImage((part as { image_url: { url: string } }).image_url.url, `${param}.image_url.url`)
    if (part.type === 'file') return decodeFile((part as { file: { file_data?: string; filename?: string; file_id?: string } }).file, param)
    throw new ApiError('invalid_request', 'audio input is not available on this API', param)
  })
}

/**
 * A `file` content part: `file_data` is a base64 data URL (or bare base64, as some clients
 * send) of at most 1 MiB decoded; `file_id` names a provider-hosted file, which this API has
 * not (spec §1). The bytes become a canonical file part; enrichment extracts its text.
 */
function decodeFile(file: { file_data?: string; filename?: string; file_id?: string }, param: string): Part {
  if (file.file_id !== undefined) {
    throw new ApiError('invalid_request', 'file.file_id is not supported: there is no file upload API; send the document inline as file.file_data (a base64 data URL)', param)
  }
  if (file.file_data === undefined || file.file_data === '') throw new ApiError('invalid_request', 'file.file_data is required: a base64 data URL such as data:application/pdf;base64,...', param)
  const dataUrl = file.file_data.startsWith('data:') ? parseDataUrl(file.file_data) : undefined
  if (file.file_data.startsWith('data:') && dataUrl === undefined) throw new ApiError('invalid_request', 'file.file_data must be data:<type>;base64,<data>', param)
  const data = inlineBytes(dataUrl?.base64 ?? file.file_data, problem =>
    problem === 'malformed'
      ? new ApiError('invalid_request', 'file.file_data must be a base64 data URL (data:<type>;base64,<data>): its data is not base64', param)
      : new ApiError('invalid_request', 'inline files are limited to 1 MiB decoded (use POST /api/v1/attachments/parse for up to 4 MiB)', param),
  )
  const mediaType = dataUrl?.mediaType ?? 'application/octet-stream'
  const filename = file.filename?.trim() ? file.filename.slice(0, 255) : undefined
  return filename === undefined ? { type: 'file', mediaType, data } : { type: 'file', mediaType, filename, data }
}

/** An image URL or base64 data URL (the field `param`) → a canonical image part (shared with the Responses dialect). */
export function decodeImage(url: string, param: string): Part {
  if (url.startsWith('data:')) {
    const dataUrl = parseDataUrl(url)
    if (dataUrl === undefined) throw new ApiError('invalid_request', 'image data URLs must be data:<type>;base64,<data>', param)
    const mediaType = imageType(dataUrl.mediaType)
    if (!mediaType.startsWith('image/')) throw new ApiError('invalid_request', `unsupported image type ${mediaType}`, param)
    const data = inlineBytes(dataUrl.base64, problem =>
      problem === 'malformed' ? new ApiError('invalid_request', 'image data URLs must be data:<type>;base64,<data>: its data is not base64', param) : new ApiError('invalid_request', 'inline images are limited to 1 MiB decoded', param),
    )
    return { type: 'image', mediaType, data, param }
  }
  return { type: 'image', mediaType: 'image/*', data: imageUrl(url, param), param }
}

function decodeToolChoice(choice: Body['tool_choice'], names: Set<string>): ToolChoice | undefined {
  if (choice === undefined) return undefined
  if (typeof choice === 'string') {
    if (choice === 'required' && names.size === 0) throw requiredWithoutTools()
    return choice
  }
  if (!names.has(choice.function.name)) {
    throw new ApiError('invalid_request', `tool_choice names "${choice.function.name}", which is not among the tools`, 'tool_choice')
  }
  return { name: choice.function.name }
}

function decodeResponseFormat(format: Body['response_format']): ResponseFormat | undefined {
  if (format === undefined) return undefined
  if (format.type !== 'json_schema') return { type: format.type }
  const spec = format.json_schema
  return { type: 'json_schema', name: spec.name, schema: spec.schema ?? {}, strict: spec.strict ?? undefined, description: spec.description }
}
