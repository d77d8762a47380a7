/**
 * The limit the gateway is measured against: a bare Bun reverse proxy that forwards the
 * request bytes to the upstream and streams the response bytes back. No auth, no parsing.
 * UPSTREAM is the upstream's origin. Prints `{"port": N}` once listening.
 */

const upstream = process.env.UPSTREAM!
const server = Bun.serve({
  port: Number(process.env.PORT ?? 0),
  hostname: '127.0.0.1',
  idleTimeout: 0,
  async fetch(request) {
    const url = new URL(request.url)
    const reply = await fetch(upstream + url.pathname + url.search, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      // Bun streams request bodies; the proxy must not buffer.
      duplex: 'half',
    } as RequestInit)
    return new Response(reply.body, { status: reply.status, headers: reply.headers })
  },
})
console.log(JSON.stringify({ port: server.port }))
export {}
