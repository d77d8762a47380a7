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
import { decodeResponses, renameParam } from './dialects/responses/decode'
import { echoOf, encodeResponse } from './dialects/responses/encode'
import { ResponsesStreamEncoder } from './dialects/responses/encode-stream'
import { ResponseObject, ResponsesBody } from './dialects/responses/schema'
import { OpenAIErrorResponse } from '../http/openapi-schemas'
import { ApiError } from '../http/errors'
import type { DialectEncoder } from './dialects/types'
import { runChat, type PipelineDeps } from './pipeline'

const chatCompletions: DialectEncoder = {
  encode: encodeChatCompletion,
  streamEncoder: meta => new ChatCompletionsStreamEncoder(meta),
}

/** The Responses encoder of one request: its response object repeats the request's settings. */
function responsesEncoder(body: typeof ResponsesBody.static): DialectEncoder {
  const echo = echoOf(body)
  return {
    idPrefix: 'resp_',
    encode: (result, usage, meta) => encodeResponse(result, usage, meta, echo),
    streamEncoder: meta => new ResponsesStreamEncoder(meta, echo),
  }
}

/** POST /v1/chat/completions and POST /v1/responses (spec §4.12): OpenAI formats to any configured backend. */
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
            'reasoning (reasoning_effort; reasoning_content in replies), response_format json_schema. Billed from the upstream-reported usage, ' +
            'settled before the final frame. Errors use the OpenAI envelope.',
        },
      },
    )
    .post(
      '/responses',
      async ({ body, principal, request, set, server }) => {
        try {
          // Spec §4.10: Encrypted headers belong to Chat Completions only.
          if (request.headers.has('svc-encrypted')) throw new ApiError('invalid_request', 'Encrypted requests are only available on POST /v1/chat/completions')
          const chat = decodeResponses(body, catalog.resolve(body.model))
          const reply = await runChat(pipeline, {
            principal,
            request: chat,
            requestId: requestIdOf(set),
            encoder: responsesEncoder(body),
            includeUsage: true,
            uncensored: body.uncensored,
            httpRequest: request,
            disableIdleTimeout: () => server?.timeout(request, 0),
          })
          return reply as typeof ResponseObject.static
        } catch (error) {
          throw renameParam(error)
        }
      },
      {
        // Spec §8: inference routes other than chat take at most 4 MiB.
        auth: { mode: 'inference', jsonBody: 4 * MiB },
        body: ResponsesBody,
        response: { 200: ResponseObject, 400: OpenAIErrorResponse, 401: OpenAIErrorResponse, 413: OpenAIErrorResponse, 429: OpenAIErrorResponse, 502: OpenAIErrorResponse },
        detail: {
          summary: 'Create a model response',
          description:
            'OpenAI Responses: input as a string or items (messages, function_call, function_call_output, reasoning), instructions, ' +
            'function tools, reasoning (effort, summary; reasoning items carry the upstream signature in encrypted_content), ' +
            'text.format json_schema, and streaming (response.created … response.completed, each event with its sequence_number). ' +
            'Nothing is stored: store: true, previous_response_id and conversation are 400. Encrypted models are refused (Chat Completions only). ' +
            'Billed from the upstream-reported usage, settled before the final event. Errors use the OpenAI envelope.',
        },
      },
    )
}
