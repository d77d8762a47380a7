import { cacheWritePrice, chargeForTokens, roundUpCharge, tokenCost } from '../billing/pricing'
import type { ModelRoute, Price } from '../catalog/types'
import type { Nanos } from '../lib/money'
import { dearestCacheWrite } from './cache-ttl'
import type { ChatEvent, ChatRequest, Usage } from './canonical'

// Token counts the gateway estimates itself (the upstream's own usage always wins when reported).
// Reservation estimates must be upper bounds; a byte is at most one token for every common
// tokenizer's text, and ~3 bytes per token is the usual lower end for English, so bytes / 3
// errs high. Images are counted at a flat, generous size.
const BYTES_PER_TOKEN_HIGH = 3
const BYTES_PER_TOKEN = 4
const TOKENS_PER_MESSAGE = 4
const TOKENS_PER_IMAGE = 1600

function requestBytes(request: ChatRequest): { bytes: number; images: number } {
  let bytes = 0
  let images = 0
  for (const message of request.messages) {
    for (const part of message.parts) {
      if (part.type === 'text' || part.type === 'reasoning') bytes += Buffer.byteLength(part.text)
      else if (part.type === 'tool-call') bytes += Buffer.byteLength(part.name) + Buffer.byteLength(part.arguments)
      else if (part.type === 'tool-result') bytes += Buffer.byteLength(part.content)
      else if (part.type === 'image') images += 1
      // File parts count once the documents step has turned them into text (a PDF's bytes say
      // little about its text), so the context check runs again after extraction.
    }
  }
  for (const tool of request.tools) bytes += Buffer.byteLength(JSON.stringify(tool))
  return { bytes, images }
}

/** Input tokens as a typical tokenizer would count them: for the context-length check. */
export function typicalInputTokens(request: ChatRequest): number {
  const { bytes, images } = requestBytes(request)
  return Math.ceil(bytes / BYTES_PER_TOKEN) + request.messages.length * TOKENS_PER_MESSAGE + images * TOKENS_PER_IMAGE
}

/** The count_tokens estimate: as typicalInputTokens, with attached files at their raw bytes ÷ 4 (nothing is extracted to count). */
export function estimatedCountTokens(request: ChatRequest): number {
  let fileBytes = 0
  for (const message of request.messages) for (const part of message.parts) if (part.type === 'file') fileBytes += part.data.byteLength
  return typicalInputTokens(request) + Math.ceil(fileBytes / BYTES_PER_TOKEN)
}

/** Input tokens erring high: for the reservation, and the fallback charge when usage is missing. */
export function highInputTokens(request: ChatRequest): number {
  const { bytes, images } = requestBytes(request)
  return Math.ceil(bytes / BYTES_PER_TOKEN_HIGH) + request.messages.length * TOKENS_PER_MESSAGE + images * TOKENS_PER_IMAGE
}

/** The output cap that applies: the request's, bounded by the model's. */
export function outputCap(request: ChatRequest, route: ModelRoute): number {
  const asked = request.sampling.maxOutputTokens
  return asked === undefined || asked > route.maxOutputTokens ? route.maxOutputTokens : asked
}

/**
 * The price of a usage (input, cache reads, cache writes for 5 minutes and for an hour, output,
 * reasoning), rounded up once. A usage without cache writes (most) looks up no write price.
 */
export function priceUsage(price: Price, usage: Usage): Nanos {
  const cached = Math.min(usage.cachedInputTokens ?? 0, usage.inputTokens)
  const written = Math.min(usage.cacheWriteInputTokens ?? 0, usage.inputTokens - cached)
  const writtenHour = Math.min(usage.cacheWrite1hInputTokens ?? 0, written)
  const reasoning = Math.min(usage.reasoningTokens ?? 0, usage.outputTokens)
  const reasoningPrice = price.reasoningPerMillion ?? price.outputPerMillion
  const writes = written === 0 ? 0n : tokenCost(written - writtenHour, cacheWritePrice(price, '5m')) + tokenCost(writtenHour, cacheWritePrice(price, '1h'))
  return roundUpCharge(
    tokenCost(usage.inputTokens - cached - written, price.inputPerMillion) +
      tokenCost(cached, price.cachedInputPerMillion ?? price.inputPerMillion) +
      writes +
      tokenCost(usage.outputTokens - reasoning, price.outputPerMillion) +
      tokenCost(reasoning, reasoningPrice),
  )
}

/**
 * Upper bound of a request's cost: high input estimate plus the full output cap at the dearer
 * output rate. A request with cache hints may have its whole prompt written to the cache: its
 * input is estimated at the dearest write price its hints may incur, when that is above the input's.
 */
export function estimateCharge(request: ChatRequest, route: ModelRoute): Nanos {
  const output = outputCap(request, route)
  const price = route.price
  const outputRate = price.reasoningPerMillion !== undefined && price.reasoningPerMillion > price.outputPerMillion ? price.reasoningPerMillion : price.outputPerMillion
  // Any prompt token may be billed as a cache read or write: the dearest of the rates it may take
  // (an operator may price reads above plain input; nothing in the config forbids it).
  const writeRate = dearestCacheWrite(request, price)?.price ?? 0n
  const readRate = price.cachedInputPerMillion ?? 0n
  let inputRate = price.inputPerMillion
  if (writeRate > inputRate) inputRate = writeRate
  if (readRate > inputRate) inputRate = readRate
  return chargeForTokens(highInputTokens(request), inputRate) + chargeForTokens(output, outputRate)
}

/** The most a call can have used: the model's context, and the output cap the upstream was sent. */
export interface UsageBound {
  readonly maxInputTokens: number
  readonly maxOutputTokens: number
}

/**
 * A usage held to its call's bound. An upstream's report is its claim, not a fact: no prompt is
 * longer than the model's context, and the upstream was told to stop at max_tokens, so a count
 * beyond either (a broken or hostile backend) is billed at the bound instead of draining the
 * organization (QA: a report of 10^8 output tokens took a balance 200,000 USD below zero).
 * Cached input and reasoning tokens stay within the input and output they are part of, so the
 * usage a reply reports adds up as the one billed does (priceUsage reads no more than that).
 */
export function boundedUsage(usage: Usage, bound: UsageBound): Usage {
  if (usage.inputTokens <= bound.maxInputTokens && usage.outputTokens <= bound.maxOutputTokens && subsetsWithin(usage)) return usage
  const inputTokens = Math.min(usage.inputTokens, bound.maxInputTokens)
  const outputTokens = Math.min(usage.outputTokens, bound.maxOutputTokens)
  const held: Usage = { ...usage, inputTokens, outputTokens }
  if (usage.cachedInputTokens !== undefined) held.cachedInputTokens = Math.min(usage.cachedInputTokens, inputTokens)
  if (usage.cacheWriteInputTokens !== undefined) held.cacheWriteInputTokens = Math.min(usage.cacheWriteInputTokens, inputTokens - (held.cachedInputTokens ?? 0))
  if (usage.cacheWrite1hInputTokens !== undefined) held.cacheWrite1hInputTokens = Math.min(usage.cacheWrite1hInputTokens, held.cacheWriteInputTokens ?? 0)
  if (usage.reasoningTokens !== undefined) held.reasoningTokens = Math.min(usage.reasoningTokens, outputTokens)
  return held
}

function subsetsWithin(usage: Usage): boolean {
  const cached = usage.cachedInputTokens ?? 0
  const written = usage.cacheWriteInputTokens ?? 0
  return cached <= usage.inputTokens && written <= usage.inputTokens - cached && (usage.cacheWrite1hInputTokens ?? 0) <= written && (usage.reasoningTokens ?? 0) <= usage.outputTokens
}

/**
 * Watches a response's events: the upstream's usage when it reports one, else a counted
 * fallback (the input the upstream announced at the start, or the estimate, plus the output
 * seen), so a cut stream is never billed zero once output was sent.
 *
 * A stream cut before its finish is billed the usage the upstream reported before the cut (its
 * error event's), count by count as a finish's: the providers put an output count there only
 * once the output had ended (Anthropic's message_delta, a Chat Completions usage chunk after the
 * finish_reason), so it covers everything sent and wins over the meter's estimate as a finish's
 * does; without one, the output sent is counted.
 */
export class Meter {
  /** The finish's usage. */
  private reported: Usage | undefined
  /** The usage the upstream reported before a cut (the error event's), when there was no finish. */
  private reportedBeforeCut: Usage | undefined
  /** The prompt size the upstream announced up front (Anthropic's message_start), for a count a report lacks. */
  private announced: { inputTokens?: number; cachedInputTokens?: number; cacheWriteInputTokens?: number; cacheWrite1hInputTokens?: number } | undefined
  private outputBytes = 0
  private reasoningBytes = 0
  private toolBytes = 0
  /**
   * Whether a tool call was started: output, though its arguments may not have begun (a stream
   * cut right after a call's name went out charged nothing, with the client shown the call).
   */
  private startedToolCall = false
  /**
   * The usage once the finish was seen (nothing is observed after it): a stream's terminal
   * frames and its settlement read it, computed once.
   */
  private final: Usage | undefined

  /**
   * `bound`: what the call can have used (usage() never exceeds it). `serverTools`: the hosted
   * web tools the gateway ran for this turn (they replace the upstream's counts).
   */
  constructor(
    private readonly inputTokens: number,
    private readonly bound: UsageBound,
    private readonly serverTools?: { webFetchRequests: number; webSearchRequests: number },
  ) {}

  observe(event: ChatEvent): void {
    if (event.type === 'text-delta') this.outputBytes += Buffer.byteLength(event.delta)
    else if (event.type === 'reasoning-delta') this.reasoningBytes += Buffer.byteLength(event.delta)
    else if (event.type === 'tool-call-delta') this.toolBytes += Buffer.byteLength(event.argumentsDelta)
    else if (event.type === 'passthrough') {
      this.outputBytes += event.textBytes
      this.reasoningBytes += event.reasoningBytes
      this.toolBytes += event.toolBytes
      if (event.format === 'chat-completions' && event.toolBlocks !== undefined) this.startedToolCall = true
    } else if (event.type === 'tool-call-start') {
      // The name is output the model wrote: counted with the arguments (bytes ÷ 4) when the
      // upstream reports no output count.
      this.toolBytes += Buffer.byteLength(event.name)
      this.startedToolCall = true
    }
    else if (event.type === 'finish') this.reported = event.usage
    else if (event.type === 'response-start' && event.inputTokens) this.announced = event
    else if ((event.type === 'error' || event.type === 'usage') && event.usage !== undefined) this.reportedBeforeCut = event.usage
  }

  /**
   * Takes back the output of events observed but never written to the client: those its stream
   * encoder still held when the stream failed or the client left (StreamEncoder.unsent), which a
   * cut drops. The counted fallback is then what was sent; a count the upstream reported is
   * billed as before. Counted by a meter of their own, so an event counts here as in observe.
   */
  withdraw(events: Iterable<ChatEvent>): void {
    const unsent = new Meter(0, this.bound)
    for (const event of events) unsent.observe(event)
    this.outputBytes -= unsent.outputBytes
    this.reasoningBytes -= unsent.reasoningBytes
    this.toolBytes -= unsent.toolBytes
  }

  /** Whether any output reached the meter: text, reasoning, or a tool call (its name alone counts, as for fallback). */
  get producedOutput(): boolean {
    return this.outputBytes + this.reasoningBytes + this.toolBytes > 0 || this.startedToolCall
  }

  /**
   * Reported usage, field by field: a count the upstream did not report (zero or absent) while
   * the meter saw the matching traffic is replaced by the fallback count, so a stream that
   * streamed output but reported no output tokens is never billed zero output. Held to the
   * call's bound (boundedUsage). This is what is billed, and what the reply reports.
   */
  usage(): Usage {
    if (this.final !== undefined) return this.final
    const usage = this.computeUsage()
    if (this.reported !== undefined) this.final = usage
    return usage
  }

  private computeUsage(): Usage {
    const reported = this.reported ?? this.reportedBeforeCut
    const reasoning = Math.ceil(this.reasoningBytes / BYTES_PER_TOKEN)
    const counted = Math.ceil((this.outputBytes + this.toolBytes) / BYTES_PER_TOKEN) + reasoning
    const outputReported = reported !== undefined && reported.outputTokens > 0
    // A stream cut before reporting its input (no finish) may still have announced it up front.
    const announced = this.reported === undefined ? this.announced : undefined
    const input = reported !== undefined && reported.inputTokens > 0 ? reported : announced
    return boundedUsage(
      {
        inputTokens: input?.inputTokens ?? this.inputTokens,
        cachedInputTokens: (input ?? reported)?.cachedInputTokens,
        cacheWriteInputTokens: (input ?? reported)?.cacheWriteInputTokens,
        cacheWrite1hInputTokens: (input ?? reported)?.cacheWrite1hInputTokens,
        outputTokens: outputReported ? reported.outputTokens : counted,
        reasoningTokens: outputReported ? reported.reasoningTokens : reasoning || undefined,
        webSearchRequests: this.serverTools?.webSearchRequests ?? reported?.webSearchRequests ?? 0,
        webFetchRequests: this.serverTools?.webFetchRequests ?? reported?.webFetchRequests ?? 0,
      },
      this.bound,
    )
  }
}
