import { expect } from 'bun:test'
import type { ChatEvent } from '../../src/inference/canonical'
import type { StreamEncoder } from '../../src/inference/dialects/types'
import { toApiError } from '../../src/inference/upstream-errors'
import { FakeUpstream } from './fake-upstream'
import { paygConfig, upstreamProvider, type UpstreamType } from './gateway'
import { buildConfiguredApp, type TestApp, type TestOrg } from './harness'
import { poll } from './poll'

// What the same-format pass-through tests share (test/inference/*-pass-through.test.ts): an SDK
// client's fetch through app.handle that keeps each streamed reply's raw text, and the ledger's
// record of one request.

/**
 * A fetch for an official SDK client: each request goes through `t.app.handle` with the request
 * id `${prefix}-N` (N counts from 1), and a streamed reply's raw SSE text is kept in `lastReply`.
 */
export function recordingFetch(t: TestApp, prefix: string) {
  const recorder = {
    counter: 0,
    lastReply: '',
    /** The request id of the last request. */
    get requestId() {
      return `${prefix}-${recorder.counter}`
    },
    fetch: async (url: unknown, init?: RequestInit): Promise<Response> => {
      const headers = new Headers(init?.headers)
      headers.set('x-request-id', `${prefix}-${++recorder.counter}`)
      const response = await t.app.handle(new Request(url as string, { ...init, headers }))
      if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return response
      recorder.lastReply = await response.text()
      return new Response(recorder.lastReply, { status: response.status, headers: response.headers })
    },
  }
  return recorder
}

/**
 * A gateway whose model `m` (the rest of its YAML flow entry in `model`) is served by one fake
 * upstream of `type`, an organization `orgName` with 10 USD, and a recording fetch (`prefix`).
 */
export async function startPassThroughGateway(type: UpstreamType, model: string, orgName: string, prefix: string) {
  const upstream = await FakeUpstream.start()
  const t = await buildConfiguredApp(paygConfig([upstreamProvider('up', type, `${upstream.url}/v1`, 'UP_KEY')], [`  - { id: m, ${model} }`]), { UP_KEY: 'sk-up-0123456789' })
  const org: TestOrg = await t.createOrg(orgName, 10_000_000_000n)
  return { t, upstream, org, recorder: recordingFetch(t, prefix) }
}

/** The settle entries of one request (count and sum), once its one entry is there. */
export function settledOnce(t: TestApp, requestId: string): Promise<{ n: number; nanos: bigint }> {
  const entries = async () => {
    const row = (await t.deps.database.client.execute({ sql: 'SELECT COUNT(*) AS n, COALESCE(SUM(amount_nanos), 0) AS nanos FROM ledger_entries WHERE request_id = ?', args: [requestId] })).rows[0]!
    return { n: Number(row.n), nanos: BigInt(row.nanos as bigint) }
  }
  return poll('the settlement', 500, 4, async () => {
    const found = await entries()
    return found.n === 1 ? found : undefined
  })
}

/** After a suite: no stream left open, nothing left held. */
export function expectNothingOpen(t: TestApp): void {
  expect(t.deps.metrics.openStreams).toBe(0)
  expect(t.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)).toBe(0n)
}

/** What a stream encoder writes for `events`, as the pipeline writes it (the re-encoding path's bytes). */
export function encodeEvents(encoder: StreamEncoder, events: ChatEvent[]): string {
  let text = encoder.start().join('')
  for (const event of events) {
    if (event.type === 'finish') text += encoder.finish(event.reason, event.usage, event).join('')
    else if (event.type === 'error') text += encoder.fail(toApiError(event.error)).join('')
    else text += encoder.push(event).join('')
  }
  return text
}
