import { afterEach, expect, test } from 'bun:test'
import { createLogger } from '../../src/observability/logger'
import { buildWebApp, pageServer, storyPage } from '../support/fake-web'
import { createPlanOrg } from '../support/harness'
import { poll } from '../support/poll'

// A client that leaves a standalone web fetch or search: like a document parse or a collected
// chat, nothing reaches it, so nothing is charged and the request line says 499 `cancelled`.
// Before: the pages already retrieved were charged, and the line said 502 (the backend's
// failure, an error nobody received). The same for a chat's hosted search: before, its line said
// 503 `unavailable` and svc_refusals_total counted it, though nobody was refused anything.

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function setup(search?: string) {
  const lines: string[] = []
  const web = await buildWebApp(search ? { search } : {}, {}, { logger: createLogger('info', line => lines.push(line)) })
  cleanups.push(() => web.t.close())
  const org = await createPlanOrg(web.t, { name: 'web', keyName: 'web' })
  const logged = (msg: string, id: string) => lines.map(line => JSON.parse(line)).find(line => line.msg === msg && line.request_id === id)
  /** POSTs `body` to `path` as a client that can leave (abort its request). */
  const send = (path: string, body: unknown, id: string) => {
    const client = new AbortController()
    const answered = web.t.app.handle(new Request(`http://localhost${path}`, {
      method: 'POST', headers: { authorization: `Bearer ${org.key}`, 'content-type': 'application/json', 'x-request-id': id }, body: JSON.stringify(body), signal: client.signal,
    }))
    return { leave: () => client.abort(), answered: answered.catch(() => undefined) }
  }
  return { ...web, org, logged, send, before: (await web.t.deps.balance(org.orgId)).prepaidNanos }
}

/** The client leaves `call`: logged 499 cancelled (the request line) and 0 units (the web line), nothing charged, nothing left held. */
async function leaveAndExpectCancelled(
  web: Pick<Awaited<ReturnType<typeof setup>>, 't' | 'org' | 'logged' | 'before'>,
  call: ReturnType<Awaited<ReturnType<typeof setup>>['send']>,
  kind: 'web_fetch' | 'web_search',
  id: string,
): Promise<void> {
  const { t, org, logged, before } = web
  call.leave()
  await call.answered
  await poll('the request line', 200, 10, () => logged('request', id))
  expect(logged('request', id)).toMatchObject({ status: 499, outcome: 'cancelled' })
  expect(logged(kind, id)).toMatchObject({ outcome: 'cancelled', units: 0 })
  expect(t.deps.metrics.registry.render()).not.toContain('svc_refusals_total{')
  expect((await t.deps.balance(org.orgId)).prepaidNanos).toBe(before)
  expect(t.deps.lifecycle.inFlight).toBe(0)
  expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
}

/** A gate that holds a fake server's answer until `release()`. */
function held() {
  let release!: () => void
  const gate = new Promise<void>(resolve => (release = resolve))
  cleanups.push(() => release())
  return { gate, release }
}

test('a client that leaves a web fetch is not charged for the pages already retrieved: logged 499 cancelled', async () => {
  const slow = held()
  const site = pageServer(async (_, url) => {
    if (url.pathname === '/slow') await slow.gate
    return storyPage(url.pathname)
  })
  cleanups.push(() => site.stop())
  const { t, resolver, org, logged, send, before } = await setup()
  resolver.set('docs.example-web.com', ['127.0.0.1'])
  const base = `http://docs.example-web.com:${site.port}`
  const call = send('/api/v1/web/fetch', { urls: [`${base}/fast`, `${base}/slow`] }, 'req-left-fetch')
  await poll('both pages to be asked for', 200, 10, () => (site.seen.length === 2 ? true : undefined))
  await leaveAndExpectCancelled({ t, org, logged, before }, call, 'web_fetch', 'req-left-fetch')
})

/** A SearXNG that answers no search until the test ends; `searches()` counts those asked. */
function heldSearch() {
  const slow = held()
  let searches = 0
  const search = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch() {
      searches += 1
      await slow.gate
      return Response.json({ results: [] })
    },
  })
  cleanups.push(() => search.stop(true))
  return { config: `{ backend: searxng, base_url: "http://127.0.0.1:${search.port}" }`, searches: () => searches }
}

test('a client that leaves a web search: logged 499 cancelled, not 502, nothing charged', async () => {
  const search = heldSearch()
  const { t, org, logged, send, before } = await setup(search.config)
  const call = send('/api/v1/web/search', { query: 'bun' }, 'req-left-search')
  await poll('the search to reach its backend', 200, 10, () => (search.searches() === 1 ? true : undefined))
  await leaveAndExpectCancelled({ t, org, logged, before }, call, 'web_search', 'req-left-search')
})

test("a client that leaves during a chat's hosted web search: logged 499 cancelled, not 503, and no refusal counted", async () => {
  const search = heldSearch()
  const { t, org, logged, send, before } = await setup(search.config)
  const call = send('/v1/chat/completions', { model: 'demo-web', web_search: true, max_tokens: 20, messages: [{ role: 'user', content: 'what is bun' }] }, 'req-left-chat-search')
  await poll('the search to reach its backend', 200, 10, () => (search.searches() === 1 ? true : undefined))
  await leaveAndExpectCancelled({ t, org, logged, before }, call, 'web_search', 'req-left-chat-search')
})

test("a chat with a hosted search that completes: its request line's charge is the whole request's, the search's included", async () => {
  const search = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => Response.json({ results: [{ url: 'https://bun.sh', title: 'Bun', content: 'A runtime' }] }) })
  cleanups.push(() => search.stop(true))
  const { t, org, logged, send, before } = await setup(`{ backend: searxng, base_url: "http://127.0.0.1:${search.port}" }`)
  const response = (await send('/v1/chat/completions', { model: 'demo-web', web_search: true, max_tokens: 20, messages: [{ role: 'user', content: 'what is bun' }] }, 'req-chat-search').answered)!
  expect(response.status).toBe(200)
  await response.text()
  await poll('the request line', 200, 10, () => logged('request', 'req-chat-search'))
  const rows = await t.deps.database.client.execute({ sql: 'select purpose, amount_nanos from ledger_entries where request_id = ?', args: ['req-chat-search'] })
  expect(rows.rows.map(row => row.purpose).toSorted()).toEqual(['chat', 'web_search'])
  const booked = rows.rows.reduce((sum, row) => sum + BigInt(row.amount_nanos as bigint), 0n)
  expect(booked).toBe(before - (await t.deps.balance(org.orgId)).prepaidNanos)
  expect(BigInt(logged('request', 'req-chat-search').charged_nanos)).toBe(booked)
})
