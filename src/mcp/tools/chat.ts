import { Type } from '@sinclair/typebox'
import type { ModelRoute } from '../../catalog/types'
import { ApiError } from '../../http/errors'
import { MaxCharacters } from '../../http/openapi-schemas'
import type { ChatRequest, FinishReason, Message, Usage } from '../../inference/canonical'
import type { ChatResult } from '../../inference/collect'
import type { DialectEncoder, StreamEncoder } from '../../inference/dialects/types'
import { runChat, type PipelineDeps } from '../../inference/pipeline'
import { abortable } from '../../lib/abortable'
import { tool, type ToolContext } from './types'


/** What svc.chat returns as structured content. */
interface ChatAnswer {
  model: string
  text: string
  finish_reason: FinishReason
  usage: { input_tokens: number; output_tokens: number }
}

function answer(model: string, text: string, reason: FinishReason, usage: Usage): ChatAnswer {
  return { model, text, finish_reason: reason, usage: { input_tokens: usage.inputTokens, output_tokens: usage.outputTokens } }
}

/**
 * The pipeline's response side for MCP: instead of a wire format, a ChatAnswer. Collected
 * calls return it from `encode`; streamed calls (a client that asked for progress) report each
 * text delta as progress and keep the answer on the side. The pipeline's billing is unchanged:
 * reserve, then settle before the final frame (here: before the tool result).
 */
class McpChatEncoder implements DialectEncoder {
  readonly idPrefix = 'chatcmpl-'
  text = ''
  outcome: { reason: FinishReason; usage: Usage } | { error: ApiError } | undefined

  constructor(
    private readonly model: string,
    private readonly progress?: ToolContext['progress'],
  ) {}

  encode(result: ChatResult, usage: Usage): unknown {
    return answer(this.model, result.text, result.finishReason, usage)
  }

  streamEncoder(): StreamEncoder {
    return {
      start: () => [],
      push: event => {
        if (event.type === 'text-delta') {
          this.text += event.delta
          if (this.progress !== undefined) {
            this.progress(this.text.length, event.delta)
            // One (empty) chunk per notification: the stream then pulls the next event only
            // when the tool reads on, which it does at the MCP client's pace (run below).
            return ['']
          }
        }
        return []
      },
      finish: (reason, usage) => {
        this.outcome = { reason, usage }
        return ['done']
      },
      fail: error => {
        this.outcome = { error }
        return ['failed']
      },
    }
  }
}

/** The canonical request of one prompt (and optional system text) to one model. */
export function promptRequest(route: ModelRoute, model: string, prompt: string, options: { system?: string; maxTokens?: number; temperature?: number; stream: boolean }): ChatRequest {
  const messages: Message[] = []
  if (options.system) messages.push({ role: 'system', parts: [{ type: 'text', text: options.system }] })
  messages.push({ role: 'user', parts: [{ type: 'text', text: prompt }] })
  return {
    model, route, messages, tools: [],
    sampling: { temperature: options.temperature, maxOutputTokens: options.maxTokens },
    hosted: { webSearch: false, webFetch: false },
    stream: options.stream,
  }
}

/** svc.chat: one prompt to one model, through the same pipeline, billing and limits as POST /v1/chat/completions. */
export function chatTool(catalog: { resolve(id: string): ModelRoute }, pipeline: PipelineDeps) {
  return tool({
    name: 'svc.chat',
    title: 'Ask one model',
    description:
      'Sends one prompt (with optional system instructions) to one model of this gateway and returns its answer. ' +
      'Billed to your organization per token like the chat API. Use svc.list_models for model ids; ' +
      'a `:confidential` suffix selects the Confidential level where offered. Encrypted models are not available through MCP.',
    inputSchema: Type.Object(
      {
        model: MaxCharacters(300, { minLength: 1, description: 'Model id from svc.list_models, optionally with :confidential' }),
        // Bounded by the request body's 4 MiB (mcp/routes.ts): a maxLength here would count UTF-16
        // units where JSON Schema counts characters, and a pattern of that size is too slow (MaxCharacters).
        prompt: Type.String({ minLength: 1, description: 'The user message (the whole request body is at most 4 MiB)' }),
        system: Type.Optional(Type.String({ description: 'Optional system instructions' })),
        max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'Upper bound on output tokens (default: the model maximum)' })),
        temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2 })),
      },
      { additionalProperties: false },
    ),
    outputSchema: Type.Object({
      model: Type.String(),
      text: Type.String(),
      finish_reason: Type.String(),
      usage: Type.Object({ input_tokens: Type.Integer(), output_tokens: Type.Integer() }),
    }),
    billed: true,
    // Not read-only: every call spends the organization's money, so hosts should ask before running it.
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true, idempotentHint: false },
    async run(args, context) {
      const route = catalog.resolve(args.model)
      // Encrypted chat needs client-side encryption bound to an attested key (TEE-PROTOCOL.md): never through MCP.
      if (route.level === 'encrypted') throw new ApiError('invalid_request', 'encrypted models are not available through MCP; use the encrypted chat protocol on /v1/chat/completions', 'model')
      const stream = context.progress !== undefined
      const request = promptRequest(route, args.model, args.prompt, { system: args.system, maxTokens: args.max_tokens, temperature: args.temperature, stream })
      const encoder = new McpChatEncoder(args.model, context.progress)
      const reply = await runChat(pipeline, {
        principal: context.principal, request, requestId: context.requestId, encoder, includeUsage: true,
        httpRequest: context.httpRequest, signal: context.signal, disableIdleTimeout: context.disableIdleTimeout, readInProcess: true,
      })
      let result: ChatAnswer
      if (reply instanceof Response) {
        // Drain the stream (the encoder sees every event; settlement runs before its last
        // frame), no faster than the client reads the notifications.
        await drainAtClientPace(reply, context)
        const outcome = encoder.outcome
        if (!outcome) throw new ApiError('provider_error', 'the model stream ended early')
        if ('error' in outcome) throw outcome.error
        result = answer(args.model, encoder.text, outcome.reason, outcome.usage)
      } else {
        result = reply as unknown as ChatAnswer
      }
      return { text: result.text, structured: result as unknown as Record<string, unknown> }
    },
  })
}

/**
 * Reads a streamed reply to its end, waiting while the MCP client has too many notifications
 * unread: the upstream is then read no faster than the client reads. A client that left ends
 * the call as a cancel (charged for the notifications sent), and the tool fails.
 */
async function drainAtClientPace(reply: Response, context: ToolContext): Promise<void> {
  const reader = reply.body!.getReader()
  for (;;) {
    const waiting = context.ready?.()
    // A cancel while the call waits for its client ends the wait too (in a batch the POST goes on).
    if (waiting !== undefined && !(await abortable(waiting, context.signal).catch(() => false))) {
      await reader.cancel()
      throw new ApiError('provider_error', 'the client stopped reading the progress notifications; the call was cut')
    }
    if ((await reader.read()).done) return
  }
}
