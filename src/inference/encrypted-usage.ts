// Usage of an Encrypted exchange: the backend's reported usage when it sends one (the
// settlement's source), else an estimate from the ciphertext envelope (blob length minus the
// cipher's per-blob overhead), so output that was sent is never billed zero.

import { minBlobBytes } from '../tee/blob-size'
import type { SigningAlgo } from '../tee/keys'
import type { ProofFormat } from '../tee/proof-format'
import type { Usage } from './canonical'
import { boundedUsage, type UsageBound } from './meter'
import { toUsage } from '../providers/openai-compatible/from-upstream-stream'

const BYTES_PER_TOKEN = 4

export class EnvelopeMeter {
  private reported: Usage | undefined
  private outputBytes = 0
  private sawChoice = false
  private readonly overhead: number

  /** `bound`: what the exchange can have used (usage() never exceeds it: boundedUsage). */
  constructor(
    private readonly inputEstimate: number,
    private readonly bound: UsageBound,
    format: ProofFormat,
    algo: SigningAlgo,
  ) {
    this.overhead = minBlobBytes(format.e2ee!, algo)
  }

  /**
   * Whether the backend's answer held anything: a choice (even with empty content, or only a
   * role or finish_reason) or a usage. Without either (a stream of only `data: [DONE]`, a JSON
   * `{}`) it is no completion: a backend failure before any output, charged nothing.
   */
  get answered(): boolean {
    return this.sawChoice || this.reported !== undefined
  }

  get producedOutput(): boolean {
    return this.outputBytes > 0 || (this.reported?.outputTokens ?? 0) > 0
  }

  /** One SSE event's data (JSON chunk). */
  observeEvent(data: string): void {
    let chunk: Record<string, unknown>
    try {
      chunk = JSON.parse(data)
    } catch {
      return
    }
    this.observeCompletion(chunk)
  }

  /** A chat.completion or chat.completion.chunk object. */
  observeCompletion(object: Record<string, unknown>): void {
    const usage = object.usage as Record<string, any> | undefined
    // Read as any Chat Completions usage is (counts floored, negatives dropped), once both counts are there.
    if (usage && typeof usage === 'object' && typeof usage.prompt_tokens === 'number' && typeof usage.completion_tokens === 'number') this.reported = toUsage(usage)
    const choices = Array.isArray(object.choices) ? object.choices : []
    for (const choice of choices) {
      if (typeof choice === 'object' && choice !== null) this.sawChoice = true
      const part = (choice as Record<string, any>)?.delta ?? (choice as Record<string, any>)?.message
      if (!part || typeof part !== 'object') continue
      this.count(part.content)
      // Backends name reasoning reasoning_content or reasoning (both ciphertext, A2); one that
      // sends both sends the same text twice, which is counted once.
      this.count(typeof part.reasoning_content === 'string' && part.reasoning_content !== '' ? part.reasoning_content : part.reasoning)
      for (const call of Array.isArray(part.tool_calls) ? part.tool_calls : []) {
        this.count(call?.function?.name)
        this.count(call?.function?.arguments)
      }
    }
  }

  private count(value: unknown): void {
    if (typeof value === 'string' && value !== '') this.outputBytes += Math.max(1, value.length / 2 - this.overhead)
  }

  usage(): Usage {
    const reported = this.reported
    if (reported && reported.inputTokens > 0 && reported.outputTokens > 0) return boundedUsage(reported, this.bound)
    return boundedUsage(
      {
        inputTokens: reported && reported.inputTokens > 0 ? reported.inputTokens : this.inputEstimate,
        outputTokens: reported && reported.outputTokens > 0 ? reported.outputTokens : Math.ceil(this.outputBytes / BYTES_PER_TOKEN),
        webSearchRequests: 0,
        webFetchRequests: 0,
      },
      this.bound,
    )
  }
}
