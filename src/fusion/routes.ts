import { Elysia, t } from 'elysia'
import { authMacro } from '../http/auth'
import { MiB } from '../http/body-limit'
import { eventStream, readsParameters } from '../http/openapi-complete'
import { liftIdleTimeout } from '../http/idle-timeout'
import { authErrors, ErrorResponse } from '../http/openapi-schemas'
import { requestIdOf } from '../http/request-context'
import type { KeyService } from '../keys/service'
import type { Limits } from '../limits/admission'
import { refuseEncrypted } from '../inference/encrypted'
import { recordOf } from '../observability/request-log'
import { fusionEventStream } from './event-stream'
import { FusionBody, FusionResult } from './schema'
import { planFusion, runFusion, type FusionDeps } from './service'

/** POST /api/v1/chat/fusion (spec §4.5): two or three models answer, then a judge's synthesis. */
export function fusionRoutes(keys: KeyService, limits: Limits, fusion: FusionDeps) {
  return new Elysia({ prefix: '/api/v1', tags: ['Fusion'] })
    .use(authMacro(keys, limits))
    .post(
      '/chat/fusion',
      async ({ body, principal, request, set, server }) => {
        // Encrypted chat exists only on /v1/chat/completions (`:encrypted` participants are refused in privacy.ts).
        refuseEncrypted(request.headers, undefined, 'POST /api/v1/chat/fusion')
        // Participants and the judge run one after the other: Bun's idle timeout must not cut the response.
        liftIdleTimeout(server, request)
        const gone = new AbortController()
        const onClientGone = () => gone.abort()
        request.signal.addEventListener('abort', onClientGone, { once: true })
        const input = { principal, request: body, idempotencyKey: request.headers.get('idempotency-key'), requestId: requestIdOf(set), signal: gone.signal }
        if (body.stream !== true) {
          try {
            return await runFusion(fusion, input)
          } finally {
            request.signal.removeEventListener('abort', onClientGone)
          }
        }
        // Refusals (access, validation) are found before the stream starts, so they keep their status.
        const plan = await planFusion(fusion, input)
        // As a chat stream's, the line is written when the run ends (and gives the idle timeout
        // back): a client that left is `cancelled`, with the 200 it was sent.
        const record = recordOf(request)
        if (record !== undefined) record.sink.defer(record)
        const ended = () => {
          if (record === undefined) return
          if (gone.signal.aborted) record.outcome = 'cancelled'
          record.sink.end(record)
        }
        // Elysia passes a Response through untouched (the schema documents the JSON form). A run
        // refused as a whole rejects: its HTTP error, logged as such (`ended` has given the line back).
        return (await fusionEventStream(fusion, plan, onClientGone, ended)) as unknown as typeof FusionResult.static
      },
      {
        auth: { mode: 'inference', jsonBody: 4 * MiB },
        body: FusionBody,
        response: {
          200: FusionResult, 400: ErrorResponse, ...authErrors(ErrorResponse, { billed: true }), 413: ErrorResponse,
        },
        detail: {
          ...readsParameters([{ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', format: 'uuid' }, description: 'A UUID: the billing key of each participant and of the synthesis derives from it, so a repeated request never bills a part twice (inference may run again; it is not a cache: the repeat reports the usage of its own run, though a part already charged is not charged again). A key this organization was already charged under for a different request is 400 invalid_request (param Idempotency-Key) before anything runs: send a new key for a new request' }]),
          ...eventStream('With stream: true: named events (`event:` and `data:` lines) participant.started, participant.finished, participant.failed, synthesis.started, synthesis.delta, then fusion.completion with the result object, or `error` with the error envelope. The stream starts once a participant is admitted: a run refused as a whole (funds, spend cap, concurrency) is its HTTP error, as without stream. Keep-alive comment lines (`: ping`) while quiet.'),
          summary: 'Fusion: two or three models answer, then a synthesis',
          description:
            'Sends the conversation to 2 or 3 distinct models concurrently, each through the chat pipeline with its own deadline, then has the judge ' +
            '(`judge`, default the configured one) synthesize their answers. Needs a plan with Fusion access (403 otherwise; a prepaid balance ' +
            'alone does not unlock it). Each participant and the synthesis are reserved, settled and capped separately (a failed part is not ' +
            'billed, except a synthesis already streamed: like a cut stream, its input and the output sent; and a part whose call ended without answer ' +
            'text, an empty reply or a refusal, which failed but is billed for what it used); with `Idempotency-Key` (a UUID) a repeated request never bills a part twice, and a key reused for a different request is a 400. Provider failures give 200 with `status` ' +
            '`partial` or `failed` and per-participant `error` / `error_code`; when every participant is refused before reaching a provider ' +
            '(validation, a request no backend\'s adapter can send, funds, spend cap) that error is returned instead. A run holds one inference concurrency slot for all its parts: ' +
            'with none free it is refused as a whole (429 rate_limited) before anything is billed. Privacy: Anonymous and Private models mix; ' +
            'Confidential only with Confidential (then the judge is Confidential and `attestation` / `judge_attestation` carry model, nonce, ' +
            'signing_address, signing_algo and proof_format: the fresh nonce each part attested with and the key it bound); Encrypted models and the ' +
            'svc-encrypted headers are refused (400). Function tools are refused. `stream: true` sends ' +
            'progress events (text/event-stream) ending in `fusion.completion`.',
        },
      },
    )
}
