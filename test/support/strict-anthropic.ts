import { afterAll, beforeAll, beforeEach } from 'bun:test'
import type Anthropic from '@anthropic-ai/sdk'
import type OpenAI from 'openai'
import type { TurnScript } from '../providers/conformance'
import { anthropicWire } from '../providers/anthropic-wire'
import { openAIWire } from '../providers/openai-wire'
import { paygConfig, startServedGateway, upstreamProvider } from './gateway'
import type { TestApp } from './harness'

/** Refuses budget thinking, as Opus 4.7 on does. */
export const ADAPTIVE_ONLY_MODEL = 'claude-opus-4-7'
/** Refuses adaptive thinking, as every Claude before 4.6 does. */
export const BUDGET_ONLY_MODEL = 'claude-sonnet-4-5'

/** A request as the upstream saw it: path and parsed body. */
export interface StrictReceived {
  readonly path: string
  readonly body: any
}

/** The `providers:` entry `claude` for a strict upstream at `url` (its key in UPSTREAM_KEY). */
export function strictAnthropicProvider(url: string): string {
  return `  - { id: claude, type: anthropic, base_url: "${url}/v1", api_key_env: UPSTREAM_KEY, connect_timeout_ms: 5000, idle_timeout_ms: 5000 }`
}

/**
 * A Messages upstream on port 0 that validates what the scripted FakeUpstream takes on trust,
 * answering Anthropic's own 400 (messages as the API words them) for:
 * - budget thinking on ADAPTIVE_ONLY_MODEL, adaptive thinking on BUDGET_ONLY_MODEL;
 * - a stop sequence without non-whitespace;
 * - a final (prefill) assistant turn whose last text block ends in whitespace, or whose last
 *   block is thinking;
 * - tool_use or tool_result blocks in a request without `tools`;
 * - a tool_use id used twice in the request, or a tool_result whose id no tool_use of the turn
 *   before it has.
 * Otherwise it counts tokens (42) or answers `turn`: a stream, or one JSON message for
 * `stream: false`. `overloadNext()` answers the next call 529.
 */
export function strictAnthropic(turn: TurnScript) {
  const received: StrictReceived[] = []
  let overloadNext = false
  const refuse = (message: string) => Response.json({ type: 'error', error: { type: 'invalid_request_error', message } }, { status: 400 })
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const body = (await request.json()) as any
      const path = new URL(request.url).pathname
      received.push({ path, body })
      if (overloadNext) {
        overloadNext = false
        return Response.json({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }, { status: 529 })
      }
      const type = body.thinking?.type
      if (body.model === ADAPTIVE_ONLY_MODEL && type === 'enabled') {
        return refuse('"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.')
      }
      if (body.model === BUDGET_ONLY_MODEL && type === 'adaptive') return refuse('adaptive thinking is not supported on this model')
      if ((body.stop_sequences ?? []).some((sequence: string) => sequence.trim() === '')) return refuse('stop_sequences: each stop sequence must contain non-whitespace')
      const final = body.messages?.at(-1)
      const finalText = final?.role === 'assistant' ? (typeof final.content === 'string' ? final.content : final.content.at(-1)?.type === 'text' ? final.content.at(-1).text : undefined) : undefined
      if (typeof finalText === 'string' && /\s$/.test(finalText)) return refuse('messages: final assistant content cannot end with trailing whitespace')
      const finalBlock = final?.role === 'assistant' && Array.isArray(final.content) ? final.content.at(-1)?.type : undefined
      if (finalBlock === 'thinking' || finalBlock === 'redacted_thinking') return refuse(`messages.${body.messages.length - 1}: The final block in an assistant message cannot be \`${finalBlock}\`.`)
      const toolBlocks = (body.messages ?? []).some((message: any) => message.content.some((block: any) => block.type === 'tool_use' || block.type === 'tool_result'))
      if (toolBlocks && !(body.tools?.length > 0)) return refuse('Requests which include `tool_use` or `tool_result` blocks must define tools.')
      const toolIds = toolIdFault(body.messages ?? [])
      if (toolIds !== undefined) return refuse(toolIds)
      if (path.endsWith('/count_tokens')) return Response.json({ input_tokens: 42 })
      if (body.stream === false) return Response.json(anthropicWire.json(turn))
      return new Response(anthropicWire.stream(turn), { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    received,
    overloadNext: () => (overloadNext = true),
    stop: () => server.stop(true),
  }
}

/** Anthropic's refusal of a history whose tool ids repeat or do not pair, as the API words it. */
function toolIdFault(messages: any[]): string | undefined {
  const used = new Set<string>()
  for (const [at, message] of messages.entries()) {
    for (const [position, block] of message.content.entries()) {
      if (block.type === 'tool_use') {
        if (used.has(block.id)) return `messages.${at}.content.${position}: \`tool_use\` ids must be unique`
        used.add(block.id)
      }
      const before = messages[at - 1]?.content ?? []
      if (block.type === 'tool_result' && !before.some((call: any) => call.type === 'tool_use' && call.id === block.tool_use_id)) {
        return `messages.${at}.content.${position}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${block.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`
      }
    }
  }
  return undefined
}

/** Its OpenAI-compatible counterpart: a streaming upstream on port 0 that records each request body. */
export function recordingCompatible(turn: TurnScript) {
  const bodies: any[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      bodies.push(await request.json())
      return new Response(openAIWire.stream(turn), { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  return { bodies, url: `http://127.0.0.1:${server.port}/v1`, stop: () => server.stop(true) }
}

/** A model line for these suites: 1 and 2 USD per million tokens, a 200k context, tools (and reasoning controls when asked). */
export function claudeModelLine(id: string, backends: string, options: { maxOutputTokens?: number; reasoning?: boolean } = {}): string {
  const capabilities = options.reasoning === true ? '{ tools: true, reasoning: true }' : '{ tools: true }'
  return `  - { id: ${id}, backends: ${backends}, price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 200000, max_output_tokens: ${options.maxOutputTokens ?? 8192}, capabilities: ${capabilities} }`
}

/** A started strict-upstreams suite (its fields are set once the describe block's beforeAll ran). */
export interface StrictUpstreamsSuite {
  t: TestApp
  orgId: string
  openai: OpenAI
  anthropic: Anthropic
  claude: ReturnType<typeof strictAnthropic>
  /** Absent unless the suite asked for it. */
  compatible: ReturnType<typeof recordingCompatible>
}

/**
 * A served gateway in front of a strict Anthropic upstream (provider `claude`) and, with
 * `compatible`, a recording OpenAI-compatible one (provider `oai`), both answering `turn`, with
 * the model lines `models`. Registers the describe block's hooks: started before all, stopped
 * after all, and what the upstreams received forgotten before each test.
 */
export function strictUpstreamsSuite(turn: TurnScript, models: string[], options: { compatible?: boolean; credit?: bigint } = {}): StrictUpstreamsSuite {
  const suite = {} as StrictUpstreamsSuite
  beforeAll(async () => {
    suite.claude = strictAnthropic(turn)
    const providers = [strictAnthropicProvider(suite.claude.url)]
    if (options.compatible === true) {
      suite.compatible = recordingCompatible(turn)
      providers.push(upstreamProvider('oai', 'openai-compatible', suite.compatible.url, 'UPSTREAM_KEY'))
    }
    const served = await startServedGateway(paygConfig(providers, models), { UPSTREAM_KEY: 'sk-upstream-0123456789' }, { credit: options.credit })
    Object.assign(suite, { t: served.t, orgId: served.orgId, openai: served.openai, anthropic: served.anthropic })
  })
  afterAll(async () => {
    suite.claude.stop()
    suite.compatible?.stop()
    await suite.t.close()
  })
  beforeEach(() => {
    suite.claude.received.length = 0
    if (suite.compatible !== undefined) suite.compatible.bodies.length = 0
  })
  return suite
}
