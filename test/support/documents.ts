import { sql } from 'drizzle-orm'
import type { DocumentType, ExtractorPool } from '../../src/documents/types'
import { FakeUpstream } from './fake-upstream'
import { paygConfig, startServedGateway, upstreamProvider, type ServedGateway } from './gateway'
import type { TestApp } from './harness'

/** The settled document-parse charges of an organization, one per parse, in nanos. */
export async function parseCharges(t: TestApp, orgId: string): Promise<bigint[]> {
  const rows = await t.deps.database.db.all<{ amount_nanos: bigint }>(sql`select amount_nanos from ledger_entries where org_id = ${orgId} and purpose = 'doc_parse' and kind = 'settle'`)
  return rows.map(row => BigInt(row.amount_nanos))
}

/**
 * An extractor whose jobs, like ones already in a worker, wait (whatever their signal says) until
 * the test calls `finish()`, then read `text`: for a client that leaves, or a drain that cuts,
 * while a document is read. `running` resolves when the first job started; `jobs()` counts them.
 */
export function heldExtractor(text: string, documentType: DocumentType = 'text') {
  let jobs = 0
  const held: Array<() => void> = []
  let started!: () => void
  const running = new Promise<void>(resolve => (started = resolve))
  const extractor: ExtractorPool = {
    async extract() {
      jobs += 1
      started()
      await new Promise<void>(resolve => held.push(resolve))
      return { text, documentType }
    },
    stats: () => ({ workers: 1, busy: jobs, queued: 0 }),
    close: async () => {},
  }
  return { extractor, running, jobs: () => jobs, finish: () => held.forEach(release => release()) }
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
  /** The official SDKs with the organization's admin key. */
  clients: Pick<ServedGateway, 'openai' | 'anthropic'>
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
  const served = await startServedGateway(paygConfig(
    [upstreamProvider('oa', 'openai-compatible', `${openai.url}/v1`, 'UP_KEY'), upstreamProvider('an', 'anthropic', `${anthropic.url}/v1`, 'UP_KEY')],
    models.map(model => `  - ${model}`),
  ), { UP_KEY: 'sk-up' })
  const t = served.t
  return {
    t, openai, anthropic, baseUrl: served.baseUrl, orgId: served.orgId, key: served.key,
    clients: { openai: served.openai, anthropic: served.anthropic },
    async close() {
      await t.close()
      await openai.close()
      await anthropic.close()
    },
  }
}
