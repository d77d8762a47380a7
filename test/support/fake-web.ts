import { afterEach } from 'bun:test'
import type { Resolver, ResolveResult } from '../../src/web/resolver'
import type { Transport } from '../../src/web/fetcher'
import type { ExtractorPool } from '../../src/documents/types'
import type { Logger } from '../../src/observability/logger'

/**
 * A scripted DNS (SECURITY-NOTES.md §6.1): each name maps to a list of answers, one per lookup
 * (the last repeats), so rebinding (a second lookup that answers differently) can be played.
 * Every lookup is counted.
 */
export class FakeResolver implements Resolver {
  readonly lookups: string[] = []
  private readonly answers = new Map<string, Array<string[] | ResolveResult>>()

  /** `host` answers `addresses` on every lookup (or, given several lists, one per lookup). */
  set(host: string, ...answers: Array<string[] | ResolveResult>): this {
    this.answers.set(host, answers)
    return this
  }

  async resolve(host: string): Promise<ResolveResult> {
    this.lookups.push(host)
    const answers = this.answers.get(host)
    if (!answers || answers.length === 0) return { ok: false, reason: 'not-found', message: `${host} does not resolve` }
    const next = answers.length > 1 ? answers.shift()! : answers[0]!
    return Array.isArray(next) ? { ok: true, addresses: next } : next
  }
}

/** One outbound connection attempt the fetcher made: the dialled URL, Host and SNI. */
export interface Egress {
  url: string
  host: string | undefined
  serverName: string | undefined
}

/**
 * The fetcher's transport with an egress log. As a safety net it refuses to dial anything but
 * the loopback test servers (this machine may never send traffic to other addresses): such an
 * attempt is logged and fails, and the test that caused it fails on the log.
 */
export function loggingTransport(): { transport: Transport; egress: Egress[] } {
  const egress: Egress[] = []
  const transport: Transport = (url, init) => {
    const headers = init.headers as Record<string, string>
    egress.push({ url, host: headers.host, serverName: init.tls?.serverName })
    if (!/^https?:\/\/127\.0\.0\.1[:/]/.test(url)) return Promise.reject(new Error(`test transport refused to dial ${url}`))
    return fetch(url, init as RequestInit)
  }
  return { transport, egress }
}

/** What a test page server saw. */
export interface SeenRequest {
  path: string
  headers: Record<string, string>
}

/** A local page server on 127.0.0.1:0; `handler` answers, every request is recorded. */
export function pageServer(handler: (request: Request, url: URL) => Response | Promise<Response>, tls?: { cert: string; key: string }) {
  const seen: SeenRequest[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    ...(tls ? { tls } : {}),
    fetch(request) {
      const url = new URL(request.url)
      seen.push({ path: url.pathname + url.search, headers: Object.fromEntries(request.headers) })
      return handler(request, url)
    },
  })
  return { server, seen, port: server.port as number, stop: () => server.stop(true) }
}

/** A SearXNG search result as its JSON API returns it. */
export interface SearxngResult {
  url: string
  title: string
  content: string
  parsed_url: string[]
  publishedDate?: string
}

/** Two results for any query: the Bun docs (with a date) and the Bun repository. */
export const BUN_RESULTS: SearxngResult[] = [
  { url: 'https://bun.sh/docs', title: 'Bun docs', content: 'Bun is a fast JavaScript runtime.', parsed_url: ['https', 'bun.sh', '/docs', '', '', ''], publishedDate: '2025-01-02T00:00:00' },
  { url: 'https://github.com/oven-sh/bun', title: 'oven-sh/bun', content: 'Source code.', parsed_url: ['https', 'github.com', '/oven-sh/bun', '', '', ''] },
]

/**
 * A fake SearXNG on 127.0.0.1:0 answering every query with `results`; each query is recorded.
 * `config` is the `web.search` value for buildWebApp({ search }). `hold`: it answers no query,
 * holding each until the gateway gives up on it, and counts those given up (`aborted`).
 */
export function searxngServer(results: SearxngResult[] = BUN_RESULTS, options: { hold?: boolean } = {}) {
  const queries: string[] = []
  const state = { aborted: 0 }
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch(request) {
      const query = new URL(request.url).searchParams.get('q')
      queries.push(query ?? '')
      if (!options.hold) return Response.json({ query, results })
      return new Promise<Response>(resolve => {
        request.signal.addEventListener('abort', () => {
          state.aborted += 1
          resolve(new Response(null, { status: 499 }))
        })
      })
    },
  })
  return { queries, state, config: `{ backend: searxng, base_url: "http://127.0.0.1:${server.port}" }`, stop: () => server.stop(true) }
}

/** An HTML page titled `title` whose body says it is the story at `path`, plus `extra` (text or markup). */
export function storyPage(path: string, options: { title?: string; extra?: string; headers?: Record<string, string> } = {}): Response {
  const title = options.title ?? `Story ${path}`
  return new Response(`<html><head><title>${title}</title></head><body><p>The story at ${path}.${options.extra ?? ''}</p></body></html>`, {
    headers: { 'content-type': 'text/html', ...options.headers },
  })
}

/** A web config YAML for tests: the demo model with the web capabilities, loopback allowed as "public" when resolved. */
export function webConfigYaml(extra: { search?: string; fetch?: string; capabilities?: string; limits?: string; contextLength?: number; allow?: string; models?: string } = {}): string {
  return `
providers:
  - { id: demo, type: demo, retention: none }
models:
  - id: demo-web
    level: anonymous
    backends: [{ provider: demo, model: demo }]
    price: { input_per_mtok: "0.10", output_per_mtok: "0.40" }
    context_length: ${extra.contextLength ?? 32768}
    max_output_tokens: 1024
    capabilities: ${extra.capabilities ?? '{ tools: true, supports_web_fetch: true, supports_web_search: true }'}
  - id: demo-plain
    level: anonymous
    backends: [{ provider: demo, model: demo }]
    price: { input_per_mtok: "0.10", output_per_mtok: "0.40" }
    context_length: 32768
    max_output_tokens: 1024
${extra.models ?? ''}
plans:
  payg: { monthly_allowance: "0", fusion: false }
  pro: { monthly_allowance: "0.003", fusion: true }
web:
  fetch: { ${fetchSettings(extra)} }
${extra.search ? `  search: ${extra.search}` : ''}
prices: { web_fetch: "0.002", web_search: "0.005" }
${extra.limits ? `limits: ${extra.limits}` : ''}
`
}

/** web.fetch's settings: the defaults, each unless `extra.fetch` gives its own (a key may appear once), then `extra.fetch`. */
function fetchSettings(extra: { fetch?: string; allow?: string }): string {
  const defaults = { timeout_ms: '2000', max_bytes: '65536', unsafe_test_allow_cidrs: extra.allow ?? '["127.0.0.1/32"]' }
  const given = (key: string) => new RegExp(`(^|, )${key}:`).test(extra.fetch ?? '')
  return [...Object.entries(defaults).filter(([key]) => !given(key)).map(([key, value]) => `${key}: ${value}`), ...(extra.fetch ? [extra.fetch] : [])].join(', ')
}

/**
 * The stops to run after each test of the calling file (page servers, fake SearXNG), then the
 * test's app (`app()`, when one was built) closed.
 */
export function stopsAfterEach(app: () => { close(): Promise<void> } | undefined): Array<() => void> {
  const stops: Array<() => void> = []
  afterEach(async () => {
    for (const stop of stops.splice(0)) stop()
    await app()?.close()
  })
  return stops
}

/** A test app on `webConfigYaml(extra)` with the scripted resolver and the logging transport. */
export async function buildWebApp(extra: Parameters<typeof webConfigYaml>[0] = {}, env: Record<string, string> = {}, overrides: { tlsCa?: string; extractor?: ExtractorPool; logger?: Logger } = {}) {
  const { loadConfig } = await import('../../src/config/load')
  const { buildTestApp } = await import('./harness')
  const resolver = new FakeResolver()
  const { transport, egress } = loggingTransport()
  const config = loadConfig({ SVC_CONFIG: 'web-test.yaml', ...env }, () => webConfigYaml(extra))
  const t = await buildTestApp({}, config, { resolver, webTransport: transport, webTlsCa: overrides.tlsCa, extractor: overrides.extractor, ...(overrides.logger ? { logger: overrides.logger } : {}) })
  return { t, resolver, egress }
}
