import { afterEach, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { loadConfig } from '../../src/config/load'
import { heldExtractor } from '../support/documents'
import { buildWebApp, pageServer } from '../support/fake-web'
import { buildTestApp, createPlanOrg, json, type TestApp } from '../support/harness'
import { poll } from '../support/poll'

// A chat with a file part parses it (one document-parse unit, its own metered call) before the
// chat itself is admitted. Two drain defects there: the parse was not tracked, so the drain's
// deadline did not cut it; and a drain that began while the file was read refused the chat's own
// admission as a new request, so a request in flight answered 503 after paying for its file (or,
// with hosted web fetch, for its pages).

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function gatewayWithHeldExtractor() {
  const { extractor, jobs, finish } = heldExtractor('meeting notes')
  const env = { SVC_CONFIG: '/virtual/files.yaml' }
  const t = await buildTestApp(env, loadConfig(env, () => `
providers: [{ id: demo, type: demo, retention: none }]
models: [{ id: m, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 256, capabilities: { file_input: true } }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
`), { extractor })
  cleanups.push(() => t.close())
  cleanups.push(finish)
  return { t, jobs, release: finish }
}

function chatWithFile(t: TestApp, key: string) {
  const notes = Buffer.from('meeting notes').toString('base64')
  return t.request('POST', '/v1/chat/completions', {
    key,
    body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'summarize' }, { type: 'file', file: { file_data: `data:text/plain;base64,${notes}`, filename: 'notes.txt' } }] }] },
  })
}

async function charges(t: TestApp, orgId: string): Promise<string[]> {
  const rows = await t.deps.database.db.all<{ purpose: string }>(sql`select purpose from ledger_entries where org_id = ${orgId} and kind = 'settle' order by purpose`)
  return rows.map(row => row.purpose)
}

test('the drain deadline cuts a chat whose attached file is being read: 503 unavailable, nothing charged', async () => {
  const { t, jobs } = await gatewayWithHeldExtractor()
  const org = await t.createOrg()
  const before = await t.deps.balance(org.orgId)
  const answer = chatWithFile(t, org.adminKey)
  await poll('the file to reach the extractor', 200, 10, () => (jobs() === 1 ? true : undefined))
  expect(t.deps.lifecycle.inFlight).toBe(1)
  t.deps.lifecycle.drain()
  t.deps.lifecycle.abortAll()
  const response = await answer
  expect(response.status).toBe(503)
  expect((await json(response)).error.message).toContain('shutting down')
  expect(t.deps.lifecycle.inFlight).toBe(0)
  expect(await charges(t, org.orgId)).toEqual([])
  expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(before.prepaidNanos)
  expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
})

test('a chat whose file was being read when the drain began still gets its answer, its file and chat each charged once', async () => {
  const { t, jobs, release } = await gatewayWithHeldExtractor()
  const org = await t.createOrg()
  const answer = chatWithFile(t, org.adminKey)
  await poll('the file to reach the extractor', 200, 10, () => (jobs() === 1 ? true : undefined))
  t.deps.lifecycle.drain()
  release()
  const response = await answer
  expect(response.status).toBe(200)
  expect((await json(response)).choices[0].message.content.length).toBeGreaterThan(0)
  expect(await charges(t, org.orgId)).toEqual(['chat', 'doc_parse'])
  // A request that arrives now is new: refused before its file is read.
  const late = await chatWithFile(t, org.adminKey)
  expect(late.status).toBe(503)
  expect(jobs()).toBe(1)
  expect(await charges(t, org.orgId)).toEqual(['chat', 'doc_parse'])
})

const NOTES = () => new Response('<html><title>Notes</title><body>meeting notes</body></html>', { headers: { 'content-type': 'text/html' } })

/**
 * A web app whose chat fetches one page of a served site: `hold` says where the request waits
 * until the test has begun the drain (the page's answer, or its DNS lookup); `ask` sends the chat.
 */
async function webChatHeldAt(hold: 'page' | 'lookup', page: () => Response) {
  let release!: () => void
  const held = new Promise<void>(resolve => (release = resolve))
  let waiting = 0
  const site = pageServer(async () => {
    if (hold === 'page') {
      waiting += 1
      await held
    }
    return page()
  })
  cleanups.push(() => {
    release()
    site.stop()
  })
  const web = await buildWebApp()
  cleanups.push(() => web.t.close())
  if (hold === 'lookup') {
    const resolve = web.resolver.resolve.bind(web.resolver)
    web.resolver.resolve = async host => {
      waiting += 1
      await held
      return resolve(host)
    }
  }
  web.resolver.set('docs.example-web.com', ['127.0.0.1'])
  const t = web.t
  const org = await createPlanOrg(t, { name: 'chat', keyName: 'chat' })
  const ask = () => t.request('POST', '/v1/chat/completions', {
    key: org.key,
    body: { model: 'demo-web', web_fetch: true, messages: [{ role: 'user', content: `summarize http://docs.example-web.com:${site.port}/notes` }] },
  })
  /** The chat sent, the drain begun while it waits, then let go: its answer. */
  const acrossDrain = async () => {
    const answer = ask()
    await poll(`the ${hold} to be reached`, 200, 10, () => (waiting === 1 ? true : undefined))
    t.deps.lifecycle.drain()
    release()
    return answer
  }
  return { t, org, ask, acrossDrain }
}

test.each(['page', 'lookup'] as const)('a chat whose hosted web fetch waited on its %s when the drain began still gets its answer, its page and chat each charged once', async hold => {
  // Before: the page was charged, then the chat was refused 503 as a new request; and (regression
  // QA) a page still being resolved was refused its own admission, as new.
  const { t, org, acrossDrain } = await webChatHeldAt(hold, NOTES)
  const response = await acrossDrain()
  expect(response.status).toBe(200)
  expect((await json(response)).usage.server_tool_use).toMatchObject({ web_fetch_requests: 1 })
  expect(await charges(t, org.orgId)).toEqual(['chat', 'web_fetch'])
})

test('a chat whose hosted web fetch fails after the drain began still gets its answer, its chat alone charged', async () => {
  // QA: a failed page (or search) counted as no enrichment, so the chat was refused 503 as a new
  // request though it had arrived before the drain.
  const { t, org, ask, acrossDrain } = await webChatHeldAt('page', () => new Response('gone', { status: 500 }))
  const response = await acrossDrain()
  expect(response.status).toBe(200)
  expect((await json(response)).usage.server_tool_use).toMatchObject({ web_fetch_requests: 0 })
  expect(await charges(t, org.orgId)).toEqual(['chat'])
  // One that arrives now is new: refused, its pages (read before the chat's admission) not charged.
  expect((await ask()).status).toBe(503)
  expect(await charges(t, org.orgId)).toEqual(['chat'])
})
