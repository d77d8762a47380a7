// Plain text: UTF-8 (with or without BOM) and UTF-16 (with a BOM, or recognised by its zero
// bytes) are decoded strictly; every other encoding is refused with a hint, because guessing a
// legacy 8-bit code page silently turns the text into mojibake.

import { ExtractionError, type Extraction } from './types'

export type TextResult = { ok: true; text: string } | { ok: false; message: string }

const NOT_TEXT =
  'the file is not a supported document and not UTF-8 text (it may be a legacy 8-bit encoding such as Latin-1 or Windows-1252, or an unknown binary format); ' +
  'save text as UTF-8, or send a PDF, DOCX, PPTX, XLSX or XLS file'

function decode(encoding: 'utf-8' | 'utf-16le' | 'utf-16be', bytes: Uint8Array): string | undefined {
  try {
    // ignoreBOM: false strips one leading BOM of the same encoding.
    return new TextDecoder(encoding, { fatal: true }).decode(bytes)
  } catch {
    return undefined
  }
}

/** UTF-16 without a BOM: ASCII-range text has a zero byte in every other position. */
function utf16WithoutBom(bytes: Uint8Array): 'utf-16le' | 'utf-16be' | undefined {
  const sample = Math.min(bytes.byteLength, 4096) & ~1
  if (sample < 4) return undefined
  let evenZero = 0
  let oddZero = 0
  for (let index = 0; index < sample; index += 2) {
    if (bytes[index] === 0) evenZero++
    if (bytes[index + 1] === 0) oddZero++
  }
  const pairs = sample / 2
  if (oddZero > pairs * 0.6 && evenZero < pairs * 0.1) return 'utf-16le'
  if (evenZero > pairs * 0.6 && oddZero < pairs * 0.1) return 'utf-16be'
  return undefined
}

const BINARY_WINDOW = 8192
const CONTROL = /[\u0000-\u0008\u000b\u000e-\u001a\u001c-\u001f]/g

/**
 * Control characters other than tab, newline, carriage return, form feed and escape (terminal
 * logs carry ANSI colour codes) mark binary data (also used by the web fetch, for binary bytes
 * a server labels as text). One NUL is enough, but for `strayNul` (an HTML page, whose reader
 * drops NULs like other control characters): there a NUL counts as one more control character.
 * Otherwise binary means more than 2% of control characters in some stretch of BINARY_WINDOW
 * characters (in the whole text, when shorter), anywhere in the text: binary data after a page of
 * text is still binary (QA: it passed when only the first stretch was read). The regex finds the
 * control characters natively, and only those are counted, so a long clean text costs one scan.
 */
export function looksBinary(text: string, options: { strayNul?: boolean } = {}): boolean {
  if (options.strayNul !== true && text.includes('\u0000')) return true
  const window = Math.min(text.length, BINARY_WINDOW)
  const tooMany = Math.floor(window * 0.02) + 1
  // The positions of the last `tooMany` control characters, as a ring.
  const recent = new Array<number>(tooMany)
  let seen = 0
  for (const match of text.matchAll(CONTROL)) {
    recent[seen % tooMany] = match.index
    seen++
    if (seen >= tooMany && match.index - recent[seen % tooMany]! < window) return true
  }
  return false
}

/** Decodes `bytes` as text, or refuses with a reason. Line endings become `\n`. */
export function decodeText(bytes: Uint8Array): TextResult {
  let text: string | undefined
  if (bytes[0] === 0xff && bytes[1] === 0xfe && bytes[2] === 0 && bytes[3] === 0) {
    return { ok: false, message: 'UTF-32 text is not supported; save the file as UTF-8' }
  } else if (bytes[0] === 0xff && bytes[1] === 0xfe) {
    text = decode('utf-16le', bytes)
  } else if (bytes[0] === 0xfe && bytes[1] === 0xff) {
    text = decode('utf-16be', bytes)
  } else {
    const utf16 = utf16WithoutBom(bytes)
    text = decode(utf16 ?? 'utf-8', bytes)
  }
  if (text === undefined || looksBinary(text)) return { ok: false, message: NOT_TEXT }
  return { ok: true, text: text.replace(/\r\n?/g, '\n') }
}

/** Why a document's text is refused for length (every format says it alike). */
export const textTooLong = (maxTextBytes: number) => `the document's text is longer than the ${maxTextBytes}-byte limit`

/** A text document's extraction, held to the text cap (refused past it, never cut). */
export function textDocument(text: string, maxTextBytes: number): Extraction {
  if (Buffer.byteLength(text) > maxTextBytes) throw new ExtractionError('invalid', textTooLong(maxTextBytes))
  return { text, documentType: 'text' }
}

/**
 * Text that is plain text by declaration (a Messages `document` block's `text` source): its UTF-8
 * bytes are read as they are, never sniffed (a note beginning "%PDF-1.7" or "{\rtf1" is still
 * the note) nor held to the binary-data check; line endings and the cap as for an uploaded text file.
 */
export function declaredText(bytes: Uint8Array, maxTextBytes: number): Extraction {
  return textDocument(new TextDecoder().decode(bytes).replace(/\r\n?/g, '\n'), maxTextBytes)
}
