import type { ApiError } from '../../../http/errors'
import type { FinishReason, Usage } from '../../canonical'
import type { ChatResult } from '../../collect'
import type { ResponseMeta } from '../types'
import { REDACTED_PREFIX } from './decode'
import type { ResponsesRequest } from './schema'

// The `response` object of the OpenAI Responses API, shared by the JSON reply and the stream's
// lifecycle events. Shapes follow the openai SDK's types (resources/responses/responses.ts).

export type ResponseStatus = 'completed' | 'incomplete' | 'failed' | 'in_progress'

/** What the response object repeats of the request (the real API echoes these settings). */
export type Echo = Record<string, unknown>

export function echoOf(body: ResponsesRequest): Echo {
  const tools = (body.tools ?? []).map(tool => {
    if (tool.type !== 'function') return tool
    const fn = tool as unknown as { name: string; description?: string | null; parameters?: Record<string, unknown> | null; strict?: boolean | null }
    return { type: 'function', name: fn.name, description: fn.description ?? null, parameters: fn.parameters ?? null, strict: fn.strict ?? null }
  })
  return {
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    max_tool_calls: null,
    metadata: body.metadata ?? {},
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? body.reasoning?.generate_summary ?? null },
    service_tier: 'default',
    store: false,
    temperature: body.temperature ?? null,
    text: { format: body.text?.format ?? { type: 'text' }, verbosity: 'medium' },
    tool_choice: body.tool_choice ?? 'auto',
    tools,
    top_p: body.top_p ?? null,
    truncation: 'disabled',
  }
}

/** Responses usage, with the detail fields its SDK types; hosted-tool counts only when used. */
export function usageObject(usage: Usage) {
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cachedInputTokens ?? 0 },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
    total_tokens: usage.inputTokens + usage.outputTokens,
    ...(usage.webFetchRequests || usage.webSearchRequests
      ? { server_tool_use: { web_fetch_requests: usage.webFetchRequests, web_search_requests: usage.webSearchRequests } }
      : {}),
  }
}

/** How a finish reason ends a response: `incomplete` (with its reason) for truncation and filtering. */
export function statusOf(reason: FinishReason): { status: ResponseStatus; incomplete: { reason: string } | null } {
  if (reason === 'length') return { status: 'incomplete', incomplete: { reason: 'max_output_tokens' } }
  if (reason === 'content-filter') return { status: 'incomplete', incomplete: { reason: 'content_filter' } }
  return { status: 'completed', incomplete: null }
}

/** The in-band error of a failed response (ResponseError's code is a closed set). */
export function errorObject(error: ApiError) {
  return { code: error.code === 'rate_limited' ? 'rate_limit_exceeded' : 'server_error', message: error.message }
}

export function responseObject(
  meta: ResponseMeta,
  echo: Echo,
  state: { status: ResponseStatus; output: unknown[]; usage: Usage | null; error?: ApiError; incomplete?: { reason: string } | null },
) {
  return {
    id: meta.id,
    object: 'response',
    created_at: meta.createdAt,
    status: state.status,
    background: false,
    error: state.error ? errorObject(state.error) : null,
    incomplete_details: state.incomplete ?? null,
    model: meta.model,
    output: state.output,
    usage: state.usage ? usageObject(state.usage) : null,
    ...echo,
  }
}

/** Output item ids: a kind prefix as the real API uses (msg_, rs_, fc_), unique per response. */
export function itemId(meta: ResponseMeta, prefix: 'msg' | 'rs' | 'fc', outputIndex: number): string {
  return `${prefix}_${meta.id.slice(meta.id.indexOf('_') + 1)}${outputIndex}`
}

export function messageItem(id: string, text: string, status: ResponseStatus) {
  return { id, type: 'message', status, content: [outputText(text)], role: 'assistant' }
}

export function outputText(text: string) {
  return { type: 'output_text', annotations: [], logprobs: [], text }
}

/**
 * A reasoning item: the upstream's reasoning text as its summary, and its signature (or, for
 * redacted reasoning, the opaque data behind REDACTED_PREFIX) as encrypted_content, so that the
 * item sent back in the next turn's input restores the exact reasoning block.
 */
export function reasoningItem(id: string, text: string, signature: string | undefined, redacted: boolean | undefined) {
  const encrypted = signature === undefined || signature === '' ? undefined : redacted ? `${REDACTED_PREFIX}${signature}` : signature
  return {
    id,
    type: 'reasoning',
    summary: text === '' ? [] : [{ type: 'summary_text', text }],
    ...(encrypted !== undefined ? { encrypted_content: encrypted } : {}),
  }
}

export function functionCallItem(id: string, call: { callId: string; name: string; arguments: string }, status: ResponseStatus) {
  return { id, type: 'function_call', status, arguments: call.arguments, call_id: call.callId, name: call.name }
}

/**
 * A non-streamed `response` from the collected result: reasoning, then the message, then the
 * function calls. (The collected result keeps one reasoning text; a stream keeps each block.)
 */
export function encodeResponse(result: ChatResult, usage: Usage, meta: ResponseMeta, echo: Echo) {
  const { status, incomplete } = statusOf(result.finishReason)
  const output: unknown[] = []
  if (result.reasoning !== '' || result.reasoningSignature !== undefined) {
    output.push(reasoningItem(itemId(meta, 'rs', output.length), result.reasoning, result.reasoningSignature, false))
  }
  const last = result.toolCalls.length === 0 ? 'message' : 'call'
  if (result.text !== '') output.push(messageItem(itemId(meta, 'msg', output.length), result.text, last === 'message' ? status : 'completed'))
  result.toolCalls.forEach((call, index) => {
    const truncated = status === 'incomplete' && index === result.toolCalls.length - 1
    output.push(functionCallItem(itemId(meta, 'fc', output.length), call, truncated ? 'incomplete' : 'completed'))
  })
  return responseObject(meta, echo, { status, output, usage, incomplete })
}
