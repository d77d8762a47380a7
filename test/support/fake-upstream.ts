/**
 * A real HTTP upstream for provider tests (ARCHITECTURE.md §5, SECURITY-NOTES.md §4 and §6.3):
 * Bun.serve on port 0, answering each request with the next scripted response, and recording
 * what it received so tests can assert what the upstream saw (no client credential, no `user`).
 *
 * Faults it can play: JSON or plain bodies with any status, SSE split every N bytes (also inside
 * a multi-byte UTF-8 character), a stall before the headers, a stall mid-stream, a clean close
 * without the stream's terminator, and a connection reset mid-stream. Bun's default server idle
 * timeout (10 s) stays on: stalls are meant to be ended by the provider's own timeouts, which
 * tests configure small.
 */

/** One scripted answer. Requests beyond the script get a 500 that names the mistake. */
export type FakeResponse =
  | { kind: 'json'; status?: number; body: unknown; headers?: Record<string, string> }
  | { kind: 'text'; status: number; body: string; headers?: Record<string, string> }
  | {
      kind: 'sse'
      /**
       * The raw stream text, framing included (`data: …\n\n`). As a list, each promise in it
       * holds the rest of the stream back until it settles (a test-controlled gate).
       */
      body: string | Array<string | Promise<unknown>>
      /** Write the body in pieces of this many bytes (default: all at once). */
      chunkBytes?: number
      status?: number
      headers?: Record<string, string>
      /** After the body: close cleanly (default), stay open forever, or reset the connection. */
      then?: 'close' | 'stall' | 'reset'
    }
  /** Accept the request and never send the status line. */
  | { kind: 'stall' }

/** A request as the upstream saw it. */
export interface ReceivedRequest {
  readonly method: string
  readonly path: string
  /** Header names lower-cased. */
  readonly headers: Record<string, string>
  /** The raw body text. */
  readonly text: string
  /** The body parsed as JSON, or undefined when it is not JSON. */
  readonly body: any
  /** Resolves when the client went away before the response was complete (abort, timeout, reset). */
  readonly disconnected: Promise<void>
  /** Whether `disconnected` has resolved. */
  isDisconnected(): boolean
}

const encoder = new TextEncoder()

/** Resolves on the next macrotask, so that separately written chunks leave as separate writes. */
const nextTurn = () => new Promise<void>(resolve => setImmediate(resolve))

/** The scripted upstream server. Start with `FakeUpstream.start()`, stop with `close()`. */
export class FakeUpstream {
  /** Every request received, in order. */
  readonly requests: ReceivedRequest[] = []
  private readonly script: FakeResponse[] = []
  private readonly waiters: Array<{ index: number; resolve: (request: ReceivedRequest) => void }> = []
  private readonly server: ReturnType<typeof Bun.serve>

  private constructor() {
    this.server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: request => this.handle(request) })
  }

  /** A new server listening on an ephemeral port. */
  static async start(): Promise<FakeUpstream> {
    return new FakeUpstream()
  }

  /** `http://127.0.0.1:<port>`, without a trailing slash. */
  get url(): string {
    return `http://127.0.0.1:${this.server.port}`
  }

  /** Queues responses; each request takes the next one. */
  enqueue(...responses: FakeResponse[]): this {
    this.script.push(...responses)
    return this
  }

  /** The request at `index` (0-based, in order of arrival), as soon as it has arrived. */
  request(index = 0): Promise<ReceivedRequest> {
    const received = this.requests[index]
    if (received !== undefined) return Promise.resolve(received)
    return new Promise(resolve => this.waiters.push({ index, resolve }))
  }

  /** The only request received; fails when there were none or several. */
  onlyRequest(): ReceivedRequest {
    if (this.requests.length !== 1) throw new Error(`expected exactly one upstream request, got ${this.requests.length}`)
    return this.requests[0]!
  }

  async close(): Promise<void> {
    await this.server.stop(true)
  }

  private async handle(request: Request): Promise<Response> {
    const url = new URL(request.url)
    const text = await request.text()
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      body = undefined
    }
    let markDisconnected!: () => void
    let disconnected = false
    const disconnectedPromise = new Promise<void>(resolve => {
      markDisconnected = () => {
        disconnected = true
        resolve()
      }
    })
    // Bun fires the request's signal when the client goes away before the response finished.
    request.signal.addEventListener('abort', () => markDisconnected(), { once: true })
    const received: ReceivedRequest = {
      method: request.method,
      path: url.pathname,
      headers: Object.fromEntries([...request.headers].map(([name, value]) => [name.toLowerCase(), value])),
      text,
      body,
      disconnected: disconnectedPromise,
      isDisconnected: () => disconnected,
    }
    this.requests.push(received)
    for (const waiter of this.waiters.filter(waiter => waiter.index === this.requests.length - 1)) waiter.resolve(received)

    const scripted = this.script.shift()
    if (scripted === undefined) return new Response('fake upstream: no scripted response left', { status: 500 })
    switch (scripted.kind) {
      case 'json':
        return Response.json(scripted.body, { status: scripted.status ?? 200, headers: scripted.headers })
      case 'text':
        return new Response(scripted.body, { status: scripted.status, headers: scripted.headers })
      case 'stall':
        return new Promise<Response>(() => {})
      case 'sse':
        return new Response(sseBody(scripted, markDisconnected), {
          status: scripted.status ?? 200,
          headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...scripted.headers },
        })
    }
  }
}

/** The SSE body as a pull stream that writes one piece per pull, then plays the ending. */
function sseBody(scripted: Extract<FakeResponse, { kind: 'sse' }>, markDisconnected: () => void): ReadableStream<Uint8Array> {
  const segments = typeof scripted.body === 'string' ? [scripted.body] : scripted.body
  const pieces = segments.flatMap((segment): Array<Uint8Array | Promise<unknown>> => {
    if (typeof segment !== 'string') return [segment]
    const bytes = encoder.encode(segment)
    return splitEvery(bytes, scripted.chunkBytes ?? bytes.length)
  })
  let next = 0
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      while (next < pieces.length) {
        const piece = pieces[next++]!
        if (piece instanceof Uint8Array) {
          controller.enqueue(piece)
          await nextTurn()
          return
        }
        await piece
      }
      const ending = scripted.then ?? 'close'
      if (ending === 'close') controller.close()
      else if (ending === 'stall') await new Promise<void>(() => {})
      else {
        // Give the written pieces time to leave before the reset: an error on the stream makes
        // Bun drop whatever is still buffered and close the socket without the final chunk.
        await new Promise<void>(resolve => setTimeout(resolve, 20))
        controller.error(undefined)
      }
    },
    cancel() {
      markDisconnected()
    },
  })
}

/** `bytes` cut every `size` bytes (the last piece may be shorter). */
export function splitEvery(bytes: Uint8Array, size: number): Uint8Array[] {
  if (bytes.length === 0) return []
  const step = Math.max(1, Math.floor(size))
  const pieces: Uint8Array[] = []
  for (let start = 0; start < bytes.length; start += step) pieces.push(bytes.slice(start, start + step))
  return pieces
}
