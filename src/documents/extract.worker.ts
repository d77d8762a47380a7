// One extraction worker (ARCHITECTURE.md §6). It receives `{ id, buffer, limits }` with the
// upload's ArrayBuffer transferred, and answers `{ id, ok, ... }`. Any exception, including a
// parser's stack overflow on a hostile file, becomes an `invalid` answer; a hang or a memory
// blow-up is the pool's to end (timeout, RSS watchdog).
import { extractDocument } from './extract'
import { lowerThreadPriority } from './lower-priority'
import { ExtractionError, type ExtractionLimits } from './types'

declare const self: Worker

lowerThreadPriority()

export interface JobMessage {
  id: number
  buffer: ArrayBuffer
  limits: ExtractionLimits
}

export type ResultMessage =
  | { id: number; ok: true; text: string; documentType: string }
  | { id: number; ok: false; reason: ExtractionError['reason']; message: string }

self.onmessage = async (event: MessageEvent<JobMessage>) => {
  const { id, buffer, limits } = event.data
  let answer: ResultMessage
  try {
    const result = await extractDocument(new Uint8Array(buffer), limits)
    answer = { id, ok: true, text: result.text, documentType: result.documentType }
  } catch (error) {
    answer = error instanceof ExtractionError
      ? { id, ok: false, reason: error.reason, message: error.message }
      : { id, ok: false, reason: 'invalid', message: 'the document could not be read (the parser failed on it)' }
  }
  self.postMessage(answer)
}
