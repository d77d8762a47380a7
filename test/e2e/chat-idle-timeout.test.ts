import { afterEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { buildTestApp, type TestApp } from '../support/harness'

// Bun closes a connection that has been idle for `idleTimeout` seconds (Elysia's listen sets 30):
// a streamed response with a long gap between chunks is reset mid-stream (Bun 1.4.5 does so within
// a few seconds past the timeout; a handler still pending on a POST is not cut today, but that
// is not a documented guarantee). Every chat request lifts the timeout of its own connection
// (issue 4: "Bun's idle timeout not cutting long generations"). Waiting seconds for Bun's timer
// is too slow for this suite, so the test records the server.timeout calls instead.

let t: TestApp | undefined
afterEach(async () => {
  await t?.app.stop(true)
  await t?.close()
  t = undefined
})

/** Listens through Elysia (as `svc serve` does, so routes get the Bun server) and records every `server.timeout` call. */
async function listen(app: TestApp) {
  app.app.listen({ port: 0, hostname: '127.0.0.1' })
  const server = app.app.server!
  const lifted: Array<{ path: string; seconds: number }> = []
  const timeout = server.timeout.bind(server)
  server.timeout = (request: Request, seconds: number) => {
    lifted.push({ path: new URL(request.url).pathname, seconds })
    return timeout(request, seconds)
  }
  const org = await app.createOrg('idle', 1_000_000_000n)
  const client = new OpenAI({ apiKey: org.adminKey, baseURL: `http://127.0.0.1:${server.port}/v1`, maxRetries: 0 })
  return { lifted, client }
}

const LIFTED = { path: '/v1/chat/completions', seconds: 0 }

describe("Bun's idle timeout and long generations", () => {
  test('every chat request, streamed or not, lifts the idle timeout of its own connection', async () => {
    t = await buildTestApp()
    const { lifted, client } = await listen(t)

    const plain = await client.chat.completions.create({ model: 'demo-anonymous', messages: [{ role: 'user', content: 'take your time' }] })
    expect(plain.choices[0]!.message.content).toBe('Hello from the demo model. You said: take your time')
    expect(lifted).toEqual([LIFTED])

    const stream = await client.chat.completions.create({ model: 'demo-anonymous', messages: [{ role: 'user', content: 'take your time' }], stream: true })
    for await (const _chunk of stream);
    expect(lifted).toEqual([LIFTED, LIFTED])
  })
})
