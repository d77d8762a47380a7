import type { GatewayMetrics } from '../observability/gateway-metrics'
import { UpstreamError } from '../providers/types'
import { countUpstreamFailure } from './open-call'

/**
 * One Encrypted backend call in the upstream metrics, counted as a chat's is (open-call.ts): a
 * chat's call opens at its first event (providers/first-event.ts), so the relay's counts as
 * answered (`ok`, with its time) at the first event holding a choice or a usage, or, not
 * streamed, at a whole completion. A failure before that is `before-first-event` (its kind the
 * request's outcome: a stream of only `data: [DONE]`, a JSON `{}`, a stream cut before any
 * answer), one after it `mid-stream` (the call stays `ok`, as a chat's cut stream). A call is
 * counted once: a second failure (the read error, then the stream's end) adds nothing (QA: the
 * relay counted `ok` at the headers and no failure after them).
 */
export class RelayCallCount {
  private answeredYet = false
  private failedYet = false

  constructor(
    private readonly metrics: GatewayMetrics | undefined,
    private readonly provider: string,
    private readonly model: string,
    /** performance.now() when the call was sent. */
    private readonly startedAt: number,
  ) {}

  /** The backend answered: counted `ok` the first time. */
  answered(): void {
    if (this.answeredYet) return
    this.answeredYet = true
    if (this.metrics === undefined) return
    this.metrics.upstreamCalls.inc(1, this.provider, 'ok')
    this.metrics.upstreamSeconds.observe((performance.now() - this.startedAt) / 1000, this.provider)
  }

  /**
   * The call failed: `error` is the upstream's (a failed read, an abort: the client left, or the
   * drain cut it), or anything else the relay found wrong with the answer, counted as the
   * backend's `server` failure.
   */
  failed(error: unknown): void {
    if (this.failedYet) return
    this.failedYet = true
    if (this.metrics === undefined) return
    const failure = error instanceof UpstreamError ? error : new UpstreamError('server', error instanceof Error ? error.message : 'the backend failed', this.provider, this.model)
    countUpstreamFailure(this.metrics, failure, this.answeredYet ? 'mid-stream' : 'before-first-event', this.startedAt)
  }

  /** The client left, or the drain cut the call: not a failure, but a call cut before it answered is counted `aborted`. */
  cut(): void {
    this.failed(new UpstreamError('aborted', 'the call was aborted', this.provider, this.model))
  }
}
