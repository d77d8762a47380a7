import { Elysia } from 'elysia'
import type { TSchema } from '@sinclair/typebox'
import type { ModelRoute } from '../catalog/types'
import { authMacro } from '../http/auth'
import { MiB, rawBodyOf } from '../http/body-limit'
import { liftIdleTimeout } from '../http/idle-timeout'
import { requestIdOf } from '../http/request-context'
import type { Principal } from '../keys/principal'
import type { KeyService } from '../keys/service'
import type { Limits } from '../limits/admission'
import { decodeChatCompletions } from './dialects/chat-completions/decode'
import { encodeChatCompletion } from './dialects/chat-completions/encode'
import { ChatCompletionsStreamEncoder } from './dialects/chat-completions/encode-stream'
import { ChatCompletionResponse, ChatCompletionsBody } from './dialects/chat-completions/schema'
import { AnthropicErrorResponse, authErrors, OpenAIErrorResponse } from '../http/openapi-schemas'
import { ApiError } from '../http/errors'
import { decodeCountTokens, decodeMessages, messagesParams } from './dialects/messages/decode'
import { encodeMessage } from './dialects/messages/encode'
import { MessagesStreamEncoder } from './dialects/messages/encode-stream'
import { CountTokensBody, MessageResponse, MessagesBody, TokenCountResponse } from './dialects/messages/schema'
import { decodeResponses, RESPONSES_PARAMS } from './dialects/responses/decode'
import { renameParam } from './dialects/rename-param'
import { echoOf, encodeResponse } from './dialects/responses/encode'
import { ResponsesStreamEncoder } from './dialects/responses/encode-stream'
import { ResponseObject, ResponsesBody } from './dialects/responses/schema'
import type { DialectEncoder } from './dialects/types'
import { ENCRYPTED_HEADERS, refuseEncrypted } from './encrypted'
import { isEncryptedChat, relayEncryptedChat, type EncryptedDeps } from './encrypted-relay'
import { hasFileParts } from './enrich/documents'
import { estimatedCountTokens } from './meter'
import { runChat, type PipelineDeps } from './pipeline'
import { toApiError } from './upstream-errors'
import { eventStream, readsParameters } from '../http/openapi-complete'

const chatCompletions: DialectEncoder = {
  idPrefix: 'chatcmpl-',
  encode: encodeChatCompletion,
  streamEncoder: meta => new ChatCompletionsStreamEncoder(meta),
  passThrough: 'chat-completions',
}

const messages: DialectEncoder = {
  idPrefix: 'msg_',
  encode: encodeMessage,
  streamEncoder: meta => new MessagesStreamEncoder(meta),
  passThrough: 'messages',
}

/** A route's errors in its dialect's envelope. `billed`: the call spends from the balance, so a 429 may be insufficient_quota. */
const dialectErrors = <T extends TSchema>(envelope: T, billed: boolean) => ({ 400: envelope, ...authErrors(envelope, { billed }), 413: envelope, 502: envelope })
const anthropicErrors = dialectErrors(AnthropicErrorResponse, true)
const openaiErrors = dialectErrors(OpenAIErrorResponse, true)

/** Spec §4.10: Encrypted is a Chat Completions feature; the other routes refuse it, by header or by model id (before resolving it). */
function refuseEncryptedOn(where: string, request: Request, model: string): void {
  refuseEncrypted(request.headers, model.endsWith(':encrypted') ? { id: model, level: 'encrypted' } : undefined, where)
}

/**
 * Encrypted bodies (ciphertext names, encrypted parameter schemas) are not Chat Completions
 * bodies the schema could check: they are set aside here, before validation, and the schema
 * sees a placeholder. encrypted-body.ts checks them instead.
 */
const encryptedBodies = new WeakMap<Request, unknown>()
const PLACEHOLDER = Object.freeze({ model: 'encrypted', messages: [{ role: 'user', content: '' }] })

/**
 * What every inference route passes to the pipeline (or the Encrypted relay) about the HTTP
 * request alike: who calls, the request id, the request itself (its abort signal), and how to
 * lift Bun's idle timeout once a long stream starts.
 */
// (Handlers destructure their context rather than pass it whole: Elysia infers from the
// parameter which parts of the context to build per request.)
function httpCall({ principal, request, set, server }: { principal: Principal; request: Request; set: { headers: Record<string, unknown> }; server: { timeout(request: Request, seconds: number): void } | null }) {
  return { principal, requestId: requestIdOf(set), httpRequest: request, disableIdleTimeout: () => liftIdleTimeout(server, request) }
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

/**
 * POST /v1/chat/completions, /v1/responses, /v1/messages and /v1/messages/count_tokens (spec §4.12): each
 * client format to any configured backend, through the one pipeline.
 */
const COMPLETION_TOKENS = { max_tokens: 'max_completion_tokens' } as const

export function inferenceRoutes(keys: KeyService, limits: Limits, catalog: { resolve(id: string): ModelRoute }, pipeline: PipelineDeps, encrypted?: EncryptedDeps) {
  return new Elysia({ prefix: '/v1', tags: ['Inference'] })
    .use(authMacro(keys, limits))
    .post(
      '/chat/completions',
      async ({ body, principal, request, set, server }) => {
        const http = httpCall({ principal, request, set, server })
        if (encryptedBodies.has(request)) {
          if (encrypted === undefined) throw new ApiError('invalid_request', 'Encrypted chat is not configured on this gateway')
          return relayEncryptedChat(encrypted, {
            ...http,
            body: encryptedBodies.get(request),
            rawBody: rawBodyOf(request) ?? new Uint8Array(0),
          }) as unknown as typeof ChatCompletionResponse.static
        }
        const chat = decodeChatCompletions(body, catalog.resolve(body.model))
        try {
          // A JSON chat.completion, or a streamed reply's Response (request-context sends it as built).
          const reply = await runChat(pipeline, {
            ...http,
            request: chat,
            encoder: chatCompletions,
            includeUsage: body.stream_options?.include_usage === true,
            uncensored: body.uncensored,
          })
          return reply as typeof ChatCompletionResponse.static
        } catch (error) {
          // The output limit's checks name max_tokens; a client that sent max_completion_tokens gets its own field's name.
          throw body.max_completion_tokens == null ? error : renameParam(error, COMPLETION_TOKENS)
        }
      },
      {
        // Chat bodies may carry inline images: 64 MiB, enforced before the body is buffered.
        auth: { mode: 'inference', jsonBody: 64 * MiB },
        // An arrow function: Elysia reads a hook's source to see what it uses, and on the compiled
        // binary's minified method shorthand (`transform(o){…}`) it printed a warning with the
        // code to stdout, among the JSON log lines.
        transform: context => {
          if (!isEncryptedChat(context.request.headers, context.body)) return
          encryptedBodies.set(context.request, context.body)
          ;(context as { body: unknown }).body = PLACEHOLDER
        },
        body: ChatCompletionsBody,
        response: { 200: ChatCompletionResponse, ...openaiErrors },
        detail: {
          ...readsParameters(ENCRYPTED_HEADERS),
          ...eventStream('With stream: true: `data:` lines each holding a chat.completion.chunk, then `data: [DONE]`; an error after the first byte is an in-band `data:` line with an error object. Keep-alive comment lines (`: ping`) while the upstream is quiet.'),
          summary: 'Create a chat completion',
          description:
            'OpenAI Chat Completions: streaming (SSE, `[DONE]` terminated, usage with stream_options.include_usage), function tools, ' +
            'reasoning (reasoning_effort minimal, low, medium, high, xhigh, max: xhigh and max as written to Anthropic adaptive backends, else as high; reasoning_content in replies), response_format json_schema, `file` content parts (file_data as a base64 ' +
            'data URL, at most 1 MiB decoded: the text is extracted and given to the model as a delimited text part; one document-parse unit per file). ' +
            'Billed from the upstream-reported usage, settled before the final frame. Errors use the OpenAI envelope. ' +
            '`:confidential` models attest their backend with a fresh challenge ' +
            'before every call (503 `unavailable` when the evidence is empty or contradicts it). `:encrypted` models need the `svc-encrypted` ' +
            'headers (spec 4.10): every content field is ciphertext for the attested model key; the gateway checks shapes, pins the key to fresh ' +
            'evidence, relays the bytes undecrypted (streams pass through byte for byte), and bills from the envelope estimate, settled from the ' +
            "backend's usage. With `svc-encrypted-response-evidence: 1` (stream false) the reply adds `svc_response_evidence` (raw body and signature).",
        },
      },
    )
    .post(
      '/messages',
      async ({ body, principal, request, set, server }) => {
        // The Anthropic SDK reads the request id from `request-id` (message._request_id).
        set.headers['request-id'] = requestIdOf(set)
        refuseEncryptedOn('POST /v1/messages', request, body.model)
        try {
          const chat = decodeMessages(body, catalog.resolve(body.model))
          const reply = await runChat(pipeline, { ...httpCall({ principal, request, set, server }), request: chat, encoder: messages, includeUsage: true, uncensored: body.uncensored })
          return reply as typeof MessageResponse.static
        } catch (error) {
          throw renameParam(error, messagesParams(body))
        }
      },
      {
        // Spec §8: inference routes other than chat take at most 4 MiB.
        auth: { mode: 'inference', jsonBody: 4 * MiB },
        body: MessagesBody,
        response: { 200: MessageResponse, ...anthropicErrors },
        detail: {
          ...eventStream('With stream: true: named events (`event:` and `data:` lines) message_start, content_block_start, content_block_delta, content_block_stop, ping, message_delta, message_stop; or an in-band `error` event.'),
          summary: 'Create a message (Anthropic Messages)',
          description:
            'Anthropic Messages API to any backend: system, text/image/document/tool_use/tool_result blocks, tools and tool_choice, ' +
            'thinking (enabled with budget_tokens, or adaptive; display summarized; an Anthropic backend gets the form its model takes, budget or adaptive, per the catalog) ' +
            'with thinking and redacted_thinking blocks and their signatures kept in order across turns, ' +
            'output_config (format json_schema: structured outputs, as messages.parse() sends; effort low, medium, high, xhigh or max: xhigh and max as written to Anthropic adaptive backends, else as high), ' +
            'stop_sequences, temperature, top_p, top_k (passed to backends that have it), metadata.user_id (never forwarded). ' +
            'Streaming (stream: true) sends message_start, content_block_start/_delta/_stop, ping, message_delta (stop_reason, usage), ' +
            'message_stop, or an in-band error event. Accepts x-api-key or Authorization: Bearer; anthropic-version and anthropic-beta ' +
            'headers are accepted, not interpreted and not forwarded (a backend gets no beta). cache_control hints (top-level and on blocks) are accepted and ignored: no backend is sent one. Billed like chat completions, ' +
            'settled before the final frame. Errors use the Anthropic envelope. Encrypted (:encrypted models, svc-encrypted) is refused.',
        },
      },
    )
    .post(
      '/messages/count_tokens',
      async ({ body, request, set }) => {
        set.headers['request-id'] = requestIdOf(set)
        refuseEncryptedOn('POST /v1/messages/count_tokens', request, body.model)
        const chat = decodeCountTokens(body, catalog.resolve(body.model))
        let exact: number | undefined
        // Documents are extracted (and billed) only by a real call, so a backend never counts a
        // raw file part: with one, the answer is the estimate, which counts files at their bytes.
        if (!hasFileParts(chat)) {
          try {
            exact = await pipeline.router.countTokens?.(chat.route, chat, { signal: request.signal, requestId: requestIdOf(set) })
          } catch (error) {
            throw toApiError(error)
          }
        }
        return { input_tokens: exact ?? estimatedCountTokens(chat) }
      },
      {
        auth: { mode: 'inference', jsonBody: 4 * MiB },
        body: CountTokensBody,
        // Not billed: its 429 is only ever rate_limited.
        response: { 200: TokenCountResponse, ...dialectErrors(AnthropicErrorResponse, false) },
        detail: {
          summary: 'Count the input tokens of a message (Anthropic Messages)',
          description:
            'Not billed; authenticated and rate-limited like inference. Exact when the model\'s first backend is Anthropic ' +
            '(its own count_tokens) and the messages carry no document (documents are extracted only by a real call). Otherwise an estimate: UTF-8 bytes ÷ 4 of text, reasoning, tool calls, results and tool ' +
            'definitions, plus 4 per message and 1600 per image (the figure the gateway uses to check context fit). Images by ' +
            'URL and documents count at those flat or byte rates, not as the backend will tokenise them.',
        },
      },
    )
    .post(
      '/responses',
      async ({ body, principal, request, set, server }) => {
        try {
          refuseEncryptedOn('POST /v1/responses', request, body.model)
          const chat = decodeResponses(body, catalog.resolve(body.model))
          const reply = await runChat(pipeline, { ...httpCall({ principal, request, set, server }), request: chat, encoder: responsesEncoder(body), includeUsage: true, uncensored: body.uncensored })
          return reply as typeof ResponseObject.static
        } catch (error) {
          throw renameParam(error, RESPONSES_PARAMS)
        }
      },
      {
        // Spec §8: inference routes other than chat take at most 4 MiB.
        auth: { mode: 'inference', jsonBody: 4 * MiB },
        body: ResponsesBody,
        response: { 200: ResponseObject, ...openaiErrors },
        detail: {
          ...eventStream('With stream: true: named events (`event:` and `data:` lines) from response.created through response.completed, or response.incomplete, or response.failed for a failure after the first byte; each data object carries its sequence_number. Keep-alive comment lines (`: ping`) while the upstream is quiet.'),
          summary: 'Create a model response',
          description:
            'OpenAI Responses: input as a string or items (messages, function_call, function_call_output, reasoning), instructions, ' +
            'function tools, reasoning (effort minimal to max, xhigh and max as high where the backend takes no more; summary; reasoning items carry the upstream signature in encrypted_content), ' +
            'text.format (text, json_object, json_schema), and streaming (response.created … response.completed, each event with its sequence_number). ' +
            'Nothing is stored: store: true, previous_response_id and conversation are 400. Encrypted models are refused (Chat Completions only). ' +
            'Billed from the upstream-reported usage, settled before the final event. Errors use the OpenAI envelope.',
        },
      },
    )
}
