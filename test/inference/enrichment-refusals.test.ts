import { afterEach, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { buildTestApp, createPlanOrg, type TestApp } from '../support/harness'
import { buildWebApp, pageServer, searxngServer, storyPage } from '../support/fake-web'

// A chat with request-local work (an attached file read, a page fetched, a search run) that is
// then refused for funds or a spend cap is charged nothing at all: no refusal is billed, and
// the client, answered 429, got nothing for the work; a refused piece leaves nothing running, and
// hosted tools the gateway cannot run are refused before any work. Through the official openai SDK.

let t: TestApp
const stops: Array<() => void> = []

afterEach(async () => {
  for (const stop of stops.splice(0)) stop()
  await t?.close()
})

/** `search`: a SearXNG that holds every query until the gateway gives up on it, or none configured. */
async function setup(credit: bigint, options: { limits?: string; search?: 'held' | 'none' } = {}) {
  const searxng = searxngServer(undefined, { hold: options.search === 'held' })
  stops.push(searxng.stop)
  let resolver
  ;({ t, resolver } = await buildWebApp({ search: options.search === 'none' ? undefined : searxng.config, limits: options.limits }))
  const pages = pageServer((_, url) => storyPage(url.pathname))
  stops.push(pages.stop)
  resolver.set('news.acme-web.com', ['127.0.0.1'])
  const { orgId, key } = await createPlanOrg(t, { name: 'refused', credit })
  const client = new OpenAI({ apiKey: key, baseURL: `${t.listen()}/v1`, maxRetries: 0 })
  const books = async () => ({
    prepaid: (await t.deps.balance(orgId)).prepaidNanos,
    entries: Number((await t.deps.database.client.execute({ sql: "select count(*) as n from ledger_entries where org_id = ? and kind = 'settle'", args: [orgId] })).rows[0]!.n),
    held: t.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n),
  })
  return { client, books, pages, searxng, site: `http://news.acme-web.com:${pages.port}` }
}

const refusedFor = async (promise: Promise<unknown>) => {
  const error = await promise.then(() => undefined, caught => caught)
  expect(error).toBeInstanceOf(OpenAI.RateLimitError)
  expect((error as { code?: string }).code).toBe('insufficient_quota')
}

test('web_fetch: the page is fetched, the chat is refused for funds, and nothing is charged', async () => {
  const fetchPrice = 2_000_000n
  // Enough for the page, not for the chat after it.
  const { client, books, pages, site } = await setup(fetchPrice + 1n)
  await refusedFor(client.chat.completions.create({ model: 'demo-web', messages: [{ role: 'user', content: `Summarize ${site}/story` }], web_fetch: true } as OpenAI.ChatCompletionCreateParamsNonStreaming))
  expect(pages.seen.map(seen => seen.path)).toEqual(['/story'])
  expect(await books()).toEqual({ prepaid: fetchPrice + 1n, entries: 0, held: 0n })
})

test('with one inference slot per organization, the page and the chat still both run and are both charged', async () => {
  const { client, books, site } = await setup(1_000_000_000n, { limits: '{ org_inference_concurrency: 1 }' })
  const completion = await client.chat.completions.create({ model: 'demo-web', messages: [{ role: 'user', content: `Summarize ${site}/story` }], web_fetch: true } as OpenAI.ChatCompletionCreateParamsNonStreaming)
  expect(completion.choices[0]!.message.content).toContain('The story at /story.')
  const after = await books()
  expect(after).toMatchObject({ entries: 2, held: 0n })
  expect(after.prepaid).toBeLessThan(1_000_000_000n - 2_000_000n)
  expect(t.deps.limits.concurrency.size).toBe(0)
})

test('with one inference slot, both hosted tools share it: the page, the search and the chat all run and are charged (QA: always 429)', async () => {
  const { client, books, site, searxng } = await setup(1_000_000_000n, { limits: '{ org_inference_concurrency: 1 }' })
  const completion = await client.chat.completions.create({ model: 'demo-web', messages: [{ role: 'user', content: `Summarize ${site}/story` }], web_fetch: true, web_search: true } as OpenAI.ChatCompletionCreateParamsNonStreaming)
  const reply = completion.choices[0]!.message.content!
  expect(reply).toContain('The story at /story.')
  expect(reply).toContain('Bun docs')
  expect(searxng.queries).toHaveLength(1)
  expect((completion.usage as { server_tool_use?: unknown }).server_tool_use).toEqual({ web_fetch_requests: 1, web_search_requests: 1 })
  const after = await books()
  // One settlement each: the page, the search and the chat.
  expect(after).toMatchObject({ entries: 3, held: 0n })
  expect(after.prepaid).toBeLessThan(1_000_000_000n - 2_000_000n - 5_000_000n)
  expect(t.deps.limits.concurrency.size).toBe(0)
})

test('one hosted piece refused for funds: its sibling search is aborted at the backend, nothing is held or charged, and the slot is free', async () => {
  // The search (0.005) is admitted first and held by the backend; then the page (0.002) finds
  // too little left. The search must not run on (querying a paid backend, holding the slot).
  const credit = 6_000_000n
  const { client, books, pages, searxng, site } = await setup(credit, { search: 'held' })
  await refusedFor(client.chat.completions.create({ model: 'demo-web', messages: [{ role: 'user', content: `Summarize ${site}/story` }], web_fetch: true, web_search: true } as OpenAI.ChatCompletionCreateParamsNonStreaming))
  // Answered only once the search ended: the slot and the holds are free already.
  expect(t.deps.limits.concurrency.size).toBe(0)
  expect(await books()).toEqual({ prepaid: credit, entries: 0, held: 0n })
  expect(pages.seen).toEqual([])
  expect(searxng.queries).toHaveLength(1)
  for (let wait = 0; wait < 50 && searxng.state.aborted === 0; wait += 1) await Bun.sleep(20)
  expect(searxng.state.aborted).toBe(1)
})

test('web_search with no search backend configured: 400 naming web_search, before any page is fetched or anything reserved', async () => {
  const { client, books, pages, site } = await setup(1_000_000_000n, { search: 'none' })
  const error = await client.chat.completions
    .create({ model: 'demo-web', messages: [{ role: 'user', content: `Summarize ${site}/story` }], web_fetch: true, web_search: true } as OpenAI.ChatCompletionCreateParamsNonStreaming)
    .then(() => undefined, caught => caught)
  expect(error).toBeInstanceOf(OpenAI.BadRequestError)
  expect(error).toMatchObject({ code: 'invalid_request', param: 'tools' })
  expect((error as Error).message).toContain('web_search')
  expect((error as Error).message).toContain('no search backend is configured on this gateway')
  expect(pages.seen).toEqual([])
  expect(await books()).toEqual({ prepaid: 1_000_000_000n, entries: 0, held: 0n })
  expect(t.deps.limits.concurrency.size).toBe(0)
})

test('web_search, streamed: refused for funds after the search ran, nothing charged', async () => {
  const { client, books } = await setup(5_000_001n)
  await refusedFor(client.chat.completions.create({ model: 'demo-web', stream: true, messages: [{ role: 'user', content: 'what is bun' }], tools: [{ type: 'web_search' }] } as unknown as OpenAI.ChatCompletionCreateParamsStreaming))
  expect(await books()).toEqual({ prepaid: 5_000_001n, entries: 0, held: 0n })
})

test('an attached file: read, the chat refused for funds, the parse unit not charged', async () => {
  t = await buildTestApp()
  const credit = t.deps.config.documents.pricePerParseNanos + 1n
  const { orgId, key } = await createPlanOrg(t, { name: 'files', credit })
  const client = new OpenAI({ apiKey: key, baseURL: `${t.listen()}/v1`, maxRetries: 0 })
  const file = { type: 'file', file: { file_data: `data:text/plain;base64,${Buffer.from('notes to read').toString('base64')}`, filename: 'notes.txt' } }
  await refusedFor(client.chat.completions.create({ model: 'demo-anonymous', messages: [{ role: 'user', content: [file] }] } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming))
  expect((await t.deps.balance(orgId)).prepaidNanos).toBe(credit)
  expect(t.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)).toBe(0n)
  expect(t.deps.limits.concurrency.size).toBe(0)
})
