import { loadConfig } from '../../src/config/load'
import type { Deadline, Deadlines } from '../../src/fusion/part'
import type { ExtractorPool } from '../../src/documents/types'
import type { Logger } from '../../src/observability/logger'
import { openAIWire } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { buildTestApp, type TestApp, type TestOrg } from '../support/harness'

// A gateway in front of one fake OpenAI-compatible upstream per participant and one for the
// judge, so each part's behaviour is scripted on its own server and what each saw can be read.

/** Deadlines the test expires by hand (no timers, no sleeps), in the order the parts start them. */
export class ManualDeadlines implements Deadlines {
  readonly started: Array<{ ms: number; expire(): void; cleared: boolean }> = []
  start(ms: number): Deadline {
    const controller = new AbortController()
    const entry = { ms, cleared: false, expire: () => controller.abort(new DOMException('deadline passed', 'TimeoutError')) }
    this.started.push(entry)
    return { signal: controller.signal, clear: () => (entry.cleared = true) }
  }
}

export interface FusionHarness {
  t: TestApp
  org: TestOrg
  /** Upstreams of participants a, b, c (models `a`, `b`, `c`) and of the judge (model `judge`). */
  a: FakeUpstream
  b: FakeUpstream
  c: FakeUpstream
  judge: FakeUpstream
  /** An Anthropic Messages upstream: model `claude` (Private, at the judge's price), as a participant or a judge. */
  claude: FakeUpstream
  deadlines: ManualDeadlines
  fusion(body: Record<string, unknown>, options?: { key?: string; headers?: Record<string, string> }): Promise<Response>
  close(): Promise<void>
}

/** One SSE answer with exact reported usage. */
export function answer(text: string, usage = { inputTokens: 100, outputTokens: 20 }, finish: 'stop' | 'length' = 'stop'): { kind: 'sse'; body: string } {
  return { kind: 'sse', body: openAIWire.stream({ text, finish, usage }) }
}

/** Prices per Mtok: participants 1 USD in / 2 USD out; the judge 3 / 4 (so parts are told apart in the ledger). */
export const PARTICIPANT_PRICE = { input: 1_000_000_000n, output: 2_000_000_000n }
export const JUDGE_PRICE = { input: 3_000_000_000n, output: 4_000_000_000n }

const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b
/** The charge of a usage at a price: input and output summed, rounded up once. */
export function chargeOf(price: { input: bigint; output: bigint }, usage: { inputTokens: number; outputTokens: number }): bigint {
  return ceilDiv(BigInt(usage.inputTokens) * price.input + BigInt(usage.outputTokens) * price.output, 1_000_000n)
}

export async function buildFusionHarness(
  options: { plans?: string; credit?: bigint; extraModels?: string[]; logger?: Logger; extractor?: ExtractorPool; limits?: string } = {},
): Promise<FusionHarness> {
  const [a, b, c, judge, claude] = await Promise.all([FakeUpstream.start(), FakeUpstream.start(), FakeUpstream.start(), FakeUpstream.start(), FakeUpstream.start()])
  // A port nothing listens on: connections are refused.
  const gone = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const refusedUrl = `http://127.0.0.1:${gone.port}/v1`
  await gone.stop(true)
  const provider = (id: string, url: string) =>
    `  - { id: ${id}, type: openai-compatible, base_url: "${url}", api_key_env: UPSTREAM_KEY, retention: none, connect_timeout_ms: 5000, idle_timeout_ms: 5000 }`
  const model = (id: string, providerId: string, price: string, extra = '') =>
    `  - { id: ${id}, backends: [{ provider: ${providerId}, model: upstream-${id} }], price: ${price}, context_length: 16384, max_output_tokens: 2048${extra} }`
  const participantPrice = '{ input_per_mtok: "1", output_per_mtok: "2" }'
  const yaml = [
    'providers:',
    provider('pa', `${a.url}/v1`),
    provider('pb', `${b.url}/v1`),
    provider('pc', `${c.url}/v1`),
    provider('pj', `${judge.url}/v1`),
    provider('nowhere', refusedUrl),
    `  - { id: pan, type: anthropic, base_url: "${claude.url}/v1", api_key_env: UPSTREAM_KEY, retention: none, connect_timeout_ms: 5000, idle_timeout_ms: 5000 }`,
    'models:',
    model('a', 'pa', participantPrice, ', capabilities: { vision: true }'),
    model('b', 'pb', participantPrice),
    model('c', 'pc', participantPrice),
    model('refused', 'nowhere', participantPrice),
    model('judge', 'pj', '{ input_per_mtok: "3", output_per_mtok: "4" }', ', level: private'),
    model('claude', 'pan', '{ input_per_mtok: "3", output_per_mtok: "4" }', ', level: private'),
    ...(options.extraModels ?? []),
    options.plans ?? 'plans: { payg: { monthly_allowance: "0", fusion: true }, basic: { monthly_allowance: "0", fusion: false } }',
    'fusion: { judge: judge, participant_timeout_ms: 30000, judge_timeout_ms: 45000 }',
    ...(options.limits ? [`limits: ${options.limits}`] : []),
  ].join('\n')
  const env = { SVC_CONFIG: '/virtual/fusion.yaml', UPSTREAM_KEY: 'sk-upstream-test' }
  const t = await buildTestApp(env, loadConfig(env, () => yaml), { ...(options.logger ? { logger: options.logger } : {}), extractor: options.extractor })
  const deadlines = new ManualDeadlines()
  t.deps.fusion.deadlines = deadlines
  const org = await t.createOrg('acme', options.credit ?? 10_000_000_000n)
  return {
    t, org, a, b, c, judge, claude, deadlines,
    fusion: (body, request = {}) => t.request('POST', '/api/v1/chat/fusion', { key: request.key ?? org.adminKey, body, headers: request.headers }),
    async close() {
      await Promise.all([a.close(), b.close(), c.close(), judge.close(), claude.close()])
      await t.close()
    },
  }
}

/** Settled ledger entries of purpose `fusion`, in order of insertion. */
export async function fusionEntries(t: TestApp): Promise<Array<{ amount: bigint; key: string | null }>> {
  const result = await t.deps.database.client.execute("SELECT amount_nanos, idempotency_key FROM ledger_entries WHERE kind = 'settle' AND purpose = 'fusion' ORDER BY rowid")
  return result.rows.map(row => ({ amount: BigInt(row.amount_nanos as bigint), key: (row.idempotency_key as string | null) ?? null }))
}

export const USER_MESSAGES = [{ role: 'user', content: 'Which is larger, 9.11 or 9.9?' }]
