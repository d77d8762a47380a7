import { describe, expect, test } from 'bun:test'
import { BUN_RESULTS, buildWebApp, pageServer, searxngServer, storyPage, stopsAfterEach } from '../support/fake-web'
import { createPlanOrg, json, type TestApp } from '../support/harness'

// Fusion with the hosted web tools over HTTP (POST /api/v1/chat/fusion with web_search /
// web_fetch): each participant runs them through the chat pipeline, so each one's searches and
// pages are billed on their own, exactly like the standalone routes; the judge runs none.
// The demo model echoes its input, which shows what web context each participant received.

const FETCH_PRICE = 2_000_000n
const SEARCH_PRICE = 5_000_000n
let t: TestApp
const stops = stopsAfterEach(() => t)

const MODELS = ['demo-web-2', 'demo-web-3']
  .map(id => `
  - id: ${id}
    level: anonymous
    backends: [{ provider: demo, model: demo }]
    price: { input_per_mtok: "0.10", output_per_mtok: "0.40" }
    context_length: 32768
    max_output_tokens: 1024
    capabilities: { supports_web_fetch: true, supports_web_search: true }`)
  .join('')

async function setup(limits?: string) {
  const searxng = searxngServer(BUN_RESULTS.slice(0, 1).map(({ publishedDate, ...undated }) => undated))
  stops.push(searxng.stop)
  const built = await buildWebApp({ search: searxng.config, models: MODELS, limits })
  t = built.t
  const pages = pageServer((_, url) => storyPage(url.pathname, { title: 'Story' }))
  stops.push(pages.stop)
  built.resolver.set('news.acme-web.com', ['127.0.0.1'])
  const { orgId, key: secret } = await createPlanOrg(t, { name: 'fusion-web', planId: 'pro' })
  /** Charges of this organization, one per metered call (allowance and prepaid parts summed). */
  const charges = async (purpose: string) => {
    const rows = await t.deps.database.client.execute({
      sql: "select sum(amount_nanos) as amount from ledger_entries where org_id = ? and kind = 'settle' and purpose = ? group by op_id",
      args: [orgId, purpose],
    })
    return rows.rows.map(row => BigInt(row.amount as bigint))
  }
  const fusion = (body: Record<string, unknown>, headers: Record<string, string> = {}) => t.request('POST', '/api/v1/chat/fusion', { key: secret, body, headers })
  return { fusion, charges, pages, searches: searxng.queries, site: `http://news.acme-web.com:${pages.port}` }
}

describe('Fusion with hosted web tools', () => {
  test('web_fetch and web_search: every participant fetches and searches, each billed one unit per page and per search; the judge runs none', async () => {
    const { fusion, charges, pages, searches, site } = await setup()
    const prompt = `What does ${site}/story say?`
    const response = await fusion({ models: ['demo-web', 'demo-web-2', 'demo-web-3'], judge: 'demo-plain', messages: [{ role: 'user', content: prompt }], web_fetch: true, web_search: true })
    expect(response.status).toBe(200)
    const result = await json(response)
    expect(result.status).toBe('complete')
    for (const entry of result.models) {
      expect(entry.output).toContain('The story at /story.')
      expect(entry.output).toContain('1. Bun docs — https://bun.sh/docs')
    }
    // The judge read the answers (which quote the pages) but fetched and searched nothing itself.
    expect(pages.seen.map(seen => seen.path)).toEqual(['/story', '/story', '/story'])
    expect(searches).toEqual([prompt, prompt, prompt])
    expect(await charges('web_fetch')).toEqual([FETCH_PRICE, FETCH_PRICE, FETCH_PRICE])
    expect(await charges('web_search')).toEqual([SEARCH_PRICE, SEARCH_PRICE, SEARCH_PRICE])
    expect((await charges('fusion')).length).toBe(4)
  })

  test("org_inference_concurrency 1: each participant's fetch and search run under the run's one slot (complete, all billed, the slot freed)", async () => {
    const { fusion, charges, pages, site } = await setup('{ org_inference_concurrency: 1 }')
    const response = await fusion({ models: ['demo-web', 'demo-web-2'], judge: 'demo-plain', messages: [{ role: 'user', content: `What does ${site}/story say?` }], web_fetch: true, web_search: true })
    const result = await json(response)
    expect(result.status).toBe('complete')
    expect(pages.seen.length).toBe(2)
    expect(await charges('web_fetch')).toEqual([FETCH_PRICE, FETCH_PRICE])
    expect(await charges('web_search')).toEqual([SEARCH_PRICE, SEARCH_PRICE])
    expect((await charges('fusion')).length).toBe(3)
    expect(t.deps.limits.concurrency.size).toBe(0)
  })

  test('a participant without the capability is refused (that participant only, unbilled); the others fetch and pay for their own pages', async () => {
    const { fusion, charges, pages } = await setup()
    const site = `http://news.acme-web.com:${pages.port}`
    const result = await json(await fusion({ models: ['demo-web', 'demo-plain'], judge: 'demo-plain', messages: [{ role: 'user', content: `Read ${site}/a` }], web_fetch: true }))
    expect(result.status).toBe('partial')
    expect(result.models[1]).toMatchObject({ error_code: 'invalid_request', prompt_tokens: 0 })
    expect(result.models[1].error).toContain('does not support hosted web_fetch')
    expect(pages.seen.length).toBe(1)
    expect(await charges('web_fetch')).toEqual([FETCH_PRICE])
    expect(await charges('web_search')).toEqual([])
  })

  test("a web_fetch tool entry's limits hold on every participant (max_uses, blocked_domains); a malformed one is a 400", async () => {
    const { fusion, charges, pages, site } = await setup()
    const prompt = `Read ${site}/a and ${site}/b`
    const tool = { type: 'web_fetch', max_uses: 1 }
    const result = await json(await fusion({ models: ['demo-web', 'demo-web-2'], judge: 'demo-plain', messages: [{ role: 'user', content: prompt }], tools: [tool] }))
    expect(result.status).toBe('complete')
    for (const entry of result.models) expect(entry.output).toContain(`Not fetched: ${site}/b (the client's max_uses (1) was reached)`)
    expect(pages.seen.map(seen => seen.path)).toEqual(['/a', '/a'])
    expect(await charges('web_fetch')).toEqual([FETCH_PRICE, FETCH_PRICE])

    const blocked = await fusion({ models: ['demo-web', 'demo-web-2'], judge: 'demo-plain', messages: [{ role: 'user', content: prompt }], tools: [{ type: 'web_fetch', blocked_domains: ['acme-web.com'] }] })
    expect((await json(blocked)).models[0].output).toContain("(the client's blocked_domains exclude acme-web.com)")
    const refused = await fusion({ models: ['demo-web', 'demo-web-2'], judge: 'demo-plain', messages: [{ role: 'user', content: prompt }], tools: [{ type: 'web_fetch', allowed_domains: ['https://x.com'] }] })
    expect(refused.status).toBe(400)
    expect((await json(refused)).error.param).toBe('tools.0.allowed_domains.0')
    expect(pages.seen.length).toBe(2)
    expect(await charges('web_fetch')).toEqual([FETCH_PRICE, FETCH_PRICE])
  })

  test('with an Idempotency-Key a repeated request fetches again but pays for its pages and searches once', async () => {
    const { fusion, charges, pages, site } = await setup()
    const body = { models: ['demo-web', 'demo-web-2'], judge: 'demo-plain', messages: [{ role: 'user', content: `Read ${site}/a` }], web_fetch: true, web_search: true }
    const key = crypto.randomUUID()
    for (let attempt = 0; attempt < 2; attempt++) expect((await json(await fusion(body, { 'idempotency-key': key }))).status).toBe('complete')
    expect(pages.seen.length).toBe(4)
    expect(await charges('web_fetch')).toEqual([FETCH_PRICE, FETCH_PRICE])
    expect(await charges('web_search')).toEqual([SEARCH_PRICE, SEARCH_PRICE])
    expect((await charges('fusion')).length).toBe(3)
    // Without the key, the same request is new work, billed again.
    await fusion(body)
    expect((await charges('web_fetch')).length).toBe(4)
  })
})
