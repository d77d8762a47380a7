import type { ThinkingForm } from '../../catalog/types'
import type { ChatRequest, Effort, Message, Part, ToolChoice } from '../../inference/canonical'
import { parseToolInput } from '../../inference/tool-input'
import { type AnthropicCacheControl, cacheControl } from './cache-control'
import { type AnthropicImageSource, imageSource } from './image-source'
import { type AnthropicThinking, type ThinkingPlan, thinkingConfig } from './thinking-budget'
import { assignToolIds } from './tool-ids'
import { UnsupportedRequestError } from './unsupported-request'

export { RAW_ARGUMENTS_KEY } from '../../inference/tool-input'
export { UnsupportedRequestError } from './unsupported-request'

// Anthropic Messages API request shapes (https://docs.anthropic.com/en/api/messages), only the
// parts we send. `anthropic-version: 2023-06-01`.

/** A text block: of a message, or of `system` when one carries a cache hint. */
export type AnthropicTextBlock = { type: 'text'; text: string; cache_control?: AnthropicCacheControl }

/** One content block of a request message; `cache_control` only where the client set a hint. */
export type AnthropicContentBlock =
  | AnthropicTextBlock
  | { type: 'image'; source: AnthropicImageSource; cache_control?: AnthropicCacheControl }
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'redacted_thinking'; data: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown>; cache_control?: AnthropicCacheControl }
  | { type: 'tool_result'; tool_use_id: string; content?: string; is_error?: boolean; cache_control?: AnthropicCacheControl }

/** One turn. Anthropic has no system or tool roles: system is top-level, tool results are user blocks. */
export interface AnthropicMessage {
  role: 'user' | 'assistant'
  content: AnthropicContentBlock[]
}

/** A client tool. */
export interface AnthropicTool {
  name: string
  description?: string
  input_schema: Record<string, unknown>
  /** Strict tool use: the input is guaranteed to follow input_schema. */
  strict?: boolean
  cache_control?: AnthropicCacheControl
}

/** `disable_parallel_tool_use` lives on the choice; `none` cannot carry it. */
export type AnthropicToolChoice =
  | { type: 'auto' | 'any'; disable_parallel_tool_use?: boolean }
  | { type: 'tool'; name: string; disable_parallel_tool_use?: boolean }
  | { type: 'none' }

/** The POST /v1/messages body. */
export interface AnthropicRequestBody {
  model: string
  max_tokens: number
  messages: AnthropicMessage[]
  /** Text blocks only when one of them carries a cache hint (convertMessages). */
  system?: string | AnthropicTextBlock[]
  tools?: AnthropicTool[]
  tool_choice?: AnthropicToolChoice
  thinking?: AnthropicThinking
  /** Structured outputs (the JSON schema the answer's text follows) and the effort level. */
  output_config?: { format?: { type: 'json_schema'; schema: Record<string, unknown> }; effort?: Effort }
  temperature?: number
  top_p?: number
  top_k?: number
  stop_sequences?: string[]
  /** Automatic prompt caching: Anthropic puts the breakpoint on the last cacheable block. */
  cache_control?: AnthropicCacheControl
  /** `false` only for a collected call (provider.ts). */
  stream: boolean
}

/**
 * ChatRequest → Messages body. Decisions, each forced by the upstream's validation rules:
 *
 * - All system messages (wherever they appear) are joined with a blank line into `system`.
 * - Consecutive messages of one role merge into one turn; `tool` messages are user turns, so
 *   consecutive tool results land in one user turn, and tool_result blocks are moved to the
 *   front of their turn (Anthropic requires them before any text).
 * - With thinking on, an assistant turn that calls tools must start with its (signed) thinking
 *   blocks, replayed unchanged. A turn that already starts with thinking keeps its order exactly
 *   (interleaved thinking between tool calls is verified in place); only a turn whose reasoning
 *   came after other blocks (a history from another format) has its thinking moved to the front. Reasoning without a signature (from another provider) cannot be verified by
 *   Anthropic and is not sent. Redacted reasoning carries its opaque `data` in `signature`.
 * - Empty text parts are skipped, and blank ones in assistant turns: Anthropic rejects text blocks
 *   without non-whitespace. A final (prefill) assistant turn's text loses its trailing
 *   whitespace, and the turn the thinking it ends with, both of which Anthropic refuses there.
 * - Tool call ids are respelled where Anthropic's pattern refuses them, and made unique where a
 *   history repeats them, with their results (tool-ids.ts).
 * - `user`, `seed` and hosted-tool flags are never sent.
 * - Cache hints become `cache_control` on the block, tool or system block they came with, and at
 *   the top level (cache-control.ts); a part left out (empty text, which Anthropic refuses
 *   anyway) leaves its hint out with it. `system` goes as text blocks when one of them carries a
 *   hint, else as one string, as before.
 * - A history with tool calls but no `tools` (a client that stopped offering them, a summary
 *   turn) is refused by Anthropic, which needs every tool_use's tool defined: each tool named in
 *   the history is declared with an open object schema, and tool_choice `none` keeps the model
 *   from calling what the client did not offer.
 * - Whitespace-only stop sequences (`"\n"`) Anthropic refuses, and dropping them would let the
 *   answer run past where the client wanted it cut: refused here, naming the field, before any
 *   upstream call. (Empty ones never get here: the dialects drop them.)
 * - A json_schema response format is Anthropic's structured output, `output_config.format`
 *   (always enforced, so a non-strict format is followed strictly; the format's name has no
 *   field, its description becomes the schema's when the schema has none). json_object has no
 *   Anthropic equivalent (Anthropic's outputs take a schema), so it is refused rather than
 *   silently dropped (issue 5: what the target cannot carry is a clear 400).
 * - Thinking takes the form the binding's upstream model accepts (`thinking` in the catalog;
 *   unset, the client's form, an effort alone as a budget), whatever form the client wrote: adaptive with `output_config.effort`, or a
 *   budget (thinking-budget.ts).
 * - `temperature` and `top_p` together are rejected by current models: temperature wins.
 *   With thinking on, temperature and top_k are not allowed and top_p only within [0.95, 1].
 */
export function toUpstream(request: ChatRequest, upstreamModel: string, form?: ThinkingForm): AnthropicRequestBody {
  if (request.responseFormat?.type === 'json_object') {
    throw new UnsupportedRequestError(
      // Named as Chat Completions names it: the Responses route renames it to text.format (renameParam).
      "json_object response formats (response_format) are not available on this model's Anthropic backend (its structured outputs take a JSON schema): send a json_schema format, or ask for JSON in the prompt",
      'response_format',
    )
  }
  const stop = request.sampling.stop
  const blank = stop?.find(sequence => sequence.trim() === '')
  if (blank !== undefined) {
    throw new UnsupportedRequestError(
      `stop sequences made only of whitespace (${JSON.stringify(blank)} in stop / stop_sequences) are refused by this model's Anthropic backend: remove them, or stop on visible text`,
      'stop',
    )
  }
  const maxTokens = request.sampling.maxOutputTokens ?? request.route.maxOutputTokens
  const { system, messages } = convertMessages(request.messages)
  // Before the plan reads the last assistant turn: this may leave that turn out.
  stripFinalThinking(messages, 'trailing')
  const hasTools = request.tools.length > 0
  const toolChoice = hasTools ? convertToolChoice(request.toolChoice, request.parallelToolCalls) : undefined
  const plan = thinkingConfig(
    request,
    maxTokens,
    { forcedToolUse: toolChoice?.type === 'any' || toolChoice?.type === 'tool', toolTurnWithoutThinking: lastAssistantCallsToolsWithoutThinking(messages) },
    form,
  )
  const thinking = plan?.thinking
  if (thinking === undefined) stripFinalThinking(messages, 'all')
  trimFinalAssistantText(messages)

  const body: AnthropicRequestBody = { model: upstreamModel, max_tokens: maxTokens, messages, stream: true }
  if (system !== undefined) body.system = system
  if (hasTools) {
    body.tools = request.tools.map(tool => ({
      name: tool.name,
      ...(tool.description !== undefined ? { description: tool.description } : {}),
      // input_schema must be an object schema; an empty `parameters` means "no arguments".
      input_schema: { type: 'object', ...tool.parameters },
      ...(tool.strict !== undefined ? { strict: tool.strict } : {}),
      ...(tool.cache !== undefined ? { cache_control: cacheControl(tool.cache) } : {}),
    }))
    if (toolChoice !== undefined) body.tool_choice = toolChoice
  } else {
    const named = toolNamesCalled(messages)
    if (named.length > 0) {
      body.tools = named.map(name => ({ name, input_schema: { type: 'object' } }))
      body.tool_choice = { type: 'none' }
    }
  }
  if (thinking !== undefined) body.thinking = thinking
  if (request.cache !== undefined) body.cache_control = cacheControl(request.cache)
  const outputConfig = toOutputConfig(request, plan)
  if (outputConfig !== undefined) body.output_config = outputConfig
  const { temperature, topP, topK } = request.sampling
  // Anthropic's range is 0..1 (OpenAI's 0..2): refused here, before a call Anthropic would refuse,
  // with thinking on too (where a temperature is not sent), as README promises for every request.
  if (temperature !== undefined && temperature > 1) throw new UnsupportedRequestError(`temperature ${temperature} is above 1, the most this model's Anthropic backend takes`, 'temperature')
  if (thinking === undefined) {
    if (temperature !== undefined) body.temperature = temperature
    else if (topP !== undefined) body.top_p = topP
    if (topK !== undefined) body.top_k = topK
  } else if (topP !== undefined && topP >= 0.95 && topP <= 1) {
    body.top_p = topP
  }
  if (stop !== undefined && stop.length > 0) body.stop_sequences = stop
  return body
}

function toOutputConfig(request: ChatRequest, plan: ThinkingPlan | undefined): AnthropicRequestBody['output_config'] {
  // Most requests have neither: no object for them.
  if (request.responseFormat === undefined && plan?.effort === undefined) return undefined
  const config: NonNullable<AnthropicRequestBody['output_config']> = {}
  const format = request.responseFormat
  if (format?.type === 'json_schema') {
    const { schema, description } = format
    config.format = { type: 'json_schema', schema: description !== undefined && schema.description === undefined ? { ...schema, description } : schema }
  }
  if (plan?.effort !== undefined) config.effort = plan.effort
  return config.format === undefined && config.effort === undefined ? undefined : config
}

function convertToolChoice(choice: ToolChoice | undefined, parallelToolCalls: boolean | undefined): AnthropicToolChoice | undefined {
  if (choice === 'none') return { type: 'none' }
  const disable = parallelToolCalls === false ? { disable_parallel_tool_use: true } : {}
  if (choice === 'required') return { type: 'any', ...disable }
  if (typeof choice === 'object') return { type: 'tool', name: choice.name, ...disable }
  if (choice === 'auto' || parallelToolCalls === false) return { type: 'auto', ...disable }
  return undefined
}

function convertMessages(input: readonly Message[]): { system?: AnthropicRequestBody['system']; messages: AnthropicMessage[] } {
  const systemBlocks: AnthropicTextBlock[] = []
  let systemHinted = false
  const messages: AnthropicMessage[] = []
  for (const message of input) {
    if (message.role === 'system') {
      for (const part of message.parts) {
        if (part.type !== 'text') throw new UnsupportedRequestError(`A system message cannot carry a ${part.type} part`)
        if (part.text === '') continue
        systemBlocks.push(part.cache === undefined ? { type: 'text', text: part.text } : { type: 'text', text: part.text, cache_control: cacheControl(part.cache) })
        if (part.cache !== undefined) systemHinted = true
      }
      continue
    }
    const role = message.role === 'assistant' ? 'assistant' : 'user'
    const blocks: AnthropicContentBlock[] = []
    for (const part of message.parts) {
      const block = convertPart(part, role)
      if (block === undefined) continue
      // Reasoning parts carry no hint (Anthropic caches no thinking block by itself).
      if (part.type !== 'reasoning' && part.cache !== undefined) (block as AnthropicTextBlock).cache_control = cacheControl(part.cache)
      blocks.push(block)
    }
    if (blocks.length === 0) {
      // Left out, an empty user turn would join the assistant turns around it, or make the one
      // before it the last, which Anthropic continues as a prefill instead of answering anew.
      // Anthropic itself refuses empty content: refused here, before the call.
      if (role === 'user') throw new UnsupportedRequestError('A user message is empty: Anthropic backends take no empty message (send its text, or leave the message out)')
      continue
    }
    const last = messages[messages.length - 1]
    if (last !== undefined && last.role === role) last.content.push(...blocks)
    else messages.push({ role, content: blocks })
  }
  // System text alone, or only empty assistant turns (OpenAI takes either): Anthropic refuses
  // `messages: []`, so it is refused here, before the call, and another backend may carry it.
  if (messages.length === 0) throw emptyConversation()
  assignToolIds(messages)
  for (const message of messages) {
    if (message.role === 'user') message.content = stablePartition(message.content, block => block.type === 'tool_result')
    else if (!isThinking(message.content[0]!)) message.content = stablePartition(message.content, isThinking)
  }
  // Blocks when a hint must sit on one of them; otherwise the one string every backend took before.
  if (systemBlocks.length === 0) return { messages }
  return { system: systemHinted ? systemBlocks : systemBlocks.map(block => block.text).join('\n\n'), messages }
}

function convertPart(part: Part, role: 'user' | 'assistant'): AnthropicContentBlock | undefined {
  switch (part.type) {
    case 'text':
      // Anthropic refuses text blocks without non-whitespace. An assistant's blank text (the
      // "\n\n" some backends write before tool calls) says nothing; a user's is theirs to send.
      if (part.text === '' || (role === 'assistant' && part.text.trim() === '')) return undefined
      return { type: 'text', text: part.text }
    case 'image':
      return { type: 'image', source: imageSource(part.mediaType, part.data) }
    case 'file':
      // enrich.ts replaces file parts with text before any provider runs.
      throw new UnsupportedRequestError('File parts must be converted to text before reaching the Anthropic provider')
    case 'reasoning':
      if (role !== 'assistant') return undefined
      if (part.redacted === true) {
        const data = part.signature ?? part.text
        return data === '' ? undefined : { type: 'redacted_thinking', data }
      }
      return part.signature === undefined || part.signature === '' ? undefined : { type: 'thinking', thinking: part.text, signature: part.signature }
    case 'tool-call':
      return { type: 'tool_use', id: part.callId, name: part.name, input: parseToolInput(part.arguments) }
    case 'tool-result':
      return {
        type: 'tool_result',
        tool_use_id: part.callId,
        ...(part.content !== '' ? { content: part.content } : {}),
        ...(part.isError === true ? { is_error: true } : {}),
      }
  }
}

/**
 * With thinking on, Anthropic requires the assistant turn that the request continues (its tool
 * calls answered by the final user turn) to start with a thinking block. A history from another
 * provider has none, so thinking is turned off for that request rather than failing it.
 */
function lastAssistantCallsToolsWithoutThinking(messages: readonly AnthropicMessage[]): boolean {
  const lastAssistant = messages.findLast(message => message.role === 'assistant')
  if (lastAssistant === undefined) return false
  const first = lastAssistant.content[0]
  const startsWithThinking = first?.type === 'thinking' || first?.type === 'redacted_thinking'
  return !startsWithThinking && lastAssistant.content.some(block => block.type === 'tool_use')
}

/** The tools the history's tool_use blocks name, each once, in order. */
function toolNamesCalled(messages: readonly AnthropicMessage[]): string[] {
  const names = new Set<string>()
  for (const message of messages) for (const block of message.content) if (block.type === 'tool_use') names.add(block.name)
  return [...names]
}

const emptyConversation = () =>
  new UnsupportedRequestError("the conversation has no user or assistant message with content, which this model's Anthropic backend needs: add a user message", 'messages')

const isThinking = (block: AnthropicContentBlock) => block.type === 'thinking' || block.type === 'redacted_thinking'

/**
 * A final (prefill) assistant turn may not end with a thinking block, whatever the thinking
 * setting ("The final block in an assistant message cannot be `thinking`": a history ending with
 * reasoning), and with thinking off may hold none: `trailing` drops the ones it ends with, `all`
 * every one. A turn left empty goes, as an empty assistant turn does (convertMessages); if it was
 * the only one, the conversation is empty: refused here as convertMessages refuses one (QA:
 * `messages: []` reached Anthropic, whose 400 no backend retries).
 */
function stripFinalThinking(messages: AnthropicMessage[], which: 'trailing' | 'all'): void {
  const last = messages[messages.length - 1]
  if (last?.role !== 'assistant') return
  if (which === 'all') last.content = last.content.filter(block => !isThinking(block))
  else while (last.content.length > 0 && isThinking(last.content[last.content.length - 1]!)) last.content.pop()
  if (last.content.length === 0) messages.pop()
  if (messages.length === 0) throw emptyConversation()
}

/**
 * Anthropic refuses a final (prefill) assistant turn that ends in whitespace ("final assistant
 * content cannot end with trailing whitespace"): its last text block loses its trailing
 * whitespace. It cannot become empty, as blank assistant text is never sent (convertPart).
 */
function trimFinalAssistantText(messages: AnthropicMessage[]): void {
  const last = messages[messages.length - 1]
  if (last?.role !== 'assistant') return
  const block = last.content[last.content.length - 1]
  if (block?.type === 'text') block.text = block.text.trimEnd()
}

function stablePartition<T>(items: T[], isFirst: (item: T) => boolean): T[] {
  const first: T[] = []
  const rest: T[] = []
  for (const item of items) (isFirst(item) ? first : rest).push(item)
  return rest.length === 0 || first.length === 0 ? items : [...first, ...rest]
}
