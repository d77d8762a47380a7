import { Elysia, t } from 'elysia'
import type { Metering } from '../billing/metering'
import { chargeForUnits } from '../billing/pricing'
import type { DocumentsConfig } from '../config/config'
import { authMacro } from '../http/auth'
import { KiB, MiB } from '../http/body-limit'
import { ApiError } from '../http/errors'
import { authErrors, ErrorResponse, JsonInteger, noStore } from '../http/openapi-schemas'
import { requestIdOf } from '../http/request-context'
import { refuseEncrypted } from '../inference/encrypted'
import type { KeyService } from '../keys/service'
import { abortable } from '../lib/abortable'
import type { Clock } from '../lib/clock'
import type { Limits } from '../limits/admission'
import { CallAbort, type Lifecycle } from '../observability/lifecycle'
import { noteOutcome, recordOf } from '../observability/request-log'
import { extractionApiError } from './errors'
import type { ExtractorPool } from './types'

/** Spec §8: the upload limit of the standalone route. */
export const MAX_UPLOAD_BYTES = 4 * MiB
// Multipart framing (boundaries, part headers) around a maximal file.
const FRAMING_ALLOWANCE = 16 * KiB

export const ParsedDocument = t.Object({
  text: t.String({ description: 'Extracted text. Sheets appear as "[Sheet: name]" ("[Sheet: name (hidden)]" for a hidden one; very hidden sheets, hidden rows and hidden columns left out) then one tab-separated row per line; slides as "[Slide N]" in order; DOCX table rows one per line with cells tab-separated' }),
  token_count: JsonInteger({ minimum: 0, description: 'ceil(UTF-8 bytes of text / 4); independent of any model tokenizer' }),
  document_type: t.String({ description: 'Detected from the content, never from the file name: text, pdf, docx, pptx, xlsx or xls', examples: ['pdf'] }),
})

/** `token_count` of spec §2.6. */
export function tokenEstimate(text: string): number {
  return Math.ceil(Buffer.byteLength(text) / 4)
}

/**
 * POST /api/v1/attachments/parse (spec §4.8): one multipart `file`, capped at 4 MiB while read;
 * funding and the key's spend cap are checked (one document-parse unit reserved) before any
 * extraction; a successful parse settles that unit, a failed one (or one whose client has left,
 * or one the drain's deadline cut) releases it. Nothing is stored.
 */
export function documentRoutes(keys: KeyService, limits: Limits, deps: { metering: Metering; extractor: ExtractorPool; config: DocumentsConfig; clock: Clock; lifecycle: Lifecycle }) {
  return new Elysia({ prefix: '/api/v1/attachments', tags: ['Documents'] })
    .use(authMacro(keys, limits))
    .post(
      '/parse',
      async ({ body, principal, set, request }) => {
        refuseEncrypted(request.headers, undefined, 'POST /api/v1/attachments/parse')
        const file = body.file
        if (file.size > MAX_UPLOAD_BYTES) throw new ApiError('payload_too_large', `the file is larger than ${MAX_UPLOAD_BYTES} bytes (4 MiB)`, 'file')
        const price = chargeForUnits(1, deps.config.pricePerParseNanos)
        const requestId = requestIdOf(set)
        // Reserve first: an unfunded org or a capped key is refused before any work is done.
        const call = await deps.metering.begin({ principal, purpose: 'doc_parse', estimate: price, inference: false, requestId })
        // Tracked by the drain like a collected chat answer: its deadline cuts the parse with 503
        // and nothing charged (a job already in a worker is dropped, not waited for).
        const tracked = new CallAbort(request.signal)
        deps.lifecycle.track(tracked)
        let result
        try {
          result = await abortable(deps.extractor.extract({ bytes: new Uint8Array(await file.arrayBuffer()), filename: file.name, signal: tracked.signal }), tracked.signal)
        } catch (error) {
          call.release()
          throw unread(request, tracked) ?? extractionApiError(error, { queueSize: deps.config.queueSize, nowMs: deps.clock.now(), param: 'file' })
        } finally {
          deps.lifecycle.untrack(tracked)
        }
        const cut = unread(request, tracked)
        if (cut) {
          // The client left before its text was ready: nothing is delivered, so nothing is charged.
          call.release()
          throw cut
        }
        noteOutcome(request, 'ok', await call.settle(price))
        set.headers['cache-control'] = 'no-store'
        return { text: result.text, token_count: tokenEstimate(result.text), document_type: result.documentType }
      },
      {
        auth: { mode: 'inference', fileBody: { limit: MAX_UPLOAD_BYTES + FRAMING_ALLOWANCE, field: 'file' } },
        // Elysia's t.File gives the field `default: "File"` (its own marker, which the OpenAPI
        // document would show as a default value of the upload): none is wanted.
        body: t.Object({ file: t.File({ description: 'The document: text (UTF-8 or UTF-16), PDF, DOCX, PPTX, XLSX or XLS, at most 4 MiB', default: undefined }) }),
        response: { 200: noStore(ParsedDocument), 400: ErrorResponse, ...authErrors(ErrorResponse, { billed: true }), 413: ErrorResponse },
        detail: {
          summary: 'Extract the text of a document',
          description:
            'Multipart form data with exactly one field, `file` (other fields, a second file or a text value are 400). The format is detected ' +
            'from the content: text, PDF, DOCX, PPTX, XLSX, XLS. A scanned PDF without a text layer gives empty text. Unsupported, encrypted, ' +
            'corrupt, truncated or hostile files (zip bombs) are 400; an extraction timeout is 503; a full extractor queue is 429 with Retry-After; ' +
            'a parse still running at a shutdown\'s drain deadline is cut with 503. ' +
            'Billed as one document-parse unit on success only; funding and spend caps are checked first. Nothing is stored; the response is ' +
            '`Cache-Control: no-store`.',
        },
      },
    )
}

/**
 * Why a parse ends unread, if it does: the drain's deadline cut it (503, logged `aborted`), or
 * its client left (logged `cancelled`, so the line says 499: nobody received the error).
 */
function unread(request: Request, tracked: CallAbort): ApiError | undefined {
  const outcome = tracked.unread()
  if (outcome === undefined) return undefined
  const record = recordOf(request)
  if (record) record.outcome = outcome
  return tracked.shutdownReason() ?? new ApiError('unavailable', 'the request was cancelled before the document was read', 'file')
}
