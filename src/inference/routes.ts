import { Elysia } from 'elysia'
import type { ModelRoute } from '../catalog/types'
import { authMacro } from '../http/auth'
import { MiB } from '../http/body-limit'
import { requestIdOf } from '../http/request-context'
import type { KeyService } from '../keys/service'
import type { Limits } from '../limits/admission'
import { decodeChatCompletions } from './dialects/chat-completions/decode'
import { encodeChatCompletion } from './dialects/chat-completions/encode'
import { ChatCompletionsStreamEncoder } from './dialects/chat-completions/encode-stream'
import { ChatCompletionResponse, ChatCompletionsBody } from './dialects/chat-completions/schema'
import { OpenAIErrorResponse } from '../http/openapi-schemas'
import type { DialectEncoder } from './dialects/types'
import { runChat, type PipelineDeps } from './pipeline'

const chatCompletions: DialectEncoder = {
  encode: encodeChatCompletion,
  streamEncoder: meta => new ChatCompletionsStreamEncoder(meta),
}

/** POST /v1/chat/completions (spec §4.12): OpenAI Chat Completions to any configured backend. */
export function inferenceRoutes(keys: KeyService, limits: Limits, catalog: { resolve(id: string): ModelRoute }, pipeline: PipelineDeps) {
  return new Elysia({ prefix: '/v1', tags: ['Inference'] })
    .use(authMacro(keys, limits))
    .post(
      '/chat/completions',
      async ({ body, principal, request, set, server }) => {
        const chat = decodeChatCompletions(body, catalog.resolve(body.model))
        // A JSON chat.completion, or a streaming Response (which Elysia passes through untouched).
        const reply = await runChat(pipeline, {
          principal,
          request: chat,
          requestId: requestIdOf(set),
          encoder: chatCompletions,
          includeUsage: body.stream_options?.include_usage === true,
          uncensored: body.uncensored,
          httpRequest: request,
          disableIdleTimeout: () => server?.timeout(request, 0),
        })
        return reply as typeof ChatCompletionResponse.static
      },
      {
        // Chat bodies may carry inline images: 64 MiB, enforced before the body is buffered.
        auth: { mode: 'inference', jsonBody: 64 * MiB },
        body: ChatCompletionsBody,
        response: { 200: ChatCompletionResponse, 400: OpenAIErrorResponse, 401: OpenAIErrorResponse, 413: OpenAIErrorResponse, 429: OpenAIErrorResponse, 502: OpenAIErrorResponse },
        detail: {
          summary: 'Create a chat completion',
          description:
            'OpenAI Chat Completions: streaming (SSE, `[DONE]` terminated, usage with stream_options.include_usage), function tools, ' +
            'reasoning (reasoning_effort; reasoning_content in replies), response_format json_schema, `file` content parts (file_data as a base64 ' +
            'data URL, at most 1 MiB decoded: the text is extracted and given to the model as a delimited text part; one document-parse unit per file). ' +
            'Billed from the upstream-reported usage, ' +
            'settled before the final frame. Errors use the OpenAI envelope.',
        },
      },
    )
}
