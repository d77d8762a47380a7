import { Type } from '@sinclair/typebox'
import type { RouteResolver } from '../../fusion/privacy'
import { participantHosted, runFusion, type FusionDeps, type FusionProgress } from '../../fusion/service'
import type { FusionRequest, FusionResultBody } from '../../fusion/schema'
import { ApiError } from '../../http/errors'
import { MaxCharacters } from '../../http/openapi-schemas'
import { plainPattern } from '../../http/validation-message'
import { tool, type ToolContext } from './types'

const ModelId = MaxCharacters(256, { minLength: 1, description: 'Model id from svc.list_models' })

/** The input of svc.chat_fusion: POST /api/v1/chat/fusion as a tool (spec §4.5). */
export const CHAT_FUSION_INPUT = Type.Object(
  {
    models: Type.Array(ModelId, { minItems: 2, maxItems: 3, uniqueItems: true, description: 'Two or three distinct model ids' }),
    request_id: Type.String({
      ...plainPattern('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$', 'a UUID, e.g. 0f8fad5b-d9cb-469f-a165-70867728950e'),
      description: 'A UUID you choose; the idempotency key of the billing (reuse it only to retry the same request)',
    }),
    // Bounded by the request body's 4 MiB (mcp/routes.ts): a maxLength here would count UTF-16
    // units where JSON Schema counts characters, and a pattern of that size is too slow (MaxCharacters).
    prompt: Type.String({ minLength: 1, description: 'The question or task (the whole request body is at most 4 MiB)' }),
    system: Type.Optional(Type.String({ description: 'Optional system instructions for every participant' })),
    web_search: Type.Optional(
      Type.Boolean({ description: 'Web search for the participants. Default: on for every participant whose model supports it; true requires it of every participant; false turns it off' }),
    ),
    web_fetch: Type.Optional(
      Type.Boolean({ description: 'Fetch the URLs named in the prompt. Default: on for every participant whose model supports it; true requires it of every participant; false turns it off' }),
    ),
    judge: Type.Optional(MaxCharacters(256, { minLength: 1, description: 'The model that writes the synthesis (default: the gateway\'s configured judge)' })),
    max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2 })),
  },
  { additionalProperties: false },
)

/** Attestation of a Confidential part, as on the HTTP route. */
const Attestation = Type.Object({ model: Type.String(), nonce: Type.String(), signing_address: Type.String(), signing_algo: Type.String(), proof_format: Type.String() })

const Participant = Type.Object({
  id: Type.String(),
  model: Type.String(),
  output: Type.String(),
  finish_reason: Type.String(),
  latency_ms: Type.Integer(),
  prompt_tokens: Type.Integer(),
  tokens: Type.Integer(),
  error: Type.Optional(Type.String()),
  error_code: Type.Optional(Type.String()),
  web_search: Type.Boolean({ description: 'Whether hosted web search was on for this participant' }),
  web_fetch: Type.Boolean({ description: 'Whether hosted web fetch was on for this participant' }),
  attestation: Type.Optional(Attestation),
})

/** The structured content: the fusion.completion object of the HTTP route, plus the request id and each participant's web tools. */
const CHAT_FUSION_OUTPUT = Type.Object({
  object: Type.Literal('fusion.completion'),
  created: Type.Integer(),
  request_id: Type.String(),
  status: Type.Union([Type.Literal('complete'), Type.Literal('partial'), Type.Literal('failed')]),
  judge: Type.String(),
  models: Type.Array(Participant),
  synthesis: Type.String(),
  synthesis_prompt_tokens: Type.Integer(),
  synthesis_tokens: Type.Integer(),
  synthesis_finish_reason: Type.Optional(Type.String()),
  synthesis_error: Type.Optional(Type.String()),
  synthesis_error_code: Type.Optional(Type.String()),
  judge_attestation: Type.Optional(Attestation),
})

/**
 * One line of progress per Fusion step: each participant starting and ending, then the synthesis.
 * Sent from the first participant's admission on, as the route's event stream starts: a run refused
 * as a whole (funds, a drain) announces nothing (regression QA: "a: started" for parts never run).
 */
function progressReporter(report: NonNullable<ToolContext['progress']>, participants: number): { onProgress: (event: FusionProgress) => void; onAdmitted: () => void } {
  const total = participants * 2 + 1
  let step = 0
  let held: FusionProgress[] | undefined = []
  const send = (event: FusionProgress) => {
    step += 1
    if (event.type === 'participant.started') report(step, `${event.model}: started`, total)
    else if (event.type === 'participant.finished') report(step, `${event.model}: answered (${event.participant.tokens} tokens, ${event.participant.latency_ms} ms)`, total)
    else if (event.type === 'participant.failed') report(step, `${event.model}: failed (${event.participant.error_code}): ${event.participant.error}`, total)
    else if (event.type === 'synthesis.started') report(step, `${event.judge}: writing the synthesis`, total)
  }
  return {
    onProgress: event => (held ? held.push(event) : send(event)),
    onAdmitted: () => {
      const waiting = held
      held = undefined
      for (const event of waiting ?? []) send(event)
    },
  }
}

/** The text content: the synthesis (or, without one, the answers), then one status line per participant. */
function summary(result: FusionResultBody, web: Array<{ webSearch: boolean; webFetch: boolean }>): string {
  const lines: string[] = []
  if (result.synthesis !== '') lines.push(result.synthesis, '')
  else if (result.synthesis_error) lines.push(`The synthesis by ${result.judge} failed (${result.synthesis_error_code}): ${result.synthesis_error}`, '')
  if (result.synthesis === '') {
    for (const entry of result.models) if (!entry.error) lines.push(`Answer of ${entry.model}:`, entry.output, '')
  }
  lines.push(`Fusion ${result.status}; judge ${result.judge}.`)
  result.models.forEach((entry, index) => {
    const tools = [web[index]!.webSearch ? 'web search' : '', web[index]!.webFetch ? 'web fetch' : ''].filter(Boolean)
    const used = tools.length > 0 ? ` [${tools.join(', ')}]` : ''
    lines.push(entry.error ? `- ${entry.model}: failed (${entry.error_code}): ${entry.error}${used}` : `- ${entry.model}: answered (${entry.tokens} tokens, ${entry.latency_ms} ms)${used}`)
  })
  return lines.join('\n')
}

/**
 * svc.chat_fusion: runFusion, the function behind POST /api/v1/chat/fusion, so access (a plan
 * with Fusion), validation, privacy mixing, per-part billing, spend caps and the Idempotency-Key
 * (here `request_id`) are exactly the route's. Web search and fetch are on by default, but only
 * for participants whose model supports them (FusionInput.hostedDefaults), and search only when
 * the gateway has a search backend (`searchConfigured`; hosted web_search without one is a 400):
 * a default must not make a participant fail. An explicit `true` is the HTTP flag: every
 * participant must support it, else that participant is refused (all refused: an isError result).
 */
export function chatFusionTool(catalog: RouteResolver, fusion: FusionDeps, searchConfigured: boolean) {
  return tool({
    name: 'svc.chat_fusion',
    title: 'Ask two or three models, then synthesize',
    description:
      'Sends one prompt to two or three different models, then a judge model writes a synthesis of their answers. ' +
      'Returns the synthesis plus each participant\'s answer or error. Web search and web fetch are on by default for ' +
      'every participant whose model supports them (see supports_web_search / supports_web_fetch in svc.list_models; ' +
      'web search only where the gateway has a search backend); ' +
      'turn them off with web_search: false / web_fetch: false. Needs a plan with Fusion access; each participant, ' +
      'the synthesis and each web search or page fetched are billed separately. Reuse request_id to retry without being billed twice.',
    inputSchema: CHAT_FUSION_INPUT,
    outputSchema: CHAT_FUSION_OUTPUT,
    billed: true,
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true, idempotentHint: false },
    async run(args, context) {
      // Participants and the judge run one after the other: Bun's idle timeout must not cut the response.
      context.disableIdleTimeout?.()
      const request: FusionRequest = {
        models: args.models,
        messages: [...(args.system ? [{ role: 'system' as const, content: args.system }] : []), { role: 'user' as const, content: args.prompt }],
        ...(args.judge !== undefined ? { judge: args.judge } : {}),
        ...(args.max_tokens !== undefined ? { max_tokens: args.max_tokens } : {}),
        ...(args.temperature !== undefined ? { temperature: args.temperature } : {}),
        // Only an explicit true is the route's flag (required of every participant).
        ...(args.web_search === true ? { web_search: true } : {}),
        ...(args.web_fetch === true ? { web_fetch: true } : {}),
      }
      const hostedDefaults = { webSearch: args.web_search === undefined && searchConfigured, webFetch: args.web_fetch === undefined }
      const result = await runFusion(fusion, {
        principal: context.principal, request, idempotencyKey: args.request_id, requestId: context.requestId, signal: context.signal,
        hostedDefaults, ...(context.progress ? progressReporter(context.progress, args.models.length) : {}),
      }).catch(error => {
        // The route's Idempotency-Key is this tool's request_id (a reused one is refused alike).
        if (error instanceof ApiError && error.param === 'Idempotency-Key') {
          throw new ApiError(error.code, error.message.replaceAll('Idempotency-Key', 'request_id').replace('send a new key', 'send a new request_id'), 'request_id')
        }
        throw error
      })
      // runFusion resolved every id, so these resolve too; the same rule decides what each participant ran.
      // A tool its model lacks was not on: asked for explicitly, it refused that participant (QA: shown as on).
      const flags = { webSearch: args.web_search === true, webFetch: args.web_fetch === true }
      const web = args.models.map(id => {
        const route = catalog.resolve(id)
        const hosted = participantHosted(route, flags, hostedDefaults)
        return { webSearch: hosted.webSearch && route.capabilities.supportsWebSearch, webFetch: hosted.webFetch && route.capabilities.supportsWebFetch }
      })
      // The route's object as it is (every field it has, now and later), plus what MCP adds.
      const structured = {
        ...result,
        request_id: args.request_id,
        models: result.models.map((entry, index) => ({ ...entry, web_search: web[index]!.webSearch, web_fetch: web[index]!.webFetch })),
      }
      // Every participant failed at its provider: the run is a failure, still reported in full.
      return { text: summary(result, web), structured, isError: result.status === 'failed' }
    },
  })
}
