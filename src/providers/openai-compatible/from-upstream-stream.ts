// Chat Completions stream chunks → canonical ChatEvents. Knows nothing about framing: it reads
// decoded SSE events (src/http/sse.ts) and never touches bytes (ARCHITECTURE.md §1.3).

import type { ChatEvent, Usage } from '../../inference/canonical'
import type { SseEvent } from '../../http/sse'
import { UpstreamError, type UpstreamErrorKind } from '../types'
import { isWholeJson } from '../../inference/tool-input'
import { mapFinishReason } from './map-finish-reason'
import { tokenCount } from '../token-count'

/** Identifies the call for error events and for ids the upstream omits. */
export interface StreamContext {
  readonly provider: string
  readonly model: string
  readonly requestId: string
}

/**
 * Translates one upstream stream. Ends after exactly one terminal event: `finish`, or an
 * in-band `error` (kind `server`) for an upstream `error` chunk, malformed JSON, or a stream
 * that ends with neither a `finish_reason` nor `[DONE]` ("stream ended early"). Failures of the
 * byte source itself (reset, idle timeout, abort) propagate as thrown errors for the caller to
 * classify.
 *
 * Usage is exposed exactly as reported, never estimated here: `inputTokens` is `prompt_tokens`
 * (cached tokens included, as OpenAI counts them) and `cachedInputTokens` the cached subset;
 * `outputTokens` is `completion_tokens` (reasoning included) and `reasoningTokens` the reasoning
 * subset. The usage chunk follows the `finish_reason` chunk, so `finish` is emitted at `[DONE]`
 * (or at a clean end after a `finish_reason`). A count the upstream never sent is 0, and the
 * optional subsets stay undefined: the meter (src/inference/meter.ts) must treat a finish whose
 * input and output are both 0 as unreported and estimate (SECURITY-NOTES.md §4, never bill zero).
 */
export async function* fromUpstreamStream(events: AsyncIterable<SseEvent>, context: StreamContext): AsyncGenerator<ChatEvent> {
  const translator = new ChunkTranslator(context)
  const out: ChatEvent[] = []
  for await (const event of events) {
    translator.event(event, out)
    for (const translated of out) yield translated
    out.length = 0
    if (translator.ended) return
  }
  translator.end(out)
  yield* out
}

type BlockKind = 'text' | 'reasoning'

interface ToolBlock {
  block: number | undefined
  callId: string
  /** The id the upstream gave (undefined when it gave none): callId, unless another call had it. */
  upstreamId: string | undefined
  name: string
  /** Its argument text so far. */
  text: string
  /** Argument text received before the call's name (started blocks stream it directly). */
  pending: string
}

/**
 * The per-stream state machine. Text and reasoning blocks are sequential (a switch between them
 * ends the open one); tool calls get one block each, keyed by the chunk's `index`, opened on
 * first sight and ended at the finish, so parallel calls interleaved by a backend stay correct.
 * Only choice 0 is read: the gateway never asks for `n > 1`.
 */
export class ChunkTranslator {
  /** Whether the terminal event has been produced. */
  ended = false
  private started = false
  private nextBlock = 0
  private open: { kind: BlockKind; block: number } | undefined
  private readonly tools = new Map<number, ToolBlock>()
  /** Calls whose index another call took (toolCallDelta), keyed −1, −2, … in `tools`. */
  private retiredTools = 0
  /** The ids of this answer's calls: a client pairs results by id, so no two calls share one. */
  private readonly callIds = new Set<string>()
  private finishReason: string | undefined
  private sawToolCalls = false
  private usage: Record<string, unknown> | undefined
  /** Whether `usage` came at or after the finish_reason, so its output count covers the whole answer. */
  private usageFinal = false

  constructor(private readonly context: StreamContext) {}

  /**
   * Takes over a stream whose first chunks were passed through (pass-through.ts): they started
   * the response and these tool calls, keyed by the upstream's `index`, whose blocks are open.
   */
  resume(tools: Array<{ key: number; block: number; callId: string; name: string; text: string }>): void {
    this.started = true
    for (const tool of tools) {
      this.tools.set(tool.key, { block: tool.block, callId: tool.callId, upstreamId: tool.callId, name: tool.name, text: tool.text, pending: '' })
      this.callIds.add(tool.callId)
      this.nextBlock = Math.max(this.nextBlock, tool.block + 1)
      this.sawToolCalls = true
    }
  }

  /** One SSE event: `[DONE]`, or a chunk's JSON. */
  event(event: SseEvent, out: ChatEvent[]): void {
    if (event.data === '[DONE]') return this.done(out)
    let chunk: unknown
    try {
      chunk = JSON.parse(event.data)
    } catch {
      chunk = undefined
    }
    this.push(chunk, out)
  }

  /** One parsed chunk (undefined when its JSON was malformed). */
  push(chunk: unknown, out: ChatEvent[]): void {
    if (this.ended) return
    if (!isRecord(chunk)) return this.fail(out, 'malformed chunk in upstream stream')
    // OpenAI reports a failure after the 200 as an `error` chunk; vLLM as an object of type "error".
    if (chunk.error !== undefined && chunk.error !== null) return this.fail(out, `upstream stream error: ${errorText(chunk.error)}`, inBandKind(chunk.error))
    if (chunk.object === 'error') return this.fail(out, `upstream stream error: ${errorText(chunk)}`, inBandKind(chunk))
    if (!this.started) {
      this.started = true
      out.push({
        type: 'response-start',
        id: typeof chunk.id === 'string' && chunk.id !== '' ? chunk.id : this.context.requestId,
        model: typeof chunk.model === 'string' && chunk.model !== '' ? chunk.model : this.context.model,
        // `created` is Unix seconds on this wire; canonical times are epoch milliseconds.
        createdAt: typeof chunk.created === 'number' ? chunk.created * 1000 : Date.now(),
      })
    }
    const choices = Array.isArray(chunk.choices) ? chunk.choices : []
    const choice = choices.find(item => isRecord(item) && (item.index ?? 0) === 0) as Record<string, unknown> | undefined
    const finishes = choice !== undefined && typeof choice.finish_reason === 'string' && choice.finish_reason !== ''
    // Usage may ride on any chunk (the final choices-less one, the finish chunk, or every chunk
    // with vLLM's continuous stats): the last one seen wins. Its output count covers the answer
    // only from the finish_reason's chunk on; an earlier one predates output that follows.
    if (isRecord(chunk.usage)) {
      this.usage = chunk.usage
      this.usageFinal = this.finishReason !== undefined || finishes
    }
    // After the finish_reason only usage is expected; stray deltas cannot reopen ended blocks.
    if (choice !== undefined && this.finishReason === undefined) {
      const delta = isRecord(choice.delta) ? choice.delta : isRecord(choice.message) ? choice.message : undefined
      if (delta !== undefined) this.delta(delta, out)
      if (finishes) {
        this.finishReason = choice.finish_reason as string
        this.closeAll(out)
      }
    }
    // Once the finish_reason and a usage at or after it have come, nothing is left to bill or
    // send: the answer ends here, not at [DONE] (a client that leaves before [DONE] is billed the
    // upstream's count, not an estimate).
    if (this.finishReason !== undefined && this.usageFinal) this.finish(out, this.finishReason)
  }

  /** `data: [DONE]`: the upstream says the stream is complete. */
  done(out: ChatEvent[]): void {
    if (this.ended) return
    if (!this.started) return this.fail(out, 'upstream stream ended before any chunk')
    this.finish(out, this.finishReason ?? 'other')
  }

  /** The byte stream ended. Complete only if a finish_reason was seen (some servers omit [DONE]). */
  end(out: ChatEvent[]): void {
    if (this.ended) return
    if (this.finishReason === undefined) return this.fail(out, 'stream ended early')
    this.finish(out, this.finishReason)
  }

  private delta(delta: Record<string, unknown>, out: ChatEvent[]): void {
    // vLLM (older) and DeepSeek send `reasoning_content`; Ollama and newer vLLM send `reasoning`.
    // A server in transition may send both with the same text, so one is read, never both.
    const reasoning = nonEmptyString(delta.reasoning_content) ?? nonEmptyString(delta.reasoning)
    if (reasoning !== undefined) this.textual('reasoning', reasoning, out)
    const content = nonEmptyString(delta.content)
    if (content !== undefined) this.textual('text', content, out)
    // A refusal is what the model said instead of an answer: the client must see it, as text
    // where its format has no refusal field (marked, so a Chat Completions client gets `refusal`).
    const refusal = nonEmptyString(delta.refusal)
    if (refusal !== undefined) this.textual('text', refusal, out, true)
    if (Array.isArray(delta.tool_calls)) {
      delta.tool_calls.forEach((call, position) => {
        if (isRecord(call)) this.toolCallDelta(typeof call.index === 'number' ? call.index : position, call, out)
      })
    } else if (isRecord(delta.function_call)) {
      this.toolCallDelta(0, { function: delta.function_call }, out) // the legacy single-function form
    }
  }

  private textual(kind: BlockKind, delta: string, out: ChatEvent[], refusal = false): void {
    if (this.open?.kind !== kind) {
      this.closeOpen(out)
      this.open = { kind, block: this.nextBlock++ }
      out.push({ type: kind === 'text' ? 'text-start' : 'reasoning-start', block: this.open.block })
    }
    if (refusal) out.push({ type: 'text-delta', block: this.open.block, delta, refusal: true })
    else out.push({ type: kind === 'text' ? 'text-delta' : 'reasoning-delta', block: this.open.block, delta })
  }

  private toolCallDelta(index: number, call: Record<string, unknown>, out: ChatEvent[]): void {
    const fn = isRecord(call.function) ? call.function : {}
    const id = nonEmptyString(call.id)
    const name = nonEmptyString(fn.name)
    const argumentsDelta = typeof fn.arguments === 'string' ? fn.arguments : isRecord(fn.arguments) ? JSON.stringify(fn.arguments) : ''
    let tool = this.tools.get(index)
    // Some backends send a call's id and name only after its first delta (empty, or the start of
    // its arguments): a call with neither yet has no block, so it takes them, keeping its text.
    if (tool !== undefined && id !== undefined && tool.upstreamId === undefined && tool.block === undefined) {
      this.callIds.delete(tool.callId)
      tool.callId = this.callId(id, index)
      tool.upstreamId = id
    }
    // Ollama streams every parallel call at `index` 0 (older builds omit it: the position, 0), each
    // whole in its own chunk: another call there, not more of the same one, when another id comes,
    // or, without ids, a name and new arguments after whole ones (namesAnotherCall). The one before
    // keeps its block, under a key no index uses, to be ended at the finish with the rest.
    if (tool !== undefined && ((id !== undefined && id !== tool.upstreamId && (tool.upstreamId !== undefined || name !== undefined)) || namesAnotherCall(tool, { id, name, arguments: argumentsDelta }))) {
      this.tools.set(-++this.retiredTools, tool)
      tool = undefined
    }
    if (tool === undefined) {
      tool = { block: undefined, callId: this.callId(id, index), upstreamId: id, name: '', text: '', pending: '' }
      this.tools.set(index, tool)
      this.sawToolCalls = true
    }
    if (tool.block === undefined && name !== undefined) tool.name = name
    tool.text += argumentsDelta
    if (tool.block === undefined) {
      // The block opens once the name is known: a start without a name is useless to every client.
      tool.pending += argumentsDelta
      if (tool.name !== '') this.startTool(tool, out)
      return
    }
    if (argumentsDelta !== '') out.push({ type: 'tool-call-delta', block: tool.block, argumentsDelta })
  }

  /**
   * A new call's id: the upstream's, unless it gave none (some llama.cpp and Ollama builds) or
   * another call of this answer has it (some backends number each call `call_0`): then one made
   * up, stable for the request, so each result still pairs with its call.
   */
  private callId(id: string | undefined, index: number): string {
    let callId = id
    for (let suffix = index; callId === undefined || this.callIds.has(callId); suffix += 1) callId = `call_${this.context.requestId}_${suffix}`
    this.callIds.add(callId)
    return callId
  }

  private startTool(tool: ToolBlock, out: ChatEvent[]): void {
    this.closeOpen(out)
    tool.block = this.nextBlock++
    out.push({ type: 'tool-call-start', block: tool.block, callId: tool.callId, name: tool.name })
    if (tool.pending !== '') out.push({ type: 'tool-call-delta', block: tool.block, argumentsDelta: tool.pending })
    tool.pending = ''
  }

  private closeOpen(out: ChatEvent[]): void {
    if (this.open === undefined) return
    out.push({ type: this.open.kind === 'text' ? 'text-end' : 'reasoning-end', block: this.open.block })
    this.open = undefined
  }

  /**
   * Ends every open block, tool calls in block order; a call whose name never came starts now.
   * A call that got no argument text, or only whitespace (some vLLM builds send `arguments: ""` for a call without
   * parameters, vllm-project/vllm#21301) gets "{}", as the Anthropic adapter gives an empty
   * input: never the empty text a Chat Completions or Responses client cannot JSON.parse. A
   * passed-through stream hands its calls over here (pass-through.ts), so its bytes are the same.
   */
  private closeAll(out: ChatEvent[]): void {
    this.closeOpen(out)
    // Runs at the finish and again at the end of every answer, most of which have no tool calls.
    if (this.tools.size === 0) return
    for (const tool of this.tools.values()) if (tool.block === undefined) this.startTool(tool, out)
    const tools = [...this.tools.values()].sort((a, b) => a.block! - b.block!)
    for (const tool of tools) {
      if (tool.text.trim() === '') out.push({ type: 'tool-call-delta', block: tool.block!, argumentsDelta: '{}' })
      out.push({ type: 'tool-call-end', block: tool.block! })
    }
    this.tools.clear()
  }

  private finish(out: ChatEvent[], reason: string): void {
    this.closeAll(out)
    // A usage from before the finish_reason (none came after) counts the input only: the meter
    // counts the output sent.
    const usage = toUsage(this.usage)
    out.push({ type: 'finish', reason: mapFinishReason(reason, this.sawToolCalls), usage: this.usage === undefined || this.usageFinal ? usage : withoutOutput(usage) })
    this.ended = true
  }

  private fail(out: ChatEvent[], message: string, kind: UpstreamErrorKind = 'server'): void {
    const failed: ChatEvent = { type: 'error', error: new UpstreamError(kind, message, this.context.provider, this.context.model) }
    const usage = this.reportedUsage
    if (usage !== undefined) failed.usage = usage
    out.push(failed)
    this.ended = true
  }

  /**
   * The usage reported so far (a usage chunk came before the end), for the error event of a cut
   * stream. Its output count only once the finish_reason came (nothing is output after it, so the
   * count covers the whole answer): an earlier one (vLLM's continuous usage) predates output that
   * may follow, so it is left out (0) and the meter counts the output sent instead.
   */
  get reportedUsage(): Usage | undefined {
    if (this.usage === undefined) return undefined
    return this.usageFinal ? toUsage(this.usage) : withoutOutput(toUsage(this.usage))
  }
}

/**
 * Whether a tool-call delta without an id, at the index of a call already named, is another call:
 * it names one and starts new arguments after the open call's are whole JSON (Ollama sends each
 * call whole, all at index 0, some builds without ids). A delta with an id is judged by its id;
 * one repeating the name with more of the same call's text, or with nothing or whitespace after
 * whole arguments (vLLM repeats the name in every delta), is the same call.
 */
export function namesAnotherCall(open: { readonly name: string; readonly text: string }, delta: { id: string | undefined; name: string | undefined; arguments: string }): boolean {
  return delta.id === undefined && delta.name !== undefined && delta.arguments.trim() !== '' && open.name !== '' && isWholeJson(open.text)
}

/** Usage as reported (see fromUpstreamStream): absent counts are 0, absent subsets undefined. */
export function toUsage(usage: Record<string, unknown> | undefined): Usage {
  const result: Usage = {
    inputTokens: tokenCount(usage?.prompt_tokens) ?? 0,
    outputTokens: tokenCount(usage?.completion_tokens) ?? 0,
    webSearchRequests: 0,
    webFetchRequests: 0,
  }
  const cached = tokenCount(isRecord(usage?.prompt_tokens_details) ? usage.prompt_tokens_details.cached_tokens : undefined)
  if (cached !== undefined) result.cachedInputTokens = cached
  const reasoning = tokenCount(isRecord(usage?.completion_tokens_details) ? usage.completion_tokens_details.reasoning_tokens : undefined)
  if (reasoning !== undefined) result.reasoningTokens = reasoning
  return result
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function nonEmptyString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined
}

/**
 * An in-band error's kind: a rate limit, as the same refusal sent as HTTP 429 is (OpenAI's
 * `rate_limit_exceeded`, vLLM's and others' `code: 429`), so a client sees 429 before any output
 * and the router may try the next backend; anything else is the server's.
 */
function inBandKind(error: unknown): UpstreamErrorKind {
  if (!isRecord(error)) return 'server'
  const { code, type } = error
  if (code === 429 || code === '429' || (typeof code === 'string' && /rate.?limit/i.test(code)) || (typeof type === 'string' && /rate.?limit/i.test(type))) return 'rate-limited'
  return 'server'
}

function errorText(error: unknown): string {
  if (typeof error === 'string') return error.slice(0, 200)
  if (isRecord(error) && typeof error.message === 'string') return error.message.slice(0, 200)
  return 'unknown'
}

/** A usage's input side only: its output count is 0 (unreported), for the meter to count. */
function withoutOutput(usage: Usage): Usage {
  usage.outputTokens = 0
  delete usage.reasoningTokens
  return usage
}
