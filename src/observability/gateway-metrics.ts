import { type ApiError, UpstreamRefusal } from '../http/errors'
import { MetricsRegistry, type Counter, type Histogram } from './metrics'

/** The codes `svc_refusals_total` counts: the gateway's limits, the ledger, and unavailability. */
const REFUSAL_CODES = new Set(['rate_limited', 'insufficient_quota', 'unavailable'])

/**
 * The gateway's metrics (ARCHITECTURE.md §9, Observability), all prefixed `svc_`. Modules that
 * own state (writer, sweeper, limits, an extractor pool) register gauges read at scrape time
 * through `registry.gauge(name, help, read)`; everything else is a counter or histogram
 * updated once per request, upstream call or ledger batch.
 */
export class GatewayMetrics {
  readonly registry = new MetricsRegistry()
  /** Requests by route pattern (not the raw path: bounded cardinality), method and status. */
  readonly requests: Counter
  readonly requestSeconds: Histogram
  /** Upstream calls by provider and outcome (`ok` or an UpstreamError kind), counted when they open or fail to. */
  readonly upstreamCalls: Counter
  /** Time from the call to the upstream's response headers (or its failure), by provider. */
  readonly upstreamSeconds: Histogram
  /** Upstream failures by provider and kind: before the first event, before any output (the next backend took over), or mid-stream. */
  readonly upstreamErrors: Counter
  /** Evidence fetches of attested backends (Confidential pre-call, Encrypted key pinning, GET /api/v1/attestation), by provider. */
  readonly attestationSeconds: Histogram
  /** Evidence fetches that failed, by provider and kind (an UpstreamError kind, or `evidence-rejected`). */
  readonly attestationFailures: Counter
  readonly tokens: Counter
  /** Every settled charge (MeteredCall.settle): by model ('' for documents and web) and ledger purpose. */
  readonly billedNanos: Counter
  /** Refusals by code: rate_limited (buckets, concurrency), insufficient_quota (funds, caps), unavailable. */
  readonly refusals: Counter
  readonly ledgerCommitSeconds: Histogram
  /** Streams open now (SSE responses not yet ended). */
  openStreams = 0

  constructor() {
    const r = this.registry
    this.requests = r.counter('svc_http_requests_total', 'HTTP requests by route, method and status.', ['route', 'method', 'status'])
    this.requestSeconds = r.histogram('svc_http_request_duration_seconds', 'Time to the response headers (streams: to the first byte), by route.', ['route'])
    this.upstreamCalls = r.counter('svc_upstream_requests_total', 'Upstream calls by provider and outcome (ok, the failure kind, or aborted when cancelled before the answer).', ['provider', 'outcome'])
    this.upstreamSeconds = r.histogram('svc_upstream_response_seconds', 'Upstream time to response headers (or failure), by provider.', ['provider'])
    this.upstreamErrors = r.counter('svc_upstream_errors_total', 'Upstream failures by provider, kind and phase (before the first event, before any output with the next backend tried, or mid-stream).', ['provider', 'kind', 'phase'])
    this.attestationSeconds = r.histogram('svc_attestation_fetch_seconds', 'Attestation evidence fetch time (request to checked evidence, or failure), by provider.', ['provider'])
    this.attestationFailures = r.counter(
      'svc_attestation_failures_total',
      'Attestation evidence fetches that failed, by provider and kind (connection, timeout, server, rate-limited, auth, not-found, bad-request, evidence-rejected).',
      ['provider', 'kind'],
    )
    this.tokens = r.counter('svc_tokens_total', 'Tokens billed, by model and direction (input, output).', ['model', 'direction'])
    this.billedNanos = r.counter('svc_billed_nanos_total', 'USD nanos charged, by model (empty for document parsing and web) and purpose (chat, fusion, doc_parse, web_fetch, web_search).', ['model', 'purpose'])
    this.refusals = r.counter('svc_refusals_total', 'Requests refused by limits or the ledger, by error code.', ['code'])
    this.ledgerCommitSeconds = r.histogram('svc_ledger_commit_seconds', 'Ledger writer batch commit time.', [])
    r.gauge('svc_open_streams', 'Streaming responses in progress.', () => this.openStreams)
  }

  /**
   * Registers a value read at each scrape, for modules that own state (the extractor pool:
   * `metrics.gauge('svc_extractor_busy', 'Workers busy.', () => pool.stats().busy)`).
   */
  gauge(name: string, help: string, read: () => number): void {
    this.registry.gauge(name, help, read)
  }

  /**
   * Counts a refusal of the gateway's own (buckets, concurrency gate, funds and caps,
   * unavailability), wherever it is answered: the HTTP error handler, an MCP tool's JSON-RPC
   * error. Other errors, and an upstream's rate limit passed on (UpstreamRefusal), are not counted.
   */
  refused(error: ApiError): void {
    if (REFUSAL_CODES.has(error.code) && !(error instanceof UpstreamRefusal)) this.refusals.inc(1, error.code)
  }

  /** Records one finished HTTP request (called once per request). */
  request(route: string, method: string, status: number, seconds: number): void {
    this.requests.inc(1, route, method, statusText(status))
    this.requestSeconds.observe(seconds, route)
  }
}

// Status labels are a small closed set: cache their strings.
const STATUS_TEXT = new Map<number, string>()
function statusText(status: number): string {
  let text = STATUS_TEXT.get(status)
  if (text === undefined) STATUS_TEXT.set(status, (text = String(status)))
  return text
}
