import type { ModelRoute } from '../../../catalog/types'
import { ApiError } from '../../../http/errors'
import type { ChatRequest, FunctionTool, Message, Part, ResponseFormat, ToolChoice } from '../../canonical'
import { toolArgumentsText } from '../../tool-input'
import { addHostedTool, HOSTED_TOOL_OPTIONS, type HostedOption } from '../hosted-tool-options'
import type { CountTokensRequest, MessagesRequest } from './schema'
import { cacheHint, hinted, longestHinted, type CacheControlWire } from './cache-hint'
import { imageUrl } from '../image-url'
import { directCall } from '../tool-call-caller'
import { toolResultText } from '../tool-result-text'
import { ANTHROPIC_IMAGE_TYPES, inlineBytes, MAX_INLINE_BYTES } from '../inline-data'

type Body = MessagesRequest
type Block = Exclude<Body['messages'][number]['content'], string>[number]


const invalid = (param: string, message: string) => new ApiError('invalid_request', message, param)

// Anthropic's options of its web tools (WebFetchTool20250910, WebSearchTool20250305 and their
// later dates). citations, user_location and cache_control are hints the gateway accepts and
// cannot apply (README); the others it applies.
const WEB_FETCH_OPTIONS: HostedOption[] = ['name', 'max_uses', 'allowed_domains', 'blocked_domains', 'max_content_tokens', 'citations', 'cache_control']
const WEB_SEARCH_OPTIONS: HostedOption[] = ['name', 'max_uses', 'allowed_domains', 'blocked_domains', 'user_location', 'cache_control']
// The gateway's own `{type: "web_fetch" | "web_search"}` takes its options on every route, and a name here.
const GATEWAY_TOOL_OPTIONS: HostedOption[] = ['name', ...HOSTED_TOOL_OPTIONS]

/**
 * Anthropic Messages wire → canonical. Anything the gateway cannot honour is a 400 naming the
 * field; nothing is dropped silently (ARCHITECTURE.md §6). Turn shapes:
 *
 * - `system` (string or text blocks) becomes one system message.
 * - A user turn's tool_result blocks become a `tool` message first (they answer the previous
 *   assistant turn), then its other blocks a user message, so every backend sees results
 *   right after the calls.
 * - Assistant thinking blocks become reasoning parts with their signature; redacted_thinking
 *   becomes a redacted reasoning part whose `signature` carries the opaque data. Their position
 *   among the turn's blocks is kept: Anthropic verifies them in place.
 */
export function decodeMessages(body: Body, route: ModelRoute): ChatRequest {
  // Message threads keep the conversation on the server; the gateway stores none. The SDK reads
  // this error code to carry on without a thread (its unsupportedRequestBehavior option).
  if (body.thread !== undefined && body.thread !== null) {
    throw new ApiError('invalid_request', 'message threads are not supported: the gateway does not store conversations; send the whole conversation in messages (SDK: thread: false)', 'thread', undefined, {
      error_code: 'thread_unsupported_request',
      unsupported: ['thread'],
    })
  }
  const request = decodeCommon(body, route)
  if (body.thinking?.type === 'enabled' && body.thinking.budget_tokens >= body.max_tokens) {
    throw invalid('thinking.budget_tokens', `thinking.budget_tokens (${body.thinking.budget_tokens}) must be less than max_tokens (${body.max_tokens})`)
  }
  const stop = body.stop_sequences?.filter(sequence => sequence !== '')
  request.sampling = {
    temperature: body.temperature,
    topP: body.top_p,
    topK: body.top_k,
    maxOutputTokens: body.max_tokens,
    stop: stop !== undefined && stop.length > 0 ? stop : undefined,
  }
  request.user = body.metadata?.user_id ?? undefined
  request.stream = body.stream === true
  return request
}

/** count_tokens takes the same prompt fields without the sampling ones. */
export function decodeCountTokens(body: CountTokensRequest, route: ModelRoute): ChatRequest {
  return decodeCommon(body, route)
}

function decodeCommon(body: CountTokensRequest, route: ModelRoute): ChatRequest {
  const tools: FunctionTool[] = []
  const hosted: ChatRequest['hosted'] = { webSearch: body.web_search === true, webFetch: body.web_fetch === true }
  for (const [index, tool] of (body.tools ?? []).entries()) {
    const type = tool.type ?? 'custom'
    if (type === 'custom') {
      const custom = tool as Extract<typeof tool, { input_schema: unknown }>
      const cache = cacheHint(custom.cache_control)
      tools.push({
        name: custom.name,
        ...(custom.description !== undefined ? { description: custom.description } : {}),
        parameters: custom.input_schema,
        ...(custom.strict !== undefined ? { strict: custom.strict } : {}),
        ...(cache !== undefined ? { cache } : {}),
      })
    } else if (type === 'web_fetch' || type === 'web_search') addHostedTool(hosted, type === 'web_fetch' ? 'fetch' : 'search', tool, `tools.${index}`, GATEWAY_TOOL_OPTIONS)
    else if (type.startsWith('web_search_')) addHostedTool(hosted, 'search', tool, `tools.${index}`, WEB_SEARCH_OPTIONS)
    else if (type.startsWith('web_fetch_')) addHostedTool(hosted, 'fetch', tool, `tools.${index}`, WEB_FETCH_OPTIONS)
    else throw invalid(`tools.${index}.type`, `the hosted tool "${type}" is not available on this gateway (hosted web_search, web_fetch and their dated web_search_* and web_fetch_* types are recognised)`)
  }
  const names = new Set<string>()
  for (const tool of tools) {
    if (names.has(tool.name)) throw invalid('tools', `duplicate tool name "${tool.name}"`)
    names.add(tool.name)
  }

  const messages: Message[] = []
  if (body.system !== undefined) {
    const parts: Part[] = typeof body.system === 'string' ? [{ type: 'text', text: body.system }] : body.system.map(block => hinted({ type: 'text', text: block.text }, block))
    if (parts.some(part => part.type === 'text' && part.text !== '')) messages.push({ role: 'system', parts })
  }
  body.messages.forEach((message, index) => {
    // Anthropic's rule: every message has content, except a final assistant one (an empty prefill).
    // Sent on, an empty user turn would reach an OpenAI-compatible upstream as one.
    const last = index === body.messages.length - 1 && message.role === 'assistant'
    if (!last && message.content.length === 0) {
      throw invalid(`messages.${index}.content`, `messages.${index}.content must not be empty: every message needs content, except a final assistant message (a prefill)`)
    }
    messages.push(...decodeTurn(message, index))
  })

  const { toolChoice, parallelToolCalls } = decodeToolChoice(body.tool_choice, names)
  const cache = cacheHint(body.cache_control)
  return {
    model: body.model,
    route,
    messages,
    tools,
    toolChoice,
    parallelToolCalls,
    sampling: {},
    reasoning: decodeReasoning(body),
    responseFormat: decodeOutputFormat(body.output_config?.format),
    hosted,
    ...(cache !== undefined ? { cache } : {}),
    stream: false,
  }
}

/**
 * `thinking` and `output_config.effort` → canonical reasoning (both requests; count_tokens sends
 * them to an Anthropic backend, whose count depends on them).
 *
 * - `adaptive` is reasoning at the backend's own default amount, steered by an effort if one is
 *   given: an Anthropic backend gets it in the form its binding takes (adaptive with
 *   `output_config.effort`, or a budget; thinking-budget.ts); an OpenAI-compatible one the
 *   effort as reasoning_effort, or none.
 * - An effort without thinking is a reasoning effort, as Chat Completions' reasoning_effort is
 *   (an Anthropic backend turns it into adaptive thinking at that effort, or a thinking budget,
 *   THINKING_BUDGET_BY_EFFORT, by its binding's form). With
 *   thinking disabled it is refused: the canonical effort is a reasoning effort, and Anthropic's
 *   "thorough answer without thinking" has no carrier on other backends.
 * - `xhigh` and `max` go as written to an Anthropic binding with adaptive thinking (the models
 *   that take them); elsewhere they are the backend's top (the `high` budget, reasoning_effort
 *   `high`): the most reasoning that backend can be asked for (thinking-budget.ts).
 * - `display: "summarized"` is forwarded to Anthropic (newer models omit the text by default);
 *   `omitted` is refused: OpenAI-compatible backends send the reasoning text, and the gateway
 *   does not strip it.
 */
function decodeReasoning(body: CountTokensRequest): ChatRequest['reasoning'] {
  const thinking = body.thinking
  const effort = body.output_config?.effort ?? undefined
  if (thinking?.type === 'disabled') {
    if (effort !== undefined) throw invalid('output_config.effort', 'output_config.effort asks for reasoning, which thinking {type: "disabled"} turns off: send one or the other')
    return undefined
  }
  if (thinking?.display === 'omitted') {
    throw invalid('thinking.display', 'thinking.display "omitted" is not supported on this gateway: thinking text is returned as the backend sends it (omit display, or send "summarized")')
  }
  const summarized = thinking?.display === 'summarized' ? { summarized: true } : {}
  const effortPart = effort !== undefined ? { effort } : {}
  if (thinking?.type === 'enabled') return { budgetTokens: thinking.budget_tokens, ...effortPart, ...summarized }
  if (thinking?.type === 'adaptive') return { adaptive: true, ...effortPart, ...summarized }
  return effort !== undefined ? { effort } : undefined
}

/**
 * Structured outputs → the canonical json_schema format. Anthropic's format has no name (the
 * canonical one needs one, and OpenAI requires it: "response") and no `strict`: it is left unset,
 * because OpenAI's strict mode would refuse schemas Anthropic takes (optional properties).
 */
function decodeOutputFormat(format: NonNullable<CountTokensRequest['output_config']>['format']): ResponseFormat | undefined {
  if (format == null) return undefined
  return { type: 'json_schema', name: 'response', schema: format.schema }
}

function decodeTurn(message: Body['messages'][number], index: number): Message[] {
  if (typeof message.content === 'string') return [{ role: message.role, parts: [{ type: 'text', text: message.content }] }]
  const param = (block: number) => `messages.${index}.content.${block}`
  if (message.role === 'assistant') {
    const parts = message.content.map((block, position) => hinted(assistantPart(block, param(position)), block))
    return [{ role: 'assistant', parts }]
  }
  const results: Part[] = []
  const rest: Part[] = []
  message.content.forEach((block, position) => {
    if (block.type === 'tool_result') results.push(toolResult(block, param(position)))
    else rest.push(hinted(userPart(block, param(position)), block))
  })
  const turns: Message[] = []
  if (results.length > 0) turns.push({ role: 'tool', parts: results })
  if (rest.length > 0 || results.length === 0) turns.push({ role: 'user', parts: rest })
  return turns
}

function assistantPart(block: Block, param: string): Part {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text }
    case 'thinking':
      return { type: 'reasoning', text: block.thinking, ...(block.signature !== '' ? { signature: block.signature } : {}) }
    case 'redacted_thinking':
      return { type: 'reasoning', text: '', signature: block.data, redacted: true }
    case 'tool_use':
      if (typeof block.input !== 'object' || block.input === null || Array.isArray(block.input)) throw invalid(`${param}.input`, 'tool_use.input must be a JSON object')
      directCall(block.caller, `${param}.caller`)
      return { type: 'tool-call', callId: block.id, name: block.name, arguments: toolArgumentsText(block.input as Record<string, unknown>) }
    default:
      throw invalid(param, `an assistant turn cannot carry a ${block.type} block`)
  }
}

function userPart(block: Block, param: string): Part {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text }
    case 'image':
      return image(block.source, param)
    case 'document':
      return documentPart(block, param)
    default:
      throw invalid(param, `a user turn cannot carry a ${block.type} block`)
  }
}

/**
 * A tool_result → a tool-result part. Its text blocks become one text (the canonical result is
 * text), so a cache hint on one of them can only go on the result itself (the breakpoint moves to
 * the result's end, caching a little more). Of the result's hints (its inner ones, then its own),
 * the longest-lived is kept, the latest on a tie: a 1-hour breakpoint is not lost to a later
 * 5-minute one (QA: [1h, 5m] inside one result kept only 5m).
 *
 * Anthropic refuses a 1-hour breakpoint after a 5-minute one. Merging to the longest cannot make
 * a valid request break that rule: in a valid one every breakpoint before the result is at least
 * as long as its first (longest) hint and every one after it at most as long as its last, so the
 * merged 1-hour one still follows only 1-hour ones. A request that already broke the rule may
 * come out valid; one that kept it keeps it.
 */
function toolResult(block: Extract<Block, { type: 'tool_result' }>, param: string): Part {
  let content = ''
  if (typeof block.content === 'string') content = block.content
  else if (block.content !== undefined) {
    // The canonical tool result is text: a result's text blocks are joined; images and documents
    // inside a result have no carrier on every backend, so they are refused rather than dropped.
    content = toolResultText(
      block.content.map((inner, position) => {
        if (inner.type !== 'text') throw invalid(`${param}.content.${position}`, `a tool_result can carry text blocks on this gateway, not ${inner.type} blocks`)
        return inner.text
      }),
    )
  }
  const hintedBlock = typeof block.content === 'object' ? (longestHinted<{ cache_control?: CacheControlWire }>([...block.content, block]) ?? block) : block
  return hinted({ type: 'tool-result', callId: block.tool_use_id, content, ...(block.is_error === true ? { isError: true } : {}) }, hintedBlock)
}

function base64Bytes(data: string, param: string, what: string): Uint8Array {
  return inlineBytes(data, problem => invalid(param, problem === 'malformed' ? `${what} data must be base64` : `inline ${what}s are limited to 1 MiB decoded`))
}

function image(source: Extract<Block, { type: 'image' }>['source'], param: string): Part {
  if (source.type === 'file') throw invalid(`${param}.source`, 'file ids are not available on this API: send the image inline (base64) or by URL')
  if (source.type === 'base64') {
    const mediaType = source.media_type.toLowerCase()
    if (!ANTHROPIC_IMAGE_TYPES.has(mediaType)) throw invalid(`${param}.source.media_type`, `unsupported image type ${source.media_type} (image/jpeg, image/png, image/gif, image/webp)`)
    return { type: 'image', mediaType, data: base64Bytes(source.data, `${param}.source.data`, 'image'), param }
  }
  return { type: 'image', mediaType: 'image/*', data: imageUrl(source.url, `${param}.source.url`), param }
}

function documentPart(block: Extract<Block, { type: 'document' }>, param: string): Part {
  if (block.citations?.enabled === true) throw invalid(`${param}.citations`, 'document citations are not supported on this gateway')
  const filename = block.title ?? undefined
  // Messages' `context` (what the user says about the document) is shown with its text.
  const context = block.context?.trim() ? { context: block.context } : {}
  const source = block.source
  if (source.type === 'base64') {
    if (source.media_type !== 'application/pdf') throw invalid(`${param}.source.media_type`, 'base64 documents must be application/pdf')
    return { type: 'file', mediaType: 'application/pdf', ...(filename !== undefined ? { filename } : {}), ...context, data: base64Bytes(source.data, `${param}.source.data`, 'document') }
  }
  if (source.type === 'text') {
    if (source.media_type !== 'text/plain') throw invalid(`${param}.source.media_type`, 'text documents must be text/plain')
    const data = new TextEncoder().encode(source.data)
    if (data.byteLength > MAX_INLINE_BYTES) throw invalid(`${param}.source.data`, 'inline documents are limited to 1 MiB')
    // Anthropic's text source is plain text: read as such, never sniffed as a file's bytes are.
    return { type: 'file', mediaType: 'text/plain', ...(filename !== undefined ? { filename } : {}), ...context, data, plainText: true }
  }
  // Documents are request-local (spec §1): no fetching by URL, no hosted file ids.
  throw invalid(`${param}.source.type`, `document sources of type ${source.type} are not supported: send a base64 PDF or a text/plain source`)
}

function decodeToolChoice(choice: Body['tool_choice'], names: Set<string>): { toolChoice?: ToolChoice; parallelToolCalls?: boolean } {
  if (choice === undefined) return {}
  const parallelToolCalls = 'disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use === true ? false : undefined
  switch (choice.type) {
    case 'none':
      return { toolChoice: 'none' }
    case 'auto':
      return { toolChoice: 'auto', parallelToolCalls }
    case 'any':
      if (names.size === 0) throw invalid('tool_choice', 'tool_choice "any" needs at least one tool')
      return { toolChoice: 'required', parallelToolCalls }
    case 'tool':
      if (!names.has(choice.name)) throw invalid('tool_choice.name', `tool_choice names "${choice.name}", which is not among the tools`)
      return { toolChoice: { name: choice.name }, parallelToolCalls }
  }
}

/**
 * Policy and the backends name Chat Completions fields; on this route the same checks concern
 * these (renameParam), as `body` sent them: reasoning by `thinking` or else `output_config.effort`.
 * Anthropic's envelope shows the field in the message (QA: a Messages client was told of "reasoning_effort").
 */
export function messagesParams(body: Pick<Body, 'thinking' | 'output_config'>): Readonly<Record<string, string>> {
  const reasoning = body.thinking === undefined && body.output_config?.effort !== undefined ? 'output_config.effort' : 'thinking'
  return { reasoning_effort: reasoning, response_format: 'output_config.format' }
}
