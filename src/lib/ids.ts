/** Time-ordered UUID v7 for domain rows: sorts by creation, indexes well. */
export function newId(): string {
  return Bun.randomUUIDv7()
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/**
 * Request id for logs and the `x-request-id` header. A well-formed id sent by a
 * proxy in front of us is kept so traces join up; anything else is replaced.
 */
export function requestIdFrom(incoming: string | null): string {
  if (incoming !== null && REQUEST_ID.test(incoming)) return incoming
  return `req_${Bun.randomUUIDv7().replaceAll('-', '')}`
}
