import { afterEach, describe, expect, test } from 'bun:test'
import { Elysia } from 'elysia'
import { authMacro } from '../../src/http/auth'
import { ApiError } from '../../src/http/errors'
import { requestContext } from '../../src/http/request-context'
import { silentLogger } from '../../src/observability/logger'
import { buildTestApp, json, type TestApp } from '../support/harness'
import { poll } from '../support/poll'

// The metering contract billed routes build on (chat, web, documents arrive in later issues):
// a billed call holds an inference slot and a ledger reservation, and ends exactly once on
// every path: success (settled), error (released) and client disconnect (released).
// A stand-in billed route exercises it over a real socket.

const ESTIMATE = 50_000_000n // 0.05 USD
const CREDIT = 10_000_000_000n
const ACTUAL = 20_000_000n

let t: TestApp
let server: ReturnType<typeof Bun.serve> | undefined
afterEach(async () => {
  server?.stop(true)
  server = undefined
  await t.close()
})

async function setup(mode: 'ok' | 'fail-before' | 'stream-forever') {
  t = await buildTestApp()
  const deps = t.deps
  const app = new Elysia({ normalize: false })
    .use(requestContext(silentLogger))
    .use(authMacro(deps.keys, deps.limits))
    .post(
      '/billed',
      async ({ principal }) => {
        const call = await deps.metering.begin({ principal, purpose: 'chat', estimate: ESTIMATE, inference: true })
        if (mode === 'fail-before') {
          call.release()
          throw new ApiError('provider_error', 'upstream refused')
        }
        let timer: ReturnType<typeof setInterval> | undefined
        const body = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode('data: first\n\n'))
            if (mode === 'ok') {
              // Settle before the final frame, then close.
              void call.settle(ACTUAL).then(() => {
                controller.enqueue(new TextEncoder().encode('data: [DONE]\n\n'))
                controller.close()
              })
            } else {
              timer = setInterval(() => controller.enqueue(new TextEncoder().encode(': ping\n\n')), 5)
            }
          },
          cancel() {
            clearInterval(timer)
            call.release() // client went away before the end: nothing charged
          },
        })
        return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
      },
      { auth: 'inference' },
    )
  server = Bun.serve({ port: 0, fetch: app.fetch })
  const org = await t.createOrg('acme', CREDIT)
  // No plan allowance, so every charge shows in the prepaid balance.
  await t.deps.database.client.execute({ sql: "UPDATE orgs SET plan_id = 'payg' WHERE id = ?", args: [org.orgId] })
  return { org, url: `http://127.0.0.1:${server.port}/billed` }
}

const prepaid = async (orgId: string) => (await t.deps.balance(orgId)).prepaidNanos

describe('a metered billed call ends exactly once on every path', () => {
  test('success: settled before the final frame, slot freed, inference bucket taken', async () => {
    const { org, url } = await setup('ok')
    const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${org.adminKey}` } })
    expect(response.status).toBe(200)
    expect(response.headers.get('x-ratelimit-limit')).toBe(String(t.deps.config.limits.inference.key.burst))
    expect(await response.text()).toBe('data: first\n\ndata: [DONE]\n\n')
    expect(await prepaid(org.orgId)).toBe(CREDIT - ACTUAL)
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
    const snapshot = t.deps.limits.snapshot({ orgId: org.orgId, keyId: org.adminKeyId })
    expect(snapshot.inference.key.remaining).toBe(t.deps.config.limits.inference.key.burst - 1)
    expect(snapshot.management.key.remaining).toBe(t.deps.config.limits.management.key.burst)
  })

  test('error before any output: released, nothing charged, slot freed', async () => {
    const { org, url } = await setup('fail-before')
    const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${org.adminKey}` } })
    expect(response.status).toBe(502)
    expect((await json(response)).error.code).toBe('provider_error')
    expect(await prepaid(org.orgId)).toBe(CREDIT)
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
  })

  test('client disconnect mid-stream: released and slot freed', async () => {
    const { org, url } = await setup('stream-forever')
    const abort = new AbortController()
    const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${org.adminKey}` }, signal: abort.signal })
    const reader = response.body!.getReader()
    await reader.read()
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(1)
    abort.abort()
    // The server notices the closed socket on its next write.
    await poll('the slot to be freed', 200, 5, () => (t.deps.limits.concurrency.inUse(org.orgId) === 0 ? true : undefined))
    expect(await prepaid(org.orgId)).toBe(CREDIT)
  })

  test('a full concurrency gate refuses with 429 rate_limited and charges nothing', async () => {
    const { org, url } = await setup('stream-forever')
    const limit = t.deps.config.limits.orgInferenceConcurrency
    const open: AbortController[] = []
    // Readers are kept referenced: a collected response body would cancel its stream.
    const readers: Array<{ read(): Promise<unknown> }> = []
    for (let index = 0; index < limit; index += 1) {
      const abort = new AbortController()
      open.push(abort)
      const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${org.adminKey}` }, signal: abort.signal })
      readers.push(response.body!.getReader())
      await readers[index]!.read()
    }
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(limit)
    const refused = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${org.adminKey}` } })
    expect(refused.status).toBe(429)
    expect((await json(refused)).error.code).toBe('rate_limited')
    expect(refused.headers.get('retry-after')).toBe('1')
    for (const abort of open) abort.abort()
    await poll('the slot to be freed', 200, 5, () => (t.deps.limits.concurrency.inUse(org.orgId) === 0 ? true : undefined))
    expect(await prepaid(org.orgId)).toBe(CREDIT)
  })

  test('an unfunded organization is refused with 429 insufficient_quota and the slot is freed', async () => {
    const { url } = await setup('ok')
    const poor = await t.createOrg('poor', 0n)
    await t.deps.database.client.execute({ sql: "UPDATE orgs SET plan_id = 'payg' WHERE id = ?", args: [poor.orgId] })
    const refused = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${poor.adminKey}` } })
    expect(refused.status).toBe(429)
    expect((await json(refused)).error.code).toBe('insufficient_quota')
    expect(t.deps.limits.concurrency.inUse(poor.orgId)).toBe(0)
  })
})
