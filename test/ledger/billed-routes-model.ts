import { loadConfig } from '../../src/config/load'
import { utcDay, utcMonth } from '../../src/lib/clock'
import type { SpendCapPeriod } from '../../src/db/schema'
import { FakeUpstream } from '../support/fake-upstream'
import { buildTestApp, type TestApp } from '../support/harness'
import { FakeResolver, loggingTransport, pageServer } from '../support/fake-web'

// The gateway and the independent money model of billed-routes.test.ts. Every number the model
// uses comes from the documents, not from src/: prices from the config below, funding order from
// ARCHITECTURE.md §7.3, caps from §7.4, the missing-usage fallback from SECURITY-NOTES.md §4
// (input erring high at bytes ÷ 3 + 4 per message, output bytes ÷ 4) and README "Money".

export const INPUT_PER_TOKEN_MILLIONTHS = 1_000_000_000n // "1" USD per Mtok, in nanos per million tokens
export const OUTPUT_PER_TOKEN_MILLIONTHS = 2_000_000_000n
export const WEB_FETCH_PRICE = 100_000n // prices.web_fetch "0.0001"
export const PARSE_PRICE = 50_000n // documents.price_per_parse "0.00005"
export const PLAN_ALLOWANCE = { pro: 2_000_000n, basic: 500_000n, payg: 0n } as const
export type PlanId = keyof typeof PLAN_ALLOWANCE
export const MODEL_MAX_OUTPUT = 256
export const CONTEXT_LENGTH = 16384

/** SECURITY-NOTES.md §3: a charge is rounded up to a whole nano once. */
export const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b
export function tokenCharge(input: number, output: number): bigint {
  return ceilDiv(BigInt(input) * INPUT_PER_TOKEN_MILLIONTHS + BigInt(output) * OUTPUT_PER_TOKEN_MILLIONTHS, 1_000_000n)
}
/** The Fusion judge `j`: "0.5" in, "1" out per Mtok (told apart from the participants in the ledger). */
export function judgeCharge(input: number, output: number): bigint {
  return ceilDiv(BigInt(input) * 500_000_000n + BigInt(output) * 1_000_000_000n, 1_000_000n)
}
/** The reservation: high input and the output cap, each part rounded up (README "Money", meter). */
export function estimateOf(prompt: string, maxTokens: number): bigint {
  return ceilDiv(BigInt(highInput(prompt)) * INPUT_PER_TOKEN_MILLIONTHS, 1_000_000n) + ceilDiv(BigInt(maxTokens) * OUTPUT_PER_TOKEN_MILLIONTHS, 1_000_000n)
}
/** One user message: UTF-8 bytes ÷ 3 rounded up, + 4 per message. */
export const highInput = (prompt: string) => Math.ceil(Buffer.byteLength(prompt) / 3) + 4
export const outputFallback = (text: string) => Math.ceil(Buffer.byteLength(text) / 4)

export interface ModelKey {
  id: string
  secret: string
  cap: { period: SpendCapPeriod; nanos: bigint } | null
  status: 'active' | 'revoked' | 'expired'
  /** Spend per cap window start. */
  spent: Map<number, bigint>
}

export interface ModelOrg {
  id: string
  plan: PlanId
  adminKey: string
  prepaid: bigint
  /** Allowance used per UTC month start; `granted` is fixed when the period's row appears. */
  periods: Map<number, { granted: bigint; used: bigint }>
  keys: ModelKey[]
}

export function capWindow(period: SpendCapPeriod, nowMs: number): number {
  if (period === 'daily') return utcDay(nowMs).startMs
  if (period === 'monthly') return utcMonth(nowMs).startMs
  return 0
}

export class MoneyModel {
  private readonly totals = new Map<string, bigint>()
  constructor(readonly orgs: ModelOrg[]) {}

  /** Σ of everything charged to the org. */
  charged(org: ModelOrg): bigint {
    return this.totals.get(org.id) ?? 0n
  }

  allowanceLeft(org: ModelOrg, nowMs: number): bigint {
    const period = org.periods.get(utcMonth(nowMs).startMs)
    return period ? period.granted - period.used : PLAN_ALLOWANCE[org.plan]
  }
  available(org: ModelOrg, nowMs: number): bigint {
    const left = this.allowanceLeft(org, nowMs)
    return (left > 0n ? left : 0n) + org.prepaid
  }
  capLeft(key: ModelKey, nowMs: number): bigint | null {
    if (!key.cap) return null
    return key.cap.nanos - (key.spent.get(capWindow(key.cap.period, nowMs)) ?? 0n)
  }
  /**
   * Whether a hold of `estimate` fits the org's funds and the key's cap (one instance, nothing in
   * flight). Allowance and prepaid are leased as separate scopes (§7.2–7.3), so a prepaid balance
   * an overshoot took below zero blocks only the prepaid lease ("the next lease fails"): what is
   * left of the allowance can still be spent, and the debt stays on prepaid until a top-up.
   */
  admits(org: ModelOrg, key: ModelKey, estimate: bigint, nowMs: number): boolean {
    const cap = this.capLeft(key, nowMs)
    const left = this.allowanceLeft(org, nowMs)
    const funds = (left > 0n ? left : 0n) + (org.prepaid > 0n ? org.prepaid : 0n)
    return funds >= estimate && (cap === null || cap >= estimate)
  }
  /** §7.3: the allowance of the current period first, then prepaid (which may go below zero by an overshoot). */
  charge(org: ModelOrg, key: ModelKey, amount: bigint, nowMs: number): void {
    if (amount === 0n) return
    this.totals.set(org.id, this.charged(org) + amount)
    const start = utcMonth(nowMs).startMs
    let period = org.periods.get(start)
    if (!period) org.periods.set(start, (period = { granted: PLAN_ALLOWANCE[org.plan], used: 0n }))
    const left = period.granted - period.used
    const fromAllowance = left > 0n ? (left < amount ? left : amount) : 0n
    period.used += fromAllowance
    org.prepaid -= amount - fromAllowance
    if (key.cap) {
      const window = capWindow(key.cap.period, nowMs)
      const spent = (key.spent.get(window) ?? 0n) + amount
      key.spent.set(window, spent)
      // §7.4: an exhausted overall cap flips the key to expired in the same batch.
      if (key.cap.period === 'overall' && spent >= key.cap.nanos) key.status = 'expired'
    }
  }
}

export interface Gateway {
  t: TestApp
  /** Models m, m2 and m3 (the Fusion participants share it); the judge `j` has its own. */
  upstream: FakeUpstream
  judge: FakeUpstream
  resolver: FakeResolver
  pagesPort: number
  close(): Promise<void>
}

/** The app with one OpenAI-compatible upstream (model `m`), a page server reached through the test resolver, and three plans. */
export async function startGateway(): Promise<Gateway> {
  const upstream = await FakeUpstream.start()
  const judge = await FakeUpstream.start()
  const pages = pageServer((_, url) =>
    url.pathname.endsWith('/broken') ? new Response('down', { status: 500 })
    : url.pathname.endsWith('/image') ? new Response(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), { headers: { 'content-type': 'image/png' } })
    : new Response(`<html><head><title>Page ${url.pathname}</title></head><body><p>Text of ${url.pathname}.</p></body></html>`, { headers: { 'content-type': 'text/html' } }))
  const resolver = new FakeResolver().set('pages.example-fuzz.com', ['127.0.0.1'])
  const { transport } = loggingTransport()
  const yaml = [
    'providers:',
    `  - { id: up, type: openai-compatible, base_url: "${upstream.url}/v1", api_key_env: UP_KEY, retention: none, connect_timeout_ms: 5000, idle_timeout_ms: 5000 }`,
    `  - { id: jp, type: openai-compatible, base_url: "${judge.url}/v1", api_key_env: UP_KEY, retention: none, connect_timeout_ms: 5000, idle_timeout_ms: 5000 }`,
    'models:',
    ...['m', 'm2', 'm3'].map(id => `  - { id: ${id}, backends: [{ provider: up, model: upstream-${id} }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: ${CONTEXT_LENGTH}, max_output_tokens: ${MODEL_MAX_OUTPUT} }`),
    `  - { id: mw, backends: [{ provider: up, model: upstream-mw }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: ${CONTEXT_LENGTH}, max_output_tokens: ${MODEL_MAX_OUTPUT}, capabilities: { file_input: true, supports_web_fetch: true } }`,
    `  - { id: j, backends: [{ provider: jp, model: upstream-j }], price: { input_per_mtok: "0.5", output_per_mtok: "1" }, context_length: ${CONTEXT_LENGTH}, max_output_tokens: ${MODEL_MAX_OUTPUT} }`,
    'fusion: { judge: j, participant_timeout_ms: 30000, judge_timeout_ms: 30000 }',
    'plans: { pro: { monthly_allowance: "0.002", fusion: true }, basic: { monthly_allowance: "0.0005", fusion: false }, payg: { monthly_allowance: "0", fusion: false } }',
    'limits: { inference: { key: { burst: 100000, per_second: 100000 }, org: { burst: 100000, per_second: 100000 } }, management: { key: { burst: 100000, per_second: 100000 }, org: { burst: 100000, per_second: 100000 } } }',
    'web: { fetch: { timeout_ms: 5000, max_bytes: 65536, unsafe_test_allow_cidrs: ["127.0.0.1/32"] } }',
    'prices: { web_fetch: "0.0001", web_search: "0.005" }',
    'documents: { price_per_parse: "0.00005" }',
  ].join('\n')
  const env = { SVC_CONFIG: '/virtual/billed-routes.yaml', UP_KEY: 'sk-up' }
  const t = await buildTestApp(env, loadConfig(env, () => yaml), { resolver, webTransport: transport })
  return {
    t, upstream, judge, resolver, pagesPort: pages.port,
    async close() {
      await t.close()
      await upstream.close()
      await judge.close()
      pages.stop()
    },
  }
}

/** A small deterministic PRNG (mulberry32): the same seed replays the same run. */
export function prng(seed: number) {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let x = state
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    int: (min: number, max: number) => min + Math.floor(next() * (max - min + 1)),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
    weighted: <T>(entries: Array<[number, T]>): T => {
      let roll = next() * entries.reduce((sum, [weight]) => sum + weight, 0)
      for (const [weight, value] of entries) if ((roll -= weight) < 0) return value
      return entries[entries.length - 1]![1]
    },
  }
}
