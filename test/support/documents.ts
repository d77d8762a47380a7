import { sql } from 'drizzle-orm'
import { loadConfig } from '../../src/config/load'
import { FakeUpstream } from './fake-upstream'
import { buildTestApp, type TestApp } from './harness'

/** The settled document-parse charges of an organization, one per parse, in nanos. */
export async function parseCharges(t: TestApp, orgId: string): Promise<bigint[]> {
  const rows = await t.deps.database.db.all<{ amount_nanos: bigint }>(sql`select amount_nanos from ledger_entries where org_id = ${orgId} and purpose = 'doc_parse' and kind = 'settle'`)
  return rows.map(row => BigInt(row.amount_nanos))
}

export interface DocumentsGateway {
  t: TestApp
  /** The fake OpenAI-compatible upstream (provider `oa`) and the fake Anthropic one (provider `an`). */
  openai: FakeUpstream
  anthropic: FakeUpstream
  /** Where the gateway listens (127.0.0.1:0), for the SDK clients. */
  baseUrl: string
  orgId: string
  key: string
  close(): Promise<void>
}

/**
 * A gateway served on a real socket in front of fake OpenAI-compatible (`oa`) and Anthropic
 * (`an`) upstreams, with `models` (YAML flow entries naming those providers) on the pay-as-you-go
 * plan, and an organization with 10 USD.
 */
export async function startDocumentsGateway(models: string[]): Promise<DocumentsGateway> {
  const openai = await FakeUpstream.start()
  const anthropic = await FakeUpstream.start()
  const yaml = [
    'providers:',
    `  - { id: oa, type: openai-compatible, base_url: "${openai.url}/v1", api_key_env: UP_KEY, retention: none }`,
    `  - { id: an, type: anthropic, base_url: "${anthropic.url}/v1", api_key_env: UP_KEY, retention: none }`,
    'models:',
    ...models.map(model => `  - ${model}`),
    'plans: { payg: { monthly_allowance: "0", fusion: false } }',
  ].join('\n')
  const env = { SVC_CONFIG: '/virtual/gateway.yaml', UP_KEY: 'sk-up' }
  const t = await buildTestApp(env, loadConfig(env, () => yaml))
  const org = await t.createOrg('acme', 10_000_000_000n)
  return {
    t, openai, anthropic, baseUrl: t.listen(), orgId: org.orgId, key: org.adminKey,
    async close() {
      await t.close()
      await openai.close()
      await anthropic.close()
    },
  }
}
