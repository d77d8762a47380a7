import { mayHoldCredential } from './credential-text'

/** Time-ordered UUID v7 for domain rows: sorts by creation, indexes well. */
export function newId(): string {
  return Bun.randomUUIDv7()
}

/**
 * A random marker (12 hex digits, 48 random bits) for fencing untrusted text in a prompt: text
 * written before it was drawn cannot contain it but by chance, so cannot forge the fence's end
 * (the hosted web block, Fusion's candidate answers). Its users scrub it from the text anyway.
 */
export function fenceMarker(): string {
  // Bun: the final 8 bytes of its UUID v7 are cryptographically random (no time, no counter).
  return Bun.randomUUIDv7('hex').slice(-12)
}

/** A UUID of any version, in either case. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * An id (organization, user, key) as typed by a caller, as it is stored: ids are UUIDs, which are
 * case-insensitive on input (RFC 9562 §4) and stored in lower case; surrounding whitespace is not
 * part of one. Every place that takes an id from outside (flags, headers, paths) reads it here.
 */
export function idFromInput(text: string): string {
  return text.trim().toLowerCase()
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/**
 * Request id for logs and the `x-request-id` header. A well-formed id sent by a
 * proxy in front of us is kept so traces join up; anything else is replaced, and so is one that
 * holds a credential (a client's mistake): the id is stored on ledger entries and sent upstream,
 * where no credential may go.
 */
export function requestIdFrom(incoming: string | null): string {
  if (incoming !== null && REQUEST_ID.test(incoming) && !mayHoldCredential(incoming)) return incoming
  return `req_${Bun.randomUUIDv7().replaceAll('-', '')}`
}
