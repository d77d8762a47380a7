import { chargeForUnits } from '../../billing/pricing'
import type { DocumentsConfig } from '../../config/config'
import { extractionApiError } from '../../documents/errors'
import { declaredText } from '../../documents/text'
import type { ExtractorPool } from '../../documents/types'
import { ApiError } from '../../http/errors'
import { abortable } from '../../lib/abortable'
import { cutText } from '../../lib/characters'
import { CallAbort } from '../../observability/lifecycle'
import type { ChatRequest, Part } from '../canonical'
import type { ChatCallInput, PipelineDeps } from '../pipeline'
import { checkPolicy } from '../policy'

/** Spec §8: inline attachments are at most 1 MiB once decoded. */
export const MAX_INLINE_ATTACHMENT_BYTES = 1024 * 1024

/** What document enrichment needs (PipelineDeps.documents). */
export interface DocumentEnrichmentDeps {
  extractor: ExtractorPool
  config: DocumentsConfig
}

type FilePart = Extract<Part, { type: 'file' }>

// A request with many attachments takes at most this many places in the shared pool at once,
// so one request cannot fill the queue and turn everyone else's uploads into 429s.
const FILES_IN_FLIGHT = 2

/**
 * `map` with at most `limit` calls pending; results in input order; the first failure rejects,
 * and no lane starts another call after it (the request is refused: more work is for nothing).
 */
async function mapLimited<T, R>(items: T[], limit: number, call: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length)
  let next = 0
  let failed = false
  const lane = async () => {
    while (next < items.length && !failed) {
      const index = next++
      try {
        results[index] = await call(items[index]!)
      } catch (error) {
        failed = true
        throw error
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane))
  return results
}

/** Whether any message carries a file part (the pipeline's cheap test before enriching). */
export function hasFileParts(request: ChatRequest): boolean {
  for (const message of request.messages) for (const part of message.parts) if (part.type === 'file') return true
  return false
}

/** A file name safe inside the delimiters: one line, no brackets or quotes, bounded. */
function displayName(part: FilePart, ordinal: number): string {
  const name = cutText((part.filename ?? '').replace(/[\u0000-\u001f\u007f"[\]<>]/g, ' ').replace(/\s+/g, ' ').trim(), 200)
  return name === '' ? `attachment ${ordinal}` : name
}

/**
 * The text part the model sees instead of the file: delimited, naming the file and its type. The
 * text's own copies of the end marker are removed, so a hostile document cannot close its section
 * early and write what reads as coming after it.
 */
function documentText(name: string, documentType: string, text: string, context: string | undefined): string {
  const end = `[End of document "${name}"]`
  const body = text === '' ? '(no extractable text: the document may be a scan or contain only images)' : withoutMarker(text, end)
  // The note is cleaned whole: a context ending in `[End of document "…"` would be completed by the note's own `]`.
  const note = context === undefined ? '' : `${withoutMarker(`[The user's context for this document: ${context}]`, end)}\n`
  return `[Document "${name}" (${documentType}), attached by the user; its extracted text follows until the end marker]\n${note}${body}\n${end}`
}

/**
 * `text` without any copy of `marker`, including copies that removing others would join up
 * (`[End of [End of …]…]`: one pass of replaceAll leaves a whole marker). One scan with the output
 * as a stack: a marker completed by the last code unit is popped at once. O(length × marker).
 */
export function withoutMarker(text: string, marker: string): string {
  if (!text.includes(marker)) return text
  const out = new Uint16Array(text.length)
  const last = marker.charCodeAt(marker.length - 1)
  let size = 0
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index)
    out[size++] = unit
    if (unit !== last || size < marker.length) continue
    let at = 0
    while (at < marker.length && out[size - marker.length + at] === marker.charCodeAt(at)) at++
    if (at === marker.length) size -= marker.length
  }
  let result = ''
  for (let start = 0; start < size; start += 8192) result += String.fromCharCode(...out.subarray(start, Math.min(size, start + 8192)))
  return result
}

/**
 * Enrichment step for documents (ARCHITECTURE.md §8 step 5), shared by every dialect: each
 * canonical `file` part (Chat Completions `file`, Responses `input_file`, Messages `document`)
 * is extracted request-locally through the pool (declared plain text, a Messages text source, is
 * read here) and replaced by a delimited text part, whatever the model's `file_input` capability;
 * neither file nor text is kept.
 *
 * Billing (decided here, stated in README): each file part is one document-parse unit, like
 * POST /api/v1/attachments/parse. All units are reserved before any extraction (funding and
 * spend cap first), released if any file fails or the enriched request no longer fits the
 * model's context. In a chat call (`input.pending`) they are settled with the chat, when it
 * produced output, so a chat refused or failed after its files were read charges nothing; otherwise (Fusion) once every
 * file is read. Errors name the file, not a dialect's JSON path, so every surface can use them.
 * `checkEnriched` is what the enriched request must pass before the units are charged (default:
 * the model's policy, its context included); a throw releases them. Fusion checks every part.
 */
export async function enrichDocuments(deps: PipelineDeps, input: ChatCallInput, checkEnriched: (request: ChatRequest) => void = checkPolicy): Promise<void> {
  const { request } = input
  const documents = deps.documents
  if (!documents) throw new ApiError('invalid_request', 'file parts are not available on this gateway')
  const files: Array<{ part: FilePart; name: string }> = []
  for (const message of request.messages) {
    for (const part of message.parts) {
      if (part.type !== 'file') continue
      const name = displayName(part, files.length + 1)
      if (part.data.byteLength > MAX_INLINE_ATTACHMENT_BYTES) {
        throw new ApiError('invalid_request', `attached file "${name}" is ${part.data.byteLength} bytes decoded; inline attachments are limited to 1 MiB (use POST /api/v1/attachments/parse for up to 4 MiB)`)
      }
      if (part.data.byteLength === 0) throw new ApiError('invalid_request', `attached file "${name}" is empty`)
      files.push({ part, name })
    }
  }

  const price = chargeForUnits(files.length, documents.config.pricePerParseNanos)
  // A caller's billing key (Fusion under an Idempotency-Key) gets its own suffix: the parse units
  // are charged once per key, apart from the chat charge that shares the caller's key.
  const billingKey = input.billingKey === undefined ? undefined : `${input.billingKey}:doc_parse`
  const call = await deps.metering.begin({ principal: input.principal, purpose: 'doc_parse', estimate: price, inference: false, requestId: input.requestId, billingKey })
  // Tracked by the drain as an upload's parse is: its deadline cuts the extraction (the drain's
  // 503, nothing charged); a job already in a worker is dropped, not waited for.
  const cut = new CallAbort(input.signal)
  deps.lifecycle.track(cut)
  const cancelled = () => new ApiError('unavailable', 'the request was cancelled while its attached files were read')
  try {
    const results = await mapLimited(files, FILES_IN_FLIGHT, ({ part, name }) =>
      // Declared plain text needs no parser: read here, with the same cap, not in the pool.
      (part.plainText === true
        ? Promise.resolve().then(() => declaredText(part.data, documents.config.maxTextBytes))
        : abortable(documents.extractor.extract({ bytes: part.data, filename: part.filename, signal: cut.signal }), cut.signal)
      ).catch(error => {
        if (cut.signal.aborted) throw cut.shutdownReason() ?? cancelled()
        throw extractionApiError(error, { subject: `attached file "${name}"`, queueSize: documents.config.queueSize, nowMs: deps.clock.now() })
      }),
    )
    const texts = new Map<FilePart, Part>()
    // A document's cache hint stays on its text: the breakpoint the client set after it.
    files.forEach(({ part, name }, index) =>
      texts.set(part, { type: 'text', text: documentText(name, results[index]!.documentType, results[index]!.text, part.context), fromDocument: true, ...(part.cache !== undefined ? { cache: part.cache } : {}) }),
    )
    for (const message of request.messages) message.parts = message.parts.map(part => (part.type === 'file' ? texts.get(part)! : part))
    // The documents now count as input: the request must still fit the model's context.
    checkEnriched(request)
    // The client left while its files were read: nothing reaches it, so nothing is charged.
    if (input.signal.aborted) throw cancelled()
  } catch (error) {
    call.release()
    throw error
  } finally {
    deps.lifecycle.untrack(cut)
  }
  // In a chat call the units are charged with the chat (nothing, if it is refused or fails before output).
  if (input.pending) input.pending.add(call, price)
  else await call.settle(price)
}
