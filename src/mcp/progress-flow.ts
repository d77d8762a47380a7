import { keepAlive, type KeepAliveStream, MAX_UNREAD_FRAMES, queuedIn } from '../http/keep-alive'
import { SSE_PING } from '../http/sse'

/**
 * The pace of one tools/call answered as SSE (a client that sent a progressToken). The SDK's SSE
 * stream takes every notification it is given (no backpressure): a tool that reported each delta
 * of a fast upstream to a client that stopped reading read the whole upstream into that queue
 * (hundreds of MB), and was charged for output no one could read. Here the SDK's response is
 * read through a pull stream, one SDK chunk (one message: the SDK's own keep-alive comments are
 * turned off, see McpService.handle) per client read, and the notifications sent but not yet read
 * are counted; a tool awaits `ready()` while more than MAX_UNREAD_FRAMES are. A client that
 * stops reading is cut as every stream is, and a quiet one is pinged as every stream is
 * (http/keep-alive.ts).
 */
export class ProgressFlow {
  private sent = 0
  private passed = 0
  private gone = false
  /** Every call of the POST waiting for the client (a batch may hold several tools/call). */
  private waiters: Array<(present: boolean) => void> = []

  /** One notification was handed to the SDK. */
  notified(): void {
    this.sent += 1
  }

  /** Undefined while the client keeps up; else resolves once it has read enough (true), or has gone (false). */
  ready(): Promise<boolean> | undefined {
    if (this.gone) return Promise.resolve(false)
    if (this.sent - this.passed <= MAX_UNREAD_FRAMES) return undefined
    return new Promise(resolve => this.waiters.push(resolve))
  }

  /**
   * The SDK's SSE response, read at the client's pace. `ended` runs once: when its last reply is
   * passed on (`left` false), or when the client left or was cut first (`left` true).
   */
  wrap(response: Response, ended: (left: boolean) => void = () => {}): Response {
    const source = response.body
    if (source === null) {
      ended(false)
      return response
    }
    const reader = source.getReader()
    let watched: KeepAliveStream | undefined
    let over = false
    const finish = (left: boolean) => {
      if (over) return
      over = true
      ended(left)
    }
    const leave = () => {
      if (watched !== undefined) keepAlive.stop(watched)
      this.gone = true
      this.wake(false)
      reader.cancel().catch(() => {})
      finish(true)
    }
    const body = new ReadableStream<Uint8Array>({
      start: controller => {
        // A quiet call (a model thinking, a slow upstream) gets the SSE comment every other
        // stream gets, so a proxy's read timeout does not cut it; MCP clients skip comments.
        const ping = () => {
          controller.enqueue(SSE_PING)
          watched!.enqueued += 1
        }
        watched = keepAlive.watch(ping, {
          queued: queuedIn(controller),
          cut: () => {
            controller.error(undefined)
            leave()
          },
        })
      },
      pull: async controller => {
        let read: Awaited<ReturnType<typeof reader.read>>
        try {
          read = await reader.read()
        } catch (error) {
          // The SDK's stream failed: the response ends here, as if the client had left.
          leave()
          throw error
        }
        const { done, value } = read
        if (done) {
          keepAlive.stop(watched!)
          controller.close()
          return finish(false)
        }
        controller.enqueue(value)
        watched!.wrote = true
        watched!.enqueued += 1
        this.passed += 1
        if (this.sent - this.passed <= MAX_UNREAD_FRAMES) this.wake(true)
      },
      cancel: leave,
    })
    return new Response(body, { status: response.status, headers: response.headers })
  }

  /** Wakes every waiting call (one woken while the client is still behind waits again: its loop asks `ready()` anew). */
  private wake(present: boolean): void {
    const waiters = this.waiters
    this.waiters = []
    for (const waiter of waiters) waiter(present)
  }
}
