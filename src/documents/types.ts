/** What the content turned out to be (sniffed, never taken from the file name or declared type). */
export type DocumentType = 'text' | 'pdf' | 'docx' | 'pptx' | 'xlsx' | 'xls'

/** The guards one extraction job runs under (from config; passed with every job). */
export interface ExtractionLimits {
  readonly maxTextBytes: number
  readonly zip: { readonly maxEntries: number; readonly maxInflatedBytes: number; readonly maxRatio: number }
  readonly pdf: { readonly maxPages: number; readonly maxObjects: number; readonly maxNesting: number }
}

/** Thrown inside an extraction when the document's text would pass the text cap (any format). */
export class TextCapExceeded extends Error {}

/**
 * The most XML elements one document's parts may hold. officeparser's reader keeps ~1.6 KiB per
 * element (measured: 490,000 empty paragraphs, a 29 KB upload, took 831 MB and 3.4 s; its default
 * of 2,000,000 let a 111 KB upload take 3.1 GB and 16 s). A document whose text fits the 4 MiB text
 * cap holds well under this; officeparser counts before it builds anything, so a refusal is cheap.
 * A workbook's parts are held to it too, besides their cells (zip-guard.ts).
 */
export const MAX_XML_ELEMENTS = 500_000

/** Thrown inside an extraction when a document holds more XML elements than the gateway reads (MAX_XML_ELEMENTS). */
export class ElementCapExceeded extends Error {}

/** Thrown inside an extraction when the document is refused for what its message says (→ 400). */
export class DocumentRefused extends Error {}

/** A finished extraction. */
export interface Extraction {
  text: string
  documentType: DocumentType
}

/**
 * Why an extraction failed:
 * - `invalid`: the bytes are not a document we read (unsupported, corrupt, encrypted, a
 *   tripped guard, or a worker that crashed on it or passed the memory budget reading it alone) → 400;
 * - `timeout`: the job ran past its deadline → 503;
 * - `overloaded`: its worker was killed when the jobs running together passed the memory budget,
 *   which says nothing of this document → 503 with Retry-After;
 * - `busy`: the queue is full → 429 with Retry-After;
 * - `closed`: the pool is shutting down → 503.
 */
export type ExtractionFailure = 'invalid' | 'timeout' | 'busy' | 'closed' | 'overloaded'

/** An expected extraction failure, with a message a person understands. */
export class ExtractionError extends Error {
  constructor(
    readonly reason: ExtractionFailure,
    message: string,
  ) {
    super(message)
  }
}

/** The extractor port (ARCHITECTURE.md §6): a Bun Worker pool in production, fakes in tests. */
export interface ExtractorPool {
  /** Extracts text from `bytes`. Rejects with ExtractionError for every expected failure. */
  extract(input: { bytes: Uint8Array; filename?: string; signal?: AbortSignal }): Promise<Extraction>
  stats(): { workers: number; busy: number; queued: number }
  close(): Promise<void>
}
