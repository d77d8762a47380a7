import { afterAll, beforeAll, expect, test } from 'bun:test'
import net from 'node:net'
import { createApp } from '../../src/app'
import { startAdminServer } from '../../src/observability/admin-server'
import { buildTestApp, type TestApp } from '../support/harness'

// Bun builds request.url from the Host header. Elysia's router had taken the path to start at
// index 11 at the earliest (`https://` and three characters), so a short Host (`Host: api`, a
// container's service name) shifted it: GET /v1/models was routed as /models, and
// GET /x/v1/models as /v1/models, past any proxy rule on the prefix. A request with no Host at
// all (HTTP/1.0) reached the app with a relative URL: 500 from URL parsing, or a wrong route.
// Both found by QA over raw sockets.

let t: TestApp
let port: number
let key: string
beforeAll(async () => {
  t = await buildTestApp()
  key = (await t.createOrg()).adminKey
  port = Number(new URL(t.listen()).port)
})
afterAll(() => t.close())

/** One request over a raw socket; the status line and body of the answer. */
function send(head: string, to = port): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let received = ''
    const socket = net.connect(to, '127.0.0.1')
    socket.on('data', data => (received += data.toString('latin1')))
    socket.on('error', reject)
    socket.on('close', () => resolve({ status: Number(received.split(' ')[1]), body: received.slice(received.indexOf('\r\n\r\n') + 4) }))
    socket.write(`${head}Authorization: Bearer ${key}\r\nConnection: close\r\n\r\n`)
  })
}

test('a short Host does not move the path: each route is found by its whole path, and no other', async () => {
  for (const host of ['x', 'ab', 'api', 'api.example.com']) {
    expect((await send(`GET /v1/models HTTP/1.1\r\nHost: ${host}\r\n`)).status).toBe(200)
    expect((await send(`GET /x/v1/models HTTP/1.1\r\nHost: ${host}\r\n`)).status).toBe(404)
    expect((await send(`GET /zz/healthz HTTP/1.1\r\nHost: ${host}\r\n`)).status).toBe(404)
  }
})

test('a request without a Host header is a 400 naming it, in the route\'s envelope', async () => {
  const models = await send('GET /v1/models HTTP/1.0\r\n')
  expect(models.status).toBe(400)
  expect(JSON.parse(models.body).error).toMatchObject({ type: 'invalid_request_error', message: 'the request has no Host header' })
  const balance = await send('GET /api/v1/billing/balance HTTP/1.0\r\n')
  expect(balance.status).toBe(400)
  expect(JSON.parse(balance.body).error).toMatchObject({ code: 'invalid_request', message: 'the request has no Host header' })
})

test('the public port serves /healthz and /readyz to a probe without a Host, as the admin port does; nothing else', async () => {
  // QA: without metrics.port these are the load balancer's targets, and HAProxy's `option httpchk
  // GET /readyz` sends HTTP/1.0 with no Host: the 400 marked every instance down. Both ways of
  // serving the app: the tests' (Bun.serve with app.fetch) and main.ts's (app.listen, whose static
  // routes Bun matches itself).
  const listened = createApp(t.deps).listen({ port: 0, hostname: '127.0.0.1', reusePort: false })
  try {
    for (const served of [port, listened.server!.port!]) {
      const health = await send('GET /healthz HTTP/1.0\r\n', served)
      expect(health.status).toBe(200)
      expect(JSON.parse(health.body)).toEqual({ status: 'ok' })
      for (const head of ['GET /readyz HTTP/1.0\r\n', 'GET /readyz?probe=1 HTTP/1.0\r\n', 'GET /healthz HTTP/1.0\r\nOrigin: http://example.com\r\n']) {
        expect(`${head} ${(await send(head, served)).status}`).toBe(`${head} 200`)
      }
      expect(JSON.parse((await send('GET /readyz HTTP/1.0\r\n', served)).body)).toEqual({ status: 'ready', database: 'ok' })
      for (const head of ['GET /healthz/x HTTP/1.0\r\n', 'GET /metrics HTTP/1.0\r\n', 'GET /v1/models HTTP/1.0\r\n']) {
        const refused = await send(head, served)
        expect(`${head} ${refused.status}`).toBe(`${head} 400`)
        expect(refused.body).toContain('the request has no Host header')
      }
    }
  } finally {
    await listened.stop()
  }
})

test('a Host that makes no URL is a 400 naming it, on every surface (before: a 500 wherever the route read its URL)', async () => {
  // A Host holding `/`, `?`, `@` or `\\` reaches Bun's request as a relative URL: it was said to be missing.
  for (const host of ['api.example.com:99999', 'x.com:abc', '[zz]', 'x/v1/models?', 'evil.com@127.0.0.1', 'x\\y']) {
    for (const path of ['/v1/models', '/api/v1/models', '/.well-known/oauth-authorization-server', '/docs/', '/api/v1/api-keys?x=1']) {
      const answer = await send(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n`)
      expect(`${host} ${path} ${answer.status}`).toBe(`${host} ${path} 400`)
      expect(answer.body).toContain("the request's Host header is not a valid host name and port")
    }
    const mcp = await send(`POST /mcp HTTP/1.1\r\nHost: ${host}\r\nAccept: application/json, text/event-stream\r\nContent-Length: 0\r\n`)
    expect(mcp.status).toBe(400)
  }
})

test('the admin port serves a probe without a Host, and refuses a Host that makes no URL with 400, not 500', async () => {
  const admin = startAdminServer(t.deps, 0, '127.0.0.1')
  try {
    expect((await send('GET /healthz HTTP/1.1\r\nHost: x\r\n', admin.port)).status).toBe(200)
    // An HTTP/1.0 probe without a Host (HAProxy's default httpchk) is served: the port needs no host.
    expect((await send('GET /healthz HTTP/1.0\r\n', admin.port)).status).toBe(200)
    expect((await send('GET /nothing?x=1 HTTP/1.0\r\n', admin.port)).status).toBe(404)
    for (const head of ['GET /healthz HTTP/1.1\r\nHost: x.com:99999\r\n', 'GET /healthz HTTP/1.1\r\nHost: x/y\r\n']) {
      expect((await send(head, admin.port)).status).toBe(400)
    }
  } finally {
    admin.stop(true)
  }
})
