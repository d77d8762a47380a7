// Canonical ChatRequest → Chat Completions request body, for OpenAI and the servers that copy
// its API (vLLM, Ollama, llama.cpp server). Pure: no I/O, no config reads.

import type { ChatRequest, Effort, Message, Part, ResponseFormat, ToolChoice } from '../../inference/canonical'
import { effortForBudget, topEffort } from '../anthropic/thinking-budget'

/**
 * Per-backend choices the Chat Completions API leaves open. Both default to what every
 * OpenAI-compatible server accepts.
 */
export interface ChatCompletionsOptions {
  /**
   * Which field carries the output cap. `max_tokens` (default) is understood by vLLM, Ollama,
   * llama.cpp and OpenAI's non-reasoning models; OpenAI's o-series and GPT-5 models reject it
   * and need `max_completion_tokens`.
   */
  readonly maxTokensField?: 'max_tokens' | 'max_completion_tokens'
  /**
   * What becomes of reasoning parts in assistant history. Chat Completions has no standard
   * field, and OpenAI rejects unknown message fields, so the default drops them. `reasoning_content`
   * sends them back under the name vLLM, DeepSeek and Qwen templates read, which keeps
   * interleaved thinking across tool calls on the backends that want it.
   */
  readonly reasoningHistory?: 'drop' | 'reasoning_content'
}

/** One message of the upstream body. */
export type UpstreamMessage =
  | { role: 'system'; content: string; name?: string }
  | { role: 'user'; content: string | UpstreamContentPart[]; name?: string }
  | { role: 'assistant'; content: string | null; tool_calls?: UpstreamToolCall[]; reasoning_content?: string; name?: string }
  | { role: 'tool'; tool_call_id: string; content: string }

export type UpstreamContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }

export interface UpstreamToolCall {
  id: string
  type: 'function'
  function: { name: string; arguments: string }
}

/** The request body POSTed to `/chat/completions`. */
export interface ChatCompletionsBody {
  model: string
  messages: UpstreamMessage[]
  stream: true
  stream_options: { include_usage: true }
  tools?: Array<{ type: 'function'; function: { name: string; description?: string; parameters: Record<string, unknown>; strict?: boolean } }>
  tool_choice?: 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } }
  parallel_tool_calls?: boolean
  temperature?: number
  top_p?: number
  /** Not OpenAI's: vLLM, llama.cpp and Ollama read it; OpenAI itself answers 400, which reaches the client as such. */
  top_k?: number
  max_tokens?: number
  max_completion_tokens?: number
  stop?: string[]
  seed?: number
  response_format?: Record<string, unknown>
  reasoning_effort?: 'low' | 'medium' | 'high'
}

/** A request this wire cannot carry (a programming error upstream of the provider, not a client mistake we can render). */
export class UnsupportedPartError extends Error {}

/**
 * Builds the upstream body: a stream with `include_usage`. A collected call (provider.ts) sends
 * it with `stream: false` and no stream_options instead (a JSON answer always carries usage),
 * so usage is reported for both. Never forwards `request.user`:
 * the end-user id is for the gateway's own abuse controls only (issue 4, point 6).
 */
export function toUpstream(request: ChatRequest, upstreamModel: string, options: ChatCompletionsOptions = {}): ChatCompletionsBody {
  const body: ChatCompletionsBody = {
    model: upstreamModel,
    messages: request.messages.flatMap(message => toMessages(message, options)),
    stream: true,
    stream_options: { include_usage: true },
  }
  if (request.tools.length > 0) {
    body.tools = request.tools.map(tool => ({
      type: 'function',
      function: {
        name: tool.name,
        ...(tool.description !== undefined ? { description: tool.description } : {}),
        parameters: tool.parameters,
        ...(tool.strict !== undefined ? { strict: tool.strict } : {}),
      },
    }))
    if (request.toolChoice !== undefined) body.tool_choice = toToolChoice(request.toolChoice)
    // OpenAI rejects parallel_tool_calls without tools, so it travels only with them.
    if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls
  }
  const { temperature, topP, topK, maxOutputTokens, stop, seed } = request.sampling
  if (temperature !== undefined) body.temperature = temperature
  if (topP !== undefined) body.top_p = topP
  if (topK !== undefined) body.top_k = topK
  if (maxOutputTokens !== undefined) body[options.maxTokensField ?? 'max_tokens'] = maxOutputTokens
  if (stop !== undefined && stop.length > 0) body.stop = stop
  if (seed !== undefined) body.seed = seed
  if (request.responseFormat !== undefined) body.response_format = toResponseFormat(request.responseFormat)
  // Non-reasoning models reject reasoning_effort, so it goes only where the catalog says it is understood.
  const effort = reasoningEffort(request.reasoning)
  if (effort !== undefined && request.route.capabilities.reasoning) body.reasoning_effort = effort
  return body
}

/**
 * The effort to ask for. A thinking budget (Anthropic-style clients) has no field on this wire,
 * so it maps to the nearest effort, on the same steps the Anthropic adapter uses the other way
 * (low ≤ 2048 < medium ≤ 8192 < high), rather than being dropped. `xhigh` and `max` are sent as
 * `high`, the top of the scale every OpenAI-compatible backend takes (OpenAI's own models
 * differ in which of the higher ones they accept, other servers take none).
 */
function reasoningEffort(reasoning: ChatRequest['reasoning']): 'low' | 'medium' | 'high' | undefined {
  if (reasoning === undefined) return undefined
  if (reasoning.effort !== undefined) return topEffort(reasoning.effort)
  if (reasoning.budgetTokens === undefined) return undefined
  return effortForBudget(reasoning.budgetTokens)
}

/** reasoning_effort as a Chat Completions client may send it. */
export type RequestEffort = 'minimal' | Effort

/** A Chat Completions client's effort as it goes to an OpenAI-compatible backend (the Encrypted relay forwards the body itself). */
export function chatCompletionsEffort(effort: RequestEffort): 'low' | 'medium' | 'high' {
  return topEffort(effort === 'minimal' ? 'low' : effort)
}

function toToolChoice(choice: ToolChoice): NonNullable<ChatCompletionsBody['tool_choice']> {
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } }
}

function toResponseFormat(format: ResponseFormat): Record<string, unknown> {
  if (format.type !== 'json_schema') return { type: format.type }
  const { name, schema, strict, description } = format
  return {
    type: 'json_schema',
    json_schema: { name, schema, ...(strict !== undefined ? { strict } : {}), ...(description !== undefined ? { description } : {}) },
  }
}

/**
 * One canonical message may become several upstream ones: tool results are separate `tool`
 * messages on this wire, and a Messages-style user turn that carries tool results and text
 * becomes the tool messages first (they must follow the assistant's tool calls), then the text.
 */
function toMessages(message: Message, options: ChatCompletionsOptions): UpstreamMessage[] {
  const toolResults: UpstreamMessage[] = []
  const rest: Part[] = []
  for (const part of message.parts) {
    // `isError` has no field on this wire: the content is the error text the model reads.
    if (part.type === 'tool-result') toolResults.push({ role: 'tool', tool_call_id: part.callId, content: part.content })
    else rest.push(part)
  }
  if (message.role === 'tool' || rest.length === 0) return toolResults
  const upstream: UpstreamMessage =
    message.role === 'system' ? { role: 'system', content: textOf(rest, 'system') }
    : message.role === 'user' ? { role: 'user', content: userContent(rest) }
    : assistantMessage(rest, options)
  if (message.name !== undefined) (upstream as { name?: string }).name = message.name
  // Appended, not spread into a new array: this runs for every message of every request.
  toolResults.push(upstream)
  return toolResults
}

function userContent(parts: Part[]): string | UpstreamContentPart[] {
  if (parts.length === 1 && parts[0]!.type === 'text') return parts[0]!.text
  return parts.map((part): UpstreamContentPart => {
    if (part.type === 'text') return { type: 'text', text: part.text }
    if (part.type === 'image') return { type: 'image_url', image_url: { url: imageUrl(part) } }
    throw new UnsupportedPartError(`a ${part.type} part cannot be sent in a user message to a Chat Completions upstream`)
  })
}

function assistantMessage(parts: Part[], options: ChatCompletionsOptions): UpstreamMessage {
  let text = ''
  let reasoning = ''
  const toolCalls: UpstreamToolCall[] = []
  for (const part of parts) {
    if (part.type === 'text') text += part.text
    else if (part.type === 'tool-call') toolCalls.push({ id: part.callId, type: 'function', function: { name: part.name, arguments: part.arguments } })
    // Signatures and redacted (encrypted) reasoning have no field on this wire: only the visible
    // text can travel, and only under reasoning_content (see ChatCompletionsOptions).
    else if (part.type === 'reasoning') reasoning += part.redacted ? '' : part.text
    else throw new UnsupportedPartError(`a ${part.type} part cannot be sent in an assistant message to a Chat Completions upstream`)
  }
  // content null (not "") beside tool calls is what OpenAI itself returns and expects back.
  const message: Extract<UpstreamMessage, { role: 'assistant' }> = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text }
  if (toolCalls.length > 0) message.tool_calls = toolCalls
  if (options.reasoningHistory === 'reasoning_content' && reasoning !== '') message.reasoning_content = reasoning
  return message
}

function textOf(parts: Part[], role: string): string {
  return parts
    .map(part => {
      if (part.type === 'text') return part.text
      throw new UnsupportedPartError(`a ${part.type} part cannot be sent in a ${role} message to a Chat Completions upstream`)
    })
    .join('\n\n')
}

/** A URL part passes through as is; bytes become a base64 data URL. */
function imageUrl(part: Extract<Part, { type: 'image' }>): string {
  if (part.data instanceof URL) return part.data.href
  return `data:${part.mediaType};base64,${Buffer.from(part.data).toString('base64')}`
}
