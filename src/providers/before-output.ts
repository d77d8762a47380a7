import type { ChatEvent } from '../inference/canonical'
import { UpstreamError } from './types'

// Fallback after a stream opened, before its first output (ARCHITECTURE.md §6, Backend routing).
// A provider's stream() resolves at its first event (first-event.ts), and the reply's headers and
// the encoder's start frames go out then: those are the gateway's own (its id, the client's model),
// the same whichever backend answers. What a backend sends before its first output (the response
// start, an empty block's start) is held here, so when it fails next (Anthropic's message_start
// then an `overloaded_error` event; a Chat Completions role chunk then an error chunk or a cut)
// the client has seen nothing of it and the next backend can answer instead. The client then sees
// only the answering backend's events; the meter never saw the failed one's, so nothing of it is
// charged.
//
// Cost: only streams of a backend that is not the last one to try are wrapped; the held events
// are read one by one as the reply would read them; at the first output the iterator's `next`
// becomes the answering stream's own (bound once), so every later event costs what it did before.

/** Events a backend sends before any output: nothing of the answer yet (a usage report is none either). */
export function beforeOutput(event: ChatEvent): boolean {
  return event.type === 'response-start' || event.type === 'text-start' || event.type === 'reasoning-start' || event.type === 'usage'
}

/** The error that ended a list of events before any output, if one did (a stream read whole). */
export function failureBeforeOutput(events: readonly ChatEvent[]): UpstreamError | undefined {
  for (const event of events) {
    if (beforeOutput(event)) continue
    return event.type === 'error' ? event.error : undefined
  }
  return undefined
}

/** The router's side: whether a failure moves the call on, and the next backend's events. */
export interface Fallback {
  /** Whether this failure, before any output, moves the call to the next backend. */
  fallsBack(failure: UpstreamError): boolean
  /**
   * Opens the next backends (the router's loop, from the one after the failed one): their events,
   * and whether they may still fall back. Rejects with the last one's error when none opened.
   */
  next(failure: UpstreamError): Promise<{ events: AsyncIterable<ChatEvent>; final: boolean }>
}

/** `events`, falling back through `fallback` when they fail before their first output. */
export function untilOutput(events: AsyncIterable<ChatEvent>, fallback: Fallback): AsyncIterable<ChatEvent> {
  let current = events[Symbol.asyncIterator]()
  let final = false
  let closed = false

  /** From the first output on, the answering stream's events as they come (held ones first). */
  const release = (held: ChatEvent[], step: IteratorResult<ChatEvent, void>): IteratorResult<ChatEvent, void> => {
    const direct = current.next.bind(current)
    if (held.length === 0) {
      iterator.next = direct
      return step
    }
    if (step.done !== true) held.push(step.value)
    let at = 1
    iterator.next = () => {
      if (at < held.length) return Promise.resolve({ done: false, value: held[at++]! })
      iterator.next = direct
      return direct()
    }
    return { done: false, value: held[0]! }
  }

  /** Reads up to the first output, falling back on the way; release() then replaces `iterator.next`. */
  const read = async (): Promise<IteratorResult<ChatEvent, void>> => {
    const held: ChatEvent[] = []
    for (;;) {
      let step = await current.next()
      if (step.done !== true && beforeOutput(step.value)) {
        held.push(step.value)
        continue
      }
      if (final || closed || step.done === true || step.value.type !== 'error' || !fallback.fallsBack(step.value.error)) return release(held, step)
      const failure = step.value.error
      // The failed upstream's connection is closed before the next one is opened.
      await current.return?.(undefined)
      let opened: Awaited<ReturnType<Fallback['next']>>
      try {
        opened = await fallback.next(failure)
      } catch (error) {
        // No other backend opened: the stream ends with the last one's error, as a mid-stream failure does.
        if (!(error instanceof UpstreamError)) throw error
        step = { done: false, value: { type: 'error', error } }
        return release([], step)
      }
      current = opened.events[Symbol.asyncIterator]()
      final = opened.final
      held.length = 0
      if (closed) {
        // The caller left while the next backend was opening.
        await current.return?.(undefined)
        return { done: true, value: undefined }
      }
    }
  }
  // A consumer that kept the first `next` (for await does) is forwarded to the current one.
  const first = (): Promise<IteratorResult<ChatEvent, void>> => (iterator.next === first ? read() : iterator.next())
  const iterator: AsyncIterator<ChatEvent, void, undefined> = {
    next: first,
    return: () => {
      closed = true
      return current.return?.(undefined) ?? Promise.resolve({ done: true, value: undefined })
    },
  }
  return { [Symbol.asyncIterator]: () => iterator }
}
