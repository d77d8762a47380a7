import { queuedIn } from '../http/keep-alive'

/**
 * Where a live streamed reply's frames go. Bun's server takes a direct stream: each write goes to
 * the socket as it is, with no queue, no UTF-8 copy made here and no promise per chunk, and Bun
 * calls `pull` once (bench/README.md, twenty-fourth session). A JavaScript reader (an MCP tool
 * reading a chat's reply in process) takes a default stream instead: a direct stream read by a
 * reader buffers every write, so the reader's pace would no longer hold back the upstream.
 */

/** One reply's writer, whichever stream carries it. */
export interface ReplySink {
  /** Writes one chunk; returns a promise while the reader is full: wait for it before writing more. */
  write(chunk: string | Uint8Array): Promise<void> | undefined
  /** Sends what was written now, not at the end of the event-loop turn. */
  flush(): void
  /** Written chunks the reader has not taken yet (KeepAlive's stall watch); null once closed. */
  queued(): number | null
  close(): void
  /** Drops the connection (an error with no reason: Bun resets it without logging). */
  cut(): void
}

/**
 * A reply body whose sink `run` gets on the reader's first pull. `cancel` runs when the reader
 * goes away (the client left); a write waiting on it is then released.
 */
export function replyBody(inProcess: boolean, run: (sink: ReplySink) => Promise<void>, cancel: () => Promise<void>): ReadableStream {
  return inProcess ? readerBody(run, cancel) : serverBody(run, cancel)
}

function serverBody(run: (sink: ReplySink) => Promise<void>, cancel: () => Promise<void>): ReadableStream {
  return new ReadableStream({
    type: 'direct',
    // Bun waits on what pull returns: the stream ends when it resolves, and is reset when it rejects.
    pull: (controller: ReadableStreamDirectController) => {
      const { promise, resolve, reject } = Promise.withResolvers<void>()
      run(new ServerSink(controller, reject)).then(resolve, reject)
      return promise
    },
    cancel,
  })
}

class ServerSink implements ReplySink {
  private waiting = false
  constructor(
    private readonly controller: ReadableStreamDirectController,
    private readonly reset: (reason: undefined) => void,
  ) {}

  write(chunk: string | Uint8Array): Promise<void> | undefined {
    const written = this.controller.write(chunk)
    if (!(written instanceof Promise)) return undefined
    // The socket's buffers are full: Bun holds this chunk and resolves once they drain (or the
    // client is gone).
    this.waiting = true
    return written.then(() => void (this.waiting = false))
  }

  flush(): void {
    this.controller.flush()
  }

  queued(): number {
    return this.waiting ? 1 : 0
  }

  close(): void {
    this.controller.close()
  }

  cut(): void {
    this.reset(undefined)
  }
}

const encoder = new TextEncoder()

function readerBody(run: (sink: ReplySink) => Promise<void>, cancel: () => Promise<void>): ReadableStream<Uint8Array> {
  let sink: ReaderSink
  let started = false
  return new ReadableStream<Uint8Array>({
    start: controller => void (sink = new ReaderSink(controller)),
    pull: () => {
      if (started) return sink.pulled()
      started = true
      // Its failures are the pump's own to report; the stream only carries what it writes.
      run(sink).catch(() => {})
    },
    cancel: async () => {
      const cancelled = cancel()
      sink.pulled()
      await cancelled
    },
  })
}

/** A default stream with the default strategy: one chunk queued, then a write waits for the next pull. */
class ReaderSink implements ReplySink {
  private waiter: (() => void) | undefined
  readonly queued: () => number | null
  constructor(private readonly controller: ReadableStreamDefaultController<Uint8Array>) {
    this.queued = queuedIn(controller)
  }

  write(chunk: string | Uint8Array): Promise<void> | undefined {
    this.controller.enqueue(typeof chunk === 'string' ? encoder.encode(chunk) : chunk)
    if ((this.controller.desiredSize ?? 1) > 0) return undefined
    return new Promise<void>(resolve => (this.waiter = resolve))
  }

  /** The reader wants more (or is gone): a waiting write goes on. */
  pulled(): void {
    const waiter = this.waiter
    this.waiter = undefined
    waiter?.()
  }

  flush(): void {}

  close(): void {
    this.controller.close()
  }

  cut(): void {
    this.controller.error(undefined)
    this.pulled()
  }
}
