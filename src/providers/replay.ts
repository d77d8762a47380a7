import type { ChatEvent } from '../inference/canonical'

/**
 * Events read whole before `stream()` resolved (a JSON answer), yielded as a stream's would be;
 * iteration stops when the call's signal aborts (the caller left). A collecting caller may read
 * `events` directly instead (collect.ts): no promise per event.
 */
export class ReplayedEvents implements AsyncIterable<ChatEvent> {
  constructor(
    readonly events: readonly ChatEvent[],
    readonly signal: AbortSignal,
  ) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<ChatEvent, void, undefined> {
    for (const event of this.events) {
      if (this.signal.aborted) return
      yield event
    }
  }
}

export function replay(events: readonly ChatEvent[], signal: AbortSignal): ReplayedEvents {
  return new ReplayedEvents(events, signal)
}
