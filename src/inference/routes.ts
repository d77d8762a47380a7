import { Elysia } from 'elysia'
import type { ModelRoute } from '../catalog/types'
import { authMacro } from '../http/auth'
import { MiB, rawBodyOf } from '../http/body-limit'
import { requestIdOf } from '../http/request-context'
import type { KeyService } from '../keys/service'
import type { Limits } from '../limits/admission'
import { decodeChatCompletions } from './dialects/chat-completions/decode'
import { encodeChatCompletion } from './dialects/chat-completions/encode'
import { ChatCompletionsStreamEncoder } from './dialects/chat-completions/encode-stream'
import { ChatCompletionResponse, ChatCompletionsBody } from './dialects/chat-completions/schema'
import { OpenAIErrorResponse } from '../http/openapi-schemas'
import type { DialectEncoder } from './dialects/types'
import { ApiError } from '../http/errors'
import { isEncryptedChat, relayEncryptedChat, type EncryptedDeps } from './encrypted-relay'
import { runChat, type PipelineDeps } from './pipeline'

const chatCompletions: DialectEncoder = {
  encode: encodeChatCompletion,
  streamEncoder: meta => new ChatCompletionsStreamEncoder(meta),
}

/**
 * Encrypted bodies (ciphertext names, encrypted parameter schemas) are not Chat Completions
 * bodies the schema could check: they are set aside here, before validation, and the schema
 * sees a placeholder. encrypted-body.ts checks them instead.
 */
const encryptedBodies = new WeakMap<Request, unknown>()
const PLACEHOLDER = Object.freeze({ model: 'encrypted', messages: [{ role: 'user', content: '' }] })

/** POST /v1/chat/completions (spec §4.12, §4.10): OpenAI Chat Completions to any configured backend; Encrypted requests are relayed. */
export function inferenceRoutes(keys: KeyService, limits: Limits, catalog: { resolve(id: string): ModelRoute }, pipeline: PipelineDeps, encrypted?: EncryptedDeps) {
  return new Elysia({ prefix: '/v1', tags: ['Inference'] })
    .use(authMacro(keys, limits))
    .post(
      '/chat/completions',
      async ({ body, principal, request, set, server }) => {
        if (encryptedBodies.has(request)) {
          if (encrypted === undefined) throw new ApiError('invalid_request', 'Encrypted chat is not configured on this gateway')
          return relayEncryptedChat(encrypted, {
            principal,
            body: encryptedBodies.get(request),
            rawBody: rawBodyOf(request) ?? new Uint8Array(0),
            requestId: requestIdOf(set),
            httpRequest: request,
            disableIdleTimeout: () => server?.timeout(request, 0),
          }) as unknown as typeof ChatCompletionResponse.static
        }
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
        transform(context) {
          if (!isEncryptedChat(context.request.headers, context.body)) return
          encryptedBodies.set(context.request, context.body)
          ;(context as { body: unknown }).body = PLACEHOLDER
        },
        body: ChatCompletionsBody,
        response: { 200: ChatCompletionResponse, 400: OpenAIErrorResponse, 401: OpenAIErrorResponse, 413: OpenAIErrorResponse, 429: OpenAIErrorResponse, 502: OpenAIErrorResponse, 503: OpenAIErrorResponse },
        detail: {
          summary: 'Create a chat completion',
          description:
            'OpenAI Chat Completions: streaming (SSE, `[DONE]` terminated, usage with stream_options.include_usage), function tools, ' +
            'reasoning (reasoning_effort; reasoning_content in replies), response_format json_schema. Billed from the upstream-reported usage, ' +
            'settled before the final frame. Errors use the OpenAI envelope. `:confidential` models attest their backend with a fresh challenge ' +
            'before every call (503 `unavailable` when the evidence is empty or contradicts it). `:encrypted` models need the `svc-encrypted` ' +
            'headers (spec 4.10): every content field is ciphertext for the attested model key; the gateway checks shapes, pins the key to fresh ' +
            'evidence, relays the bytes undecrypted (streams pass through byte for byte), and bills from the envelope estimate, settled from the ' +
            "backend's usage. With `svc-encrypted-response-evidence: 1` (stream false) the reply adds `svc_response_evidence` (raw body and signature).",
        },
      },
    )
}
