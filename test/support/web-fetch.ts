import { expect } from 'bun:test'
import { pageServer, stopsAfterEach } from './fake-web'
import { json, type TestApp } from './harness'

// POST /api/v1/web/fetch as the test/web/web-fetch-{ssrf,content,billing}.test.ts suites send
// it, with the billing evidence they check.

/** One fetched page on the web test config (web_fetch "0.002" USD). */
export const PRICE = 2_000_000n
/** The prepaid balance each suite's organization starts with. */
export const CREDIT = 1_000_000_000n

/**
 * Requests and checks on the app `app()` returns (read at call time: each test builds its own);
 * page servers started with `serve` stop, and the app closes, after each test.
 */
export function webFetchTools(app: () => TestApp) {
  const stops = stopsAfterEach(app)

  function serve(handler: Parameters<typeof pageServer>[0]) {
    const server = pageServer(handler)
    stops.push(server.stop)
    return server
  }

  const spent = async (orgId: string) => CREDIT - (await app().deps.balance(orgId)).prepaidNanos
  const fetchUrls = (key: string, urls: string[]) => app().request('POST', '/api/v1/web/fetch', { key, body: { urls } })
  const page = (text: string) => new Response(`<p>${text}</p>`, { headers: { 'content-type': 'text/html' } })

  /** A 400 naming `fragment`, with nothing billed and no fetch slot held. */
  async function expectRefused(response: Response, orgId: string, fragment: string) {
    expect(response.status).toBe(400)
    const error = (await json(response)).error
    expect(error.code).toBe('invalid_request')
    expect(error.message).toContain(fragment)
    expect(await spent(orgId)).toBe(0n)
    expect(app().deps.limits.concurrency.inUse(orgId)).toBe(0)
  }

  return { serve, spent, fetchUrls, page, expectRefused }
}
