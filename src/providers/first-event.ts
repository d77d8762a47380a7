import type { ChatEvent } from '../inference/canonical'

// A live stream's first event, read before a provider's stream() resolves (ARCHITECTURE.md
// §6: a backend is abandoned for the next one only when stream() rejects before the first
// event). An upstream that answered 2xx and then failed before any output (an error chunk or
// event, an empty stream, a body that is not SSE at all) rejects, so the router may try the
// next backend, and a client whose every backend failed gets an HTTP error instead of a 200
// carrying nothing but an in-band error. A failure after the first event but before any output
// is the router's to fall back from (before-output.ts).

/**
 * The events, with their first one read: rejects with the upstream's error when that first
 * event is one, or with `ended()` when there are no events at all.
 */
export async function openedAtFirstEvent(events: AsyncGenerator<ChatEvent, void, undefined>, ended: () => Error): Promise<AsyncIterable<ChatEvent>> {
  const first = await events.next()
  if (first.done === true) throw ended()
  if (first.value.type === 'error') {
    await events.return(undefined)
    throw first.value.error
  }
  return prepend(first.value, events)
}

/** Puts the peeked first event back in front, keeping `return()` wired to the upstream. */
function prepend(first: ChatEvent, rest: AsyncGenerator<ChatEvent, void, undefined>): AsyncIterable<ChatEvent> {
  let pending: ChatEvent | undefined = first
  const iterator: AsyncIterator<ChatEvent, void, undefined> = {
    next: () => {
      if (pending === undefined) return rest.next()
      const value = pending
      pending = undefined
      return Promise.resolve({ done: false, value })
    },
    return: () => {
      pending = undefined
      return rest.return(undefined)
    },
  }
  return { [Symbol.asyncIterator]: () => iterator }
}
