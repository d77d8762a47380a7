/**
 * What Elysia's OpenAPI generator cannot say, added to its document once (it caches the object).
 *
 * - A streamed reply's media type. The generator writes one `application/json` content per status
 *   from the route's `response` schema and overwrites `detail.responses`, so a route that streams
 *   marks its detail with `eventStream(…)` and the event stream is added to its 200 here.
 * - The optional `X-Org-ID` header (spec §6: it must match the credential's organization). Every
 *   authenticated operation takes it; declaring it as a route `headers` schema would make Elysia
 *   build and check a headers object on every request.
 */

/** The detail key a streaming route sets (an OpenAPI extension name, removed when applied). */
const EVENT_STREAM = 'x-svc-event-stream'

/** Spread into a route's `detail`: its 200 is also `text/event-stream`, described by `description`. */
export function eventStream(description: string): Record<string, string> {
  return { [EVENT_STREAM]: description }
}

const ORG_HEADER = {
  name: 'X-Org-ID',
  in: 'header',
  required: false,
  schema: { type: 'string', format: 'uuid' },
  description: 'The organization the caller means to act for (case-insensitive). Optional: the credential already names its organization; when sent and different, 403 forbidden.',
}

type Operation = {
  security?: unknown[]
  parameters?: Array<{ name: string; in: string }>
  responses?: Record<string, { content?: Record<string, unknown> }>
  [EVENT_STREAM]?: string
}

const completed = new WeakSet<object>()

/** Adds the event streams and the X-Org-ID header to `document` in place (once per document object). */
export function completeDocument(document: { paths?: Record<string, Record<string, Operation>> }): void {
  if (completed.has(document)) return
  completed.add(document)
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item)) {
      const stream = operation[EVENT_STREAM]
      if (stream !== undefined) {
        delete operation[EVENT_STREAM]
        const ok = operation.responses?.['200']
        // A new object: a route may share one response object between statuses.
        if (ok !== undefined) operation.responses!['200'] = { ...ok, content: { ...ok.content, 'text/event-stream': { schema: { type: 'string', description: stream } } } }
      }
      if ((operation.security?.length ?? 0) > 0 && !operation.parameters?.some(parameter => parameter.in === 'header' && parameter.name.toLowerCase() === 'x-org-id')) {
        operation.parameters = [...(operation.parameters ?? []), ORG_HEADER]
      }
    }
  }
}
