import type { Backend, ModelRoute } from '../catalog/types'
import { ApiError } from '../http/errors'
import type { ChatEvent, ChatRequest, PassThroughFormat } from '../inference/canonical'
import type { Clock } from '../lib/clock'
import { failureBeforeOutput, untilOutput } from './before-output'
import { ReplayedEvents } from './replay'
import { UpstreamError, type CallAttestation, type Provider } from './types'

/** How long a backend that failed retryably is passed over while another can serve (ARCHITECTURE.md §6). */
export const COOL_DOWN_MS = 30_000

/**
 * The router's cool-down, for callers that pick an attested backend themselves (GET
 * /api/v1/attestation and the Encrypted relay, where the client's key decides the backend).
 */
export interface BackendHealth {
  /** `items` with the ones whose backend is cooling down moved last (kept as a last resort), order otherwise kept. */
  readyFirst<T>(items: readonly T[], backendOf: (item: T) => Pick<Backend, 'provider' | 'model'>): T[]
  /** A retryable failure: pass this backend over for the cool-down while another can serve. */
  coolDown(backend: Pick<Backend, 'provider' | 'model'>): void
  /** The backend answered: no longer cooling down. */
  recovered(backend: Pick<Backend, 'provider' | 'model'>): void
}

/** Per-call options of Router.open. */
export interface RouteOptions {
  /** The client's abort signal, handed to the provider; once aborted, nothing else is tried. */
  readonly signal: AbortSignal
  /** The controller behind `signal`, lent to the last attempt's provider (ProviderCall.abortable). */
  readonly controller?: AbortController
  readonly requestId: string
  /** Only bindings the catalog marks `uncensored` may serve the request (none → 400). */
  readonly uncensored?: boolean
  /** The answer is collected whole (ProviderCall.collect). */
  readonly collect?: boolean
  /** Handed to the provider: the client accepts `passthrough` events of this format (ProviderCall.passThrough). */
  readonly passThrough?: PassThroughFormat
  /**
   * The stream `open` resolved with moved to another backend: the one it answered from failed
   * before any output (before-output.ts). `opened` is the backend answering now; its `failures`
   * start with that failure, then the backends that failed to open since.
   */
  readonly onFallback?: (opened: OpenedStream) => void
  /**
   * The stream `open` resolved with failed before any output and no other backend opened: the
   * stream ends with `error`, the last one's (failedOpen says which backend, and what failed
   * before it: the stream's own failure first).
   */
  readonly onFallbackFailed?: (error: unknown) => void
}

/** A backend that failed to open, and the failures abandoned before it in the same call. */
export interface FailedOpen {
  readonly backend: Backend
  /** Its provider's id (Provider.id, as metrics and logs name it). */
  readonly provider: string
  readonly abandoned: readonly UpstreamError[]
}

/** The stream of the backend that answered, and which one it was. */
export interface OpenedStream {
  readonly events: AsyncIterable<ChatEvent>
  readonly backend: Backend
  readonly provider: Provider
  /** The retryable failures of the backends abandoned before this one, in order (for logs and metrics). */
  readonly failures: readonly UpstreamError[]
  /** The evidence a Confidential call was bound to (attested providers only). */
  readonly attestation?: CallAttestation
}

/**
 * Picks the backend of a route and opens its stream (ARCHITECTURE.md §6, Backend routing).
 *
 * - Order: `ordered` keeps the config order; `round-robin` rotates the starting backend by
 *   smooth weighted round robin (weights 2:1 start A, B, A, A, B, A…), then continues in
 *   config order, wrapping. Either way, backends cooling down move behind the others (kept as
 *   a last resort rather than failing without trying them).
 * - Fallback: when a backend fails before its first output with an UpstreamError that is
 *   `retryable` (connection, timeout, server, rate-limited), and the client has not gone:
 *   `provider.stream` rejects (no status, no event), or its stream fails after its first event
 *   but before any content, reasoning, tool call or finish (before-output.ts holds those events,
 *   so the client has seen nothing of that backend). The abandoned backend cools down for 30 s
 *   on the injected clock, unless it was the last one to try. Never on bad-request, auth,
 *   not-found or abort, and never once output went out: then the error ends the stream in-band.
 * - When every backend fails, the last error is rethrown; once a stream opened (its reply's
 *   headers may be out), it is that stream's error event instead.
 *
 * State (cool-downs, rotations) is per process, like every limit (ARCHITECTURE.md §11).
 */
export class Router implements BackendHealth {
  /** Backend key → epoch ms its cool-down ends. */
  private readonly coolingUntil = new Map<string, number>()
  /** Set for every UpstreamError a call's opening ends with (open's rejection, a fallback's). */
  private readonly failedOpens = new WeakMap<object, FailedOpen>()
  /** Rotation state per route object (the catalog's routes are built once) and per uncensored filter. */
  private readonly rotations = new WeakMap<ModelRoute, { all?: Rotation; uncensored?: Rotation }>()

  constructor(
    private readonly providers: ReadonlyMap<string, Provider>,
    private readonly clock: Clock,
    private readonly coolDownMs: number = COOL_DOWN_MS,
  ) {}

  async open(route: ModelRoute, request: ChatRequest, options: RouteOptions): Promise<OpenedStream> {
    const uncensored = options.uncensored === true
    const candidates = uncensored ? route.backends.filter(backend => backend.uncensored) : route.backends
    if (candidates.length === 0) {
      throw new ApiError('invalid_request', `model ${route.id} has no uncensored backend; remove "uncensored" or choose another model`, 'uncensored')
    }
    const order = this.order(route, candidates, uncensored)
    // One backend: nothing to fall back to, so no loop (its wrapper object and closure) and no hold.
    if (order.length === 1) {
      try {
        return await this.openBackend(route, order[0]!, true, request, options, NO_FAILURES)
      } catch (error) {
        throw this.failed(error, order[0]!, NO_FAILURES)
      }
    }
    const first = await this.attempt(route, order, 0, request, options, [])
    const final = (answered: { opened: OpenedStream; index: number }) => answered.index === order.length - 1 || answered.opened.events instanceof ReplayedEvents
    if (final(first)) return first.opened
    // A backend is left to fall back to: the stream is held until its first output (before-output.ts).
    let at = first.index
    const events = untilOutput(first.opened.events, {
      fallsBack: failure => fallsBack(failure, options),
      next: async failure => {
        this.coolDown(order[at]!)
        let next: Awaited<ReturnType<Router['attempt']>>
        try {
          next = await this.attempt(route, order, at + 1, request, options, [failure])
        } catch (error) {
          options.onFallbackFailed?.(error)
          throw error
        }
        at = next.index
        options.onFallback?.(next.opened)
        return { events: next.opened.events, final: final(next) }
      },
    })
    return { ...first.opened, events }
  }

  /** Opens the backends of `order` from `from` on, until one answers (`failures` collects the ones abandoned). */
  private async attempt(
    route: ModelRoute,
    order: readonly Backend[],
    from: number,
    request: ChatRequest,
    options: RouteOptions,
    failures: UpstreamError[],
  ): Promise<{ opened: OpenedStream; index: number }> {
    for (let attempt = from; ; attempt++) {
      const backend = order[attempt]!
      const last = attempt === order.length - 1
      try {
        return { opened: await this.openBackend(route, backend, last, request, options, failures), index: attempt }
      } catch (error) {
        // An adapter's refusal (a request this backend's protocol cannot carry) made no call: the
        // next backend, of another kind, may carry it. The backend is not at fault: no cool-down.
        const refused = error instanceof UpstreamError && error.details.phase === 'adapter'
        if (last || !(error instanceof UpstreamError) || !(refused ? !options.signal.aborted : fallsBack(error, options))) {
          // Ending on a refusal after a backend that could carry the request failed: that failure
          // is the answer (a 502 or 429 to retry, not a 400 for the client's request).
          const failed = refused ? failures.findLast(failure => failure.details.phase !== 'adapter') : undefined
          throw this.failed(failed ?? error, backend, failed === undefined ? failures : failures.filter(failure => failure !== failed))
        }
        if (!refused) this.coolingUntil.set(keyOf(backend), this.clock.now() + this.coolDownMs)
        failures.push(error)
      }
    }
  }

  /** Which backend `error` ended a call's opening on, and the failures before it (for metrics and logs). */
  failedOpen(error: unknown): FailedOpen | undefined {
    return typeof error === 'object' && error !== null ? this.failedOpens.get(error) : undefined
  }

  /**
   * Notes which backend an opening's error came from (an upstream's failure, or an attested
   * backend's evidence rejected), and what failed before it; returns the error.
   */
  private failed(error: unknown, backend: Backend, abandoned: readonly UpstreamError[]): unknown {
    if (typeof error === 'object' && error !== null) this.failedOpens.set(error, { backend, provider: this.providers.get(backend.provider)?.id ?? backend.provider, abandoned })
    return error
  }

  /** Opens one backend's stream. `last`: no backend is left to fall back to (the controller is lent, a stream read whole is not checked). */
  private async openBackend(route: ModelRoute, backend: Backend, last: boolean, request: ChatRequest, options: RouteOptions, failures: readonly UpstreamError[]): Promise<OpenedStream> {
    const provider = this.providers.get(backend.provider)
    // Config checks every backend's provider and the registry builds them all: this is a wiring bug.
    if (provider === undefined) throw new Error(`model ${route.id}: no provider "${backend.provider}" is registered`)
    const abortable = last ? options.controller : undefined
    const call = { request, upstreamModel: backend.model, thinking: backend.thinking, signal: options.signal, abortable, requestId: options.requestId, collect: options.collect, passThrough: options.passThrough }
    if (provider.streamAttested !== undefined) {
      const { events, attestation } = await provider.streamAttested(call)
      if (!last) checkReplayed(events, options)
      this.recovered(backend)
      return { events, backend, provider, failures, attestation }
    }
    const events = await provider.stream(call)
    if (!last) checkReplayed(events, options)
    this.recovered(backend)
    return { events, backend, provider, failures }
  }

  /**
   * Throws what the route's backends' adapters would refuse `request` with, without calling any
   * upstream: when none of them would send it, the last one's refusal (as `open` would end). One
   * that would send it, or whose provider has no such check, is enough: a call may reach it.
   */
  checkRequest(route: ModelRoute, request: ChatRequest): void {
    let refusal: UpstreamError | undefined
    for (const backend of route.backends) {
      const provider = this.providers.get(backend.provider)
      if (provider?.checkRequest === undefined) return
      try {
        provider.checkRequest({ request, upstreamModel: backend.model, thinking: backend.thinking })
        return
      } catch (error) {
        if (!(error instanceof UpstreamError) || error.details.phase !== 'adapter') throw error
        refusal = error
      }
    }
    if (refusal !== undefined) throw refusal
  }

  /**
   * The exact input token count from the backend that would serve the request, when its provider
   * can count (Anthropic); undefined otherwise (the caller estimates). Backends are taken in the
   * order a call tries them, and a failure a call would fall back on (overloaded, rate-limited,
   * unreachable) moves on to the next one as the call would (QA: a model whose chats succeeded by
   * fallback answered count_tokens with the first backend's 529 as a 502); the last one's
   * failure is the answer, as it is a call's. An adapter's refusal while another backend may
   * carry the request gives the estimate. No cool-down is recorded: counting is free and
   * advisory. The rotation is not advanced.
   */
  async countTokens(route: ModelRoute, request: ChatRequest, options: RouteOptions): Promise<number | undefined> {
    const backends = this.readyFirst(route.backends, candidate => candidate)
    for (const [index, backend] of backends.entries()) {
      const provider = this.providers.get(backend.provider)
      if (provider?.countTokens === undefined) return undefined
      try {
        return await provider.countTokens({ request, upstreamModel: backend.model, thinking: backend.thinking, signal: options.signal, requestId: options.requestId })
      } catch (error) {
        if (!(error instanceof UpstreamError) || options.signal?.aborted) throw error
        // A request this backend's adapter cannot carry may still be served by another backend of
        // the model: the caller estimates, as for a backend that cannot count.
        if (error.details.phase === 'adapter') {
          if (backends.length > 1) return undefined
          throw error
        }
        if (!error.retryable || index === backends.length - 1) throw error
      }
    }
    return undefined
  }

  readyFirst<T>(items: readonly T[], backendOf: (item: T) => Pick<Backend, 'provider' | 'model'>): T[] {
    const now = this.clock.now()
    const ready: T[] = []
    const cooling: T[] = []
    for (const item of items) ((this.coolingUntil.get(keyOf(backendOf(item))) ?? 0) > now ? cooling : ready).push(item)
    return cooling.length === 0 ? ready : ready.concat(cooling)
  }

  coolDown(backend: Pick<Backend, 'provider' | 'model'>): void {
    this.coolingUntil.set(keyOf(backend), this.clock.now() + this.coolDownMs)
  }

  recovered(backend: Pick<Backend, 'provider' | 'model'>): void {
    // Every answered call lands here: with nothing cooling down, no key is built.
    if (this.coolingUntil.size > 0) this.coolingUntil.delete(keyOf(backend))
  }

  /** Whether a backend is in its cool-down now (for tests and diagnostics). */
  isCoolingDown(backend: Pick<Backend, 'provider' | 'model'>): boolean {
    return (this.coolingUntil.get(keyOf(backend)) ?? 0) > this.clock.now()
  }

  private order(route: ModelRoute, candidates: readonly Backend[], uncensored: boolean): readonly Backend[] {
    // Per request: one backend has one order, and with none cooling down the rotation's is final.
    if (candidates.length === 1) return candidates
    let rotated: readonly Backend[] = candidates
    if (route.routing === 'round-robin') {
      let state = this.rotations.get(route)
      if (state === undefined) this.rotations.set(route, (state = {}))
      const rotation = uncensored ? (state.uncensored ??= new Rotation(candidates)) : (state.all ??= new Rotation(candidates))
      const start = rotation.next()
      rotated = [...candidates.slice(start), ...candidates.slice(0, start)]
    }
    if (this.coolingUntil.size === 0) return rotated
    const now = this.clock.now()
    const ready: Backend[] = []
    const cooling: Backend[] = []
    for (const backend of rotated) ((this.coolingUntil.get(keyOf(backend)) ?? 0) > now ? cooling : ready).push(backend)
    return ready.concat(cooling)
  }
}

/** The failures of a call that opened its only backend. */
const NO_FAILURES: readonly UpstreamError[] = Object.freeze([])

/** Whether a retryable failure, before any output, moves the call to the next backend: not once the client has gone. */
function fallsBack(error: UpstreamError, options: RouteOptions): boolean {
  return error.retryable && !options.signal.aborted
}

/** Events read whole that failed before any output are thrown, to fall back like a rejection (before-output.ts). */
function checkReplayed(events: AsyncIterable<ChatEvent>, options: RouteOptions): void {
  if (!(events instanceof ReplayedEvents)) return
  const failure = failureBeforeOutput(events.events)
  if (failure !== undefined && fallsBack(failure, options)) throw failure
}

/** A backend is its provider and upstream model: shared by every route that binds it. */
function keyOf(backend: Pick<Backend, 'provider' | 'model'>): string {
  return `${backend.provider}\u0000${backend.model}`
}

/**
 * Smooth weighted round robin (as in nginx): each pick adds every weight to its running
 * score, takes the highest (first on ties) and subtracts the total from it. Picks are spread
 * evenly in proportion to the weights.
 */
class Rotation {
  private readonly weights: number[]
  private readonly scores: number[]
  private readonly total: number

  constructor(backends: readonly Backend[]) {
    this.weights = backends.map(backend => backend.weight)
    this.scores = this.weights.map(() => 0)
    this.total = this.weights.reduce((sum, weight) => sum + weight, 0)
  }

  next(): number {
    let best = 0
    for (let index = 0; index < this.weights.length; index++) {
      this.scores[index]! += this.weights[index]!
      if (this.scores[index]! > this.scores[best]!) best = index
    }
    this.scores[best]! -= this.total
    return best
  }
}
