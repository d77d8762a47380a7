import type { ChatEvent } from '../inference/canonical'

/**
 * Events read whole before `stream()` resolved (a JSON answer), yielded as a stream's would be;
 * stops when the call's signal aborts (the caller left).
 */
export async function* replay(events: readonly ChatEvent[], signal: AbortSignal): AsyncGenerator<ChatEvent, void, undefined> {
  for (const event of events) {
    if (signal.aborted) return
    yield event
  }
}
