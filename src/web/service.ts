import type { MeteredCall, Metering, PendingCharges } from '../billing/metering'
import type { UnitPrices, WebConfig } from '../config/config'
import { ApiError } from '../http/errors'
import type { Principal } from '../keys/principal'
import { chargeForUnits } from '../billing/pricing'
import { CallAbort, type Lifecycle } from '../observability/lifecycle'
import type { Logger } from '../observability/logger'
import { noteOutcome } from '../observability/request-log'
import { domainProblem, type DomainLists } from './domain-list'
import { pageKey, type FetchTarget, type PageResult, type WebFetcher } from './fetcher'
import type { FetchedPage } from './read-page'
import type { SearchBackend, SearchQuery, SearchResult } from './search'
import { parseSafeUrl, type SafeUrl } from './url-guard'

const NO_RETRY = 'the outcome is unknown (the page may have been reached); do not retry automatically'

/** Who is calling and what for: the billing context of one web call. */
export interface WebCaller {
  principal: Principal
  requestId: string
  /** The client's request signal: a client that leaves stops the fetches. */
  signal: AbortSignal
  /**
   * The billing key of the chat call these hosted tools serve (a Fusion part under an
   * Idempotency-Key): each call's own key derives from it, so a repeated request does not pay
   * twice for its searches and pages either. Absent for the standalone routes.
   */
  billingKey?: string
  /** The HTTP request of a standalone call (the route's, or MCP's tools/call): its log line gets the call's outcome and charge. */
  httpRequest?: Request
  /** Hosted tools in chat: the charges wait for the chat's admission (none if it is refused). */
  pending?: PendingCharges
  /** The call's inference slot is held already, for the whole turn (underOneSlot) or Fusion run: it takes none of its own. */
  slotHeld?: boolean
  /** Hosted tools of a request already in flight when a drain began: admitted as its chat will be (metering.begin). */
  continuesRequest?: boolean
}

/** A URL that was named but not fetched, and why (hosted fetch tells the model). */
export interface SkippedUrl {
  url: string
  reason: string
}

/**
 * Web retrieval with billing (spec §4.6, §4.7, §4.13; ARCHITECTURE.md §9). Every URL is checked
 * and resolved before anything is reserved, so a rejection is never billed and never opens a
 * socket; each call is one metered call (allowance before prepaid, spend caps, the inference
 * concurrency slot: in chat, one for the turn's pieces together) charging one `web_fetch` unit
 * per page retrieved or one `web_search` unit.
 */
export class WebService {
  constructor(
    readonly config: WebConfig,
    private readonly prices: UnitPrices,
    private readonly fetcher: WebFetcher,
    readonly searchBackend: SearchBackend | null,
    private readonly metering: Metering,
    private readonly logger: Logger,
    /** The drain: it tracks every web call in flight and cuts those left at its deadline. */
    private readonly lifecycle: Lifecycle,
  ) {}

  /** POST /api/v1/web/fetch: every URL or nothing; throws ApiError naming the URL and rule. */
  async fetchUrls(caller: WebCaller, urls: string[]): Promise<FetchedPage[]> {
    const max = this.config.fetch.maxUrls
    if (urls.length < 1 || urls.length > max) throw new ApiError('invalid_request', `urls must hold 1 to ${max} URLs`, 'urls')
    const safe: SafeUrl[] = []
    // The pages asked for, as the fetch asks for them: URLs that name one page are billed once or not at all.
    const pages: string[] = []
    for (const [index, url] of urls.entries()) {
      const checked = parseSafeUrl(url)
      if (!checked.ok) throw new ApiError('invalid_request', `urls[${index}] is refused: ${checked.message}`, `urls.${index}`)
      const page = pageKey(checked.parsed)
      if (pages.includes(page)) {
        throw new ApiError('invalid_request', `urls[${index}] names the same page as urls[${pages.indexOf(page)}] (a #fragment, an empty query or a percent-encoded letter names no other page); URLs must be distinct`, `urls.${index}`)
      }
      pages.push(page)
      safe.push(checked.url)
    }
    const targets = await this.resolveAll(safe, caller.signal)
    const call = await this.begin(caller, 'web_fetch', chargeForUnits(targets.length, this.prices.webFetch))
    const cut = this.track(caller)
    try {
      const results = await Promise.all(targets.map(target => this.fetchOne(target, cut.signal)))
      this.endIfUnread(cut, call, caller, 'web_fetch')
      const retrieved = results.filter(result => result.ok).length
      const rejected = results.findIndex(result => !result.ok && result.kind === 'rejected')
      if (rejected >= 0) {
        // A refusal is never billed, even when other pages of the call arrived.
        call.release()
        throw new ApiError('invalid_request', `urls[${rejected}] is refused: ${(results[rejected] as { message: string }).message}`, `urls.${rejected}`)
      }
      const ours = results.findIndex(result => !result.ok && result.kind === 'gateway')
      if (ours >= 0) {
        // The gateway could not read a page it fetched (its extraction pool is full, slow or
        // stopping): the answer is that pool's 429 or 503, as for an upload, and nothing is billed,
        // so the retry those statuses invite never pays twice.
        call.release()
        this.log(caller, 'web_fetch', 'extraction-failed', 0)
        const { error, message } = results[ours] as { error: ApiError; message: string }
        throw new ApiError(error.code, `urls[${ours}]: ${message}; nothing was billed`, `urls.${ours}`, error.headers)
      }
      const failed = results.findIndex(result => !result.ok)
      const charged = await this.settle(call, chargeForUnits(retrieved, this.prices.webFetch))
      this.log(caller, 'web_fetch', failed < 0 ? 'ok' : 'upstream-error', retrieved)
      this.noteOnRequest(caller, failed < 0 ? 'ok' : 'upstream-error', charged)
      if (failed >= 0) {
        const billed = retrieved === 0 ? 'nothing was billed' : `${retrieved} of ${results.length} pages were retrieved and billed`
        throw new ApiError('provider_error', `urls[${failed}]: ${(results[failed] as { message: string }).message}; ${billed}; ${NO_RETRY}`, `urls.${failed}`)
      }
      return results.map(result => (result as { page: FetchedPage }).page)
    } finally {
      this.lifecycle.untrack(cut)
      if (!call.done) call.release()
    }
  }

  /**
   * Hosted web_fetch in chat: the safe URLs among `urls` (already checked, deduplicated and capped
   * by the caller, chooseUrls in src/inference/enrich/web.ts; checked again here all the same), each
   * failure a note instead of an error. Bills the pages retrieved, like the standalone route.
   * `lists`: the client's domain lists (the caller checked `urls`), held on every redirect hop.
   */
  async fetchForChat(caller: WebCaller, urls: string[], lists?: DomainLists): Promise<{ pages: FetchedPage[]; skipped: SkippedUrl[] }> {
    const skipped: SkippedUrl[] = []
    const safe: SafeUrl[] = []
    const seen: string[] = []
    for (const url of urls) {
      const checked = parseSafeUrl(url)
      if (!checked.ok) skipped.push({ url, reason: checked.message })
      else if (!seen.includes(pageKey(checked.parsed))) {
        seen.push(pageKey(checked.parsed))
        safe.push(checked.url)
      }
    }
    const targets: FetchTarget[] = []
    const timeout = AbortSignal.any([caller.signal, AbortSignal.timeout(this.config.fetch.timeoutMs)])
    for (const [index, result] of (await Promise.all(safe.map(url => this.fetcher.resolveTarget(url, timeout)))).entries()) {
      if (result.ok) targets.push(result.target)
      else skipped.push({ url: safe[index]!, reason: result.message })
    }
    if (targets.length === 0) return { pages: [], skipped }
    const call = await this.begin(caller, 'web_fetch', chargeForUnits(targets.length, this.prices.webFetch))
    const cut = this.track(caller)
    let handedOver = false
    try {
      const refuse = lists ? (url: string) => domainProblem(url, lists) : undefined
      const results = await Promise.all(targets.map(target => this.fetchOne(target, cut.signal, refuse)))
      this.endIfUnread(cut, call, caller, 'web_fetch')
      const pages: FetchedPage[] = []
      for (const [index, result] of results.entries()) {
        if (result.ok) pages.push(result.page)
        else skipped.push({ url: targets[index]!.url, reason: result.message })
      }
      handedOver = await this.charge(caller, call, chargeForUnits(pages.length, this.prices.webFetch))
      this.log(caller, 'web_fetch', 'hosted', pages.length)
      return { pages, skipped }
    } finally {
      this.lifecycle.untrack(cut)
      if (!call.done && !handedOver) call.release()
    }
  }

  /** POST /api/v1/web/search (and hosted web_search): one billed search, or an ApiError. */
  async search(caller: WebCaller, query: SearchQuery): Promise<SearchResult[]> {
    const backend = this.searchBackend
    if (backend === null) throw new ApiError('unavailable', 'web search is not configured on this gateway (the operator sets web.search in the config); nothing was billed')
    const refusal = backend.unsupported(query)
    if (refusal) throw new ApiError('invalid_request', refusal, 'country')
    const call = await this.begin(caller, 'web_search', this.prices.webSearch)
    const cut = this.track(caller)
    let handedOver = false
    try {
      const outcome = await backend.search(query, cut.signal)
      this.endIfUnread(cut, call, caller, 'web_search')
      if (!outcome.ok) {
        call.release()
        this.log(caller, 'web_search', 'upstream-error', 0)
        this.noteOnRequest(caller, 'upstream-error', 0n)
        throw new ApiError('provider_error', `${outcome.message}; nothing was billed; do not retry automatically`)
      }
      handedOver = await this.charge(caller, call, this.prices.webSearch)
      this.log(caller, 'web_search', 'ok', 1)
      return outcome.results
    } finally {
      this.lifecycle.untrack(cut)
      if (!call.done && !handedOver) call.release()
    }
  }

  /**
   * Runs one chat turn's hosted pieces (its fetch and its search, side by side) under one
   * inference slot, as a single piece takes one: each begins with none of its own (QA: with one
   * slot per organization, both tools together were always refused 429). `run` must settle only
   * once every piece has ended; the slot is freed then, before the chat takes its own. A caller
   * whose slot is held already (a Fusion participant's: the run holds one) takes none here.
   */
  async underOneSlot<T>(caller: WebCaller, run: (caller: WebCaller) => Promise<T>): Promise<T> {
    if (caller.slotHeld === true) return run(caller)
    const freeSlot = this.metering.holdInferenceSlot(caller.principal)
    try {
      return await run({ ...caller, slotHeld: true })
    } finally {
      freeSlot()
    }
  }

  /** Resolves and checks every host before anything is reserved; any refusal is a 400. */
  private async resolveAll(urls: SafeUrl[], signal: AbortSignal): Promise<FetchTarget[]> {
    const timeout = AbortSignal.any([signal, AbortSignal.timeout(this.config.fetch.timeoutMs)])
    const results = await Promise.all(urls.map(url => this.fetcher.resolveTarget(url, timeout)))
    return results.map((result, index) => {
      if (result.ok) return result.target
      if (result.kind === 'failed') throw new ApiError('unavailable', `urls[${index}]: ${result.message}; nothing was billed`, `urls.${index}`)
      throw new ApiError('invalid_request', `urls[${index}] is refused: ${result.message}`, `urls.${index}`)
    })
  }

  private async fetchOne(target: FetchTarget, signal: AbortSignal, refuse?: (url: string) => string | null): Promise<PageResult> {
    try {
      return await this.fetcher.fetchPage(target, signal, refuse)
    } catch (error) {
      return { ok: false, kind: 'failed', message: `fetching ${target.url} failed (${(error as Error).message})` }
    }
  }

  /** The call's controller, tracked by the drain from its admission to its end (untrack it). */
  private track(caller: WebCaller): CallAbort {
    const cut = new CallAbort(caller.signal)
    cut.checkClient()
    this.lifecycle.track(cut)
    return cut
  }

  /**
   * The call ends unread when the drain's deadline cut it or its client left (then the fetches
   * or the search were cut on a lifecycle tick, or finished for no one). Like a collected chat
   * answer or a document parse, nothing is charged: what was retrieved never reaches the client.
   * The drain's cut answers its 503; a client that left is logged `cancelled` (the request line
   * says 499), not as the backend's failure.
   */
  private endIfUnread(cut: CallAbort, call: MeteredCall, caller: WebCaller, purpose: 'web_fetch' | 'web_search'): void {
    const outcome = cut.unread()
    if (outcome === undefined) return
    call.release()
    this.log(caller, purpose, outcome, 0)
    this.noteOnRequest(caller, outcome)
    throw cut.shutdownReason() ?? new ApiError('unavailable', `the request was cancelled before its ${purpose === 'web_fetch' ? 'pages were' : 'results were'} delivered; nothing was billed`)
  }

  private begin(caller: WebCaller, purpose: 'web_fetch' | 'web_search', estimate: bigint): Promise<MeteredCall> {
    const billingKey = caller.billingKey === undefined ? undefined : `${caller.billingKey}:${purpose}`
    return this.metering.begin({ principal: caller.principal, purpose, estimate, inference: caller.slotHeld !== true, requestId: caller.requestId, billingKey, continuesRequest: caller.continuesRequest })
  }

  /**
   * Settles now, or (hosted tools in chat) hands the charge to the chat's pending charges, which
   * then own the call: true when handed over.
   */
  private async charge(caller: WebCaller, call: MeteredCall, amount: bigint): Promise<boolean> {
    if (caller.pending === undefined || amount === 0n) {
      this.noteOnRequest(caller, 'ok', await this.settle(call, amount))
      return false
    }
    caller.pending.add(call, amount)
    return true
  }

  /** Settles (nothing retrieved: releases); what was booked. A ledger failure is a 503, never a 500. */
  private async settle(call: MeteredCall, amount: bigint): Promise<bigint> {
    if (amount === 0n) {
      call.release()
      return 0n
    }
    try {
      return await call.settle(amount)
    } catch (error) {
      if (error instanceof ApiError) throw error
      throw new ApiError('unavailable', 'the ledger could not record this charge')
    }
  }

  /** A standalone call's request line (the route's, MCP's tools/call) carries its outcome and charge, as a document parse's does. */
  private noteOnRequest(caller: WebCaller, outcome: string, charged?: bigint): void {
    if (caller.httpRequest) noteOutcome(caller.httpRequest, outcome, charged)
  }

  private log(caller: WebCaller, purpose: string, outcome: string, units: number): void {
    this.logger.info(purpose, { request_id: caller.requestId, org_id: caller.principal.orgId, key_id: caller.principal.keyId, outcome, units })
  }
}
