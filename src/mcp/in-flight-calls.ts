import type { Principal } from '../keys/principal'

/**
 * The tools/call requests this process is running, so that a `notifications/cancelled` (MCP
 * 2025-11-25, "Cancellation") stops the call it names. The hosted server is stateless: every
 * POST /mcp gets its own SDK Server, so the cancel (a separate POST; the SDK client's AbortSignal
 * sends it and keeps the original request open) reaches a Server with nothing in flight, and the
 * SDK's own per-Server bookkeeping never finds the call. This registry is the lookup across POSTs.
 *
 * A call is keyed by who made it, the session it names, and its JSON-RPC id. "Who" is the OAuth
 * grant (one approval of one client; its refreshed tokens keep it) in its organization, or the key
 * for a credential without a grant: a cancel from any other principal never matches, whatever id
 * it names. The session is the `Mcp-Session-Id` the client sends back (issued at initialize, kept
 * nowhere: see server.ts), which keeps apart hosts that share one approval and number their
 * requests alike from 1 (QA: one host's cancel stopped the other's call, which then got no
 * reply). Calls without a session that share an id are all cancelled by it. Same process only: a
 * cancel that another instance receives finds nothing and is ignored (best effort, as the spec
 * allows).
 */
export class InFlightCalls {
  private readonly calls = new Map<string, Set<AbortController>>()

  /**
   * Registers a tools/call. Its `signal` aborts when the HTTP request does (the client left) or
   * when a matching cancel arrives (`cancelled` then says so); `end` must run when the call ends.
   */
  start(principal: Principal, session: string | null, id: string | number, requestSignal: AbortSignal): InFlightCall {
    const key = keyOf(principal, session, id)
    const cancel = new AbortController()
    let entries = this.calls.get(key)
    if (entries === undefined) this.calls.set(key, (entries = new Set()))
    entries.add(cancel)
    let ended = false
    return {
      signal: AbortSignal.any([requestSignal, cancel.signal]),
      cancelled: () => cancel.signal.aborted,
      end: () => {
        if (ended) return
        ended = true
        entries.delete(cancel)
        if (entries.size === 0 && this.calls.get(key) === entries) this.calls.delete(key)
      },
    }
  }

  /** Cancels the caller's calls with this id; true when one was running. Unknown ids are ignored. */
  cancel(principal: Principal, session: string | null, id: string | number, reason: string | undefined): boolean {
    const entries = this.calls.get(keyOf(principal, session, id))
    if (entries === undefined) return false
    for (const cancel of entries) cancel.abort(new CancelledCall(reason))
    return true
  }

  /** The calls running (tests check nothing is left behind). */
  get size(): number {
    let count = 0
    for (const entries of this.calls.values()) count += entries.size
    return count
  }
}

/** One registered call. */
export interface InFlightCall {
  /** Aborts on the HTTP request's abort or on a matching cancel: the one signal the call's tools watch. */
  readonly signal: AbortSignal
  /** True once a matching notifications/cancelled arrived. */
  cancelled(): boolean
  /** Removes the call from the registry (idempotent). */
  end(): void
}

/** The abort reason of a cancelled call (the client's reason, when it gave one). */
export class CancelledCall extends Error {
  constructor(reason: string | undefined) {
    super(`the client cancelled the call${reason ? `: ${reason.slice(0, 200)}` : ''}`)
  }
}

/** JSON-RPC ids 1 and "1" are different requests: the id's JSON keeps them apart. */
function keyOf(principal: Principal, session: string | null, id: string | number): string {
  return JSON.stringify([principal.orgId, principal.grantId ?? `key:${principal.keyId}`, session, id])
}
