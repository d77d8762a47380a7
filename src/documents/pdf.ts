import { getDocumentProxy } from 'unpdf'
import { formLayerGroups, mayHideForms } from './pdf-form-layers'
import { annotationShown, documentLayers, shownText, type Layers } from './pdf-layers'
import { TextCapExceeded } from './types'

/** Why a PDF is refused before pdf.js sees it, or undefined. */
export function prescanPdf(bytes: Uint8Array, limits: { maxObjects: number; maxNesting: number }): string | undefined {
  const tail = Buffer.from(bytes.buffer, bytes.byteOffset + Math.max(0, bytes.byteLength - 1024), Math.min(1024, bytes.byteLength)).toString('latin1')
  // pdf.js repairs a cut file and shows whatever it finds; a file without its end marker is
  // refused instead, so a truncated upload never silently yields partial text.
  if (!tail.includes('%%EOF')) return 'the PDF is truncated or damaged (it has no end-of-file marker)'
  let objects = 0
  let depth = 0
  let deepest = 0
  const length = bytes.byteLength
  for (let at = 0; at < length; at++) {
    const byte = bytes[at]!
    if (byte === 0x25 /* % comment */) {
      while (at < length && bytes[at] !== 0x0a && bytes[at] !== 0x0d) at++
    } else if (byte === 0x28 /* ( literal string, nested parentheses and escapes */) {
      let open = 1
      for (at++; at < length && open > 0; at++) {
        if (bytes[at] === 0x5c) at++
        else if (bytes[at] === 0x28) open++
        else if (bytes[at] === 0x29) open--
      }
      at--
    } else if (byte === 0x5b /* [ */ || (byte === 0x3c && bytes[at + 1] === 0x3c) /* << */) {
      if (byte === 0x3c) at++
      if (++depth > deepest) deepest = depth
      if (deepest > limits.maxNesting) return `the PDF nests arrays or dictionaries more than ${limits.maxNesting} levels deep`
    } else if (byte === 0x5d || (byte === 0x3e && bytes[at + 1] === 0x3e)) {
      if (byte === 0x3e) at++
      if (depth > 0) depth--
    } else if (byte === 0x6f /* o */ && bytes[at + 1] === 0x62 && bytes[at + 2] === 0x6a && isDelimiter(bytes[at - 1]) && isDelimiter(bytes[at + 3])) {
      if (++objects > limits.maxObjects) return `the PDF holds more than ${limits.maxObjects} objects`
    } else if (byte === 0x73 /* s */ && isStreamKeyword(bytes, at)) {
      // Stream bodies are binary: skip to endstream rather than reading brackets in them.
      const end = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).indexOf('endstream', at + 6, 'latin1')
      if (end < 0) return 'the PDF is truncated or damaged (a stream never ends)'
      at = end + 8
    }
  }
  return undefined
}

/**
 * A token boundary: the file's edge, white space or a delimiter (ISO 32000 §7.2.2). `>` and `]`
 * count too: iText and OpenPDF write `>>stream` for every stream, whose data must be skipped.
 */
function isDelimiter(byte: number | undefined): boolean {
  return byte === undefined || WHITE_SPACE_OR_DELIMITER.has(byte)
}

// NUL, tab, LF, FF, CR, space; ( ) < > [ ] { } / %.
const WHITE_SPACE_OR_DELIMITER = new Set([0x00, 0x09, 0x0a, 0x0c, 0x0d, 0x20, 0x28, 0x29, 0x3c, 0x3e, 0x5b, 0x5d, 0x7b, 0x7d, 0x2f, 0x25])

function isStreamKeyword(bytes: Uint8Array, at: number): boolean {
  return bytes[at + 1] === 0x74 && bytes[at + 2] === 0x72 && bytes[at + 3] === 0x65 && bytes[at + 4] === 0x61 && bytes[at + 5] === 0x6d &&
    (bytes[at + 6] === 0x0a || bytes[at + 6] === 0x0d) && isDelimiter(bytes[at - 1])
}

/** Page texts joined by a blank line; a page without a text layer (a scan) contributes nothing. */
export async function extractPdf(bytes: Uint8Array, limits: { maxPages: number; maxTextBytes: number }): Promise<string> {
  // maxImageSize 0: no image is decoded, nor wrapped in its layer, when a page's operator list is
  // read for its layers (pdf-layers.ts); text extraction never looks at images.
  // Read before pdf.js has the bytes (it may take their buffer over).
  const formGroups = formLayerGroups(bytes)
  const document = await getDocumentProxy(bytes, { verbosity: 0, stopAtErrors: false, disableFontFace: true, useSystemFonts: false, maxImageSize: 0 })
  try {
    if (document.numPages > limits.maxPages) throw new PdfRefused(`the PDF has ${document.numPages} pages, more than the ${limits.maxPages} allowed`)
    const layers = await documentLayers(document)
    const formLayers = layers !== undefined && mayHideForms(formGroups, layers)
    const pages: string[] = []
    let bytesSoFar = 0
    for (let number = 1; number <= document.numPages; number++) {
      const page = await document.getPage(number)
      const content = await page.getTextContent({ includeMarkedContent: true })
      let text = ''
      for (const item of await shownText(page, content.items, layers, formLayers)) {
        text += item.str
        if (item.hasEOL) text += '\n'
      }
      const filledIn = annotationLines(await page.getAnnotations(), layers)
      page.cleanup()
      text = text.trim()
      if (filledIn.length > 0) text = [text, ...filledIn].join('\n').trim()
      bytesSoFar += Buffer.byteLength(text) + 2
      if (bytesSoFar > limits.maxTextBytes + 2) throw new TextCapExceeded()
      if (text !== '') pages.push(text)
    }
    return pages.join('\n\n')
  } finally {
    // The proxy has no destroy(); its loading task is released with the worker job.
    await document.cleanup().catch(() => {})
  }
}

/**
 * The text a page shows outside its text layer, one line each, after the page's text: the values
 * of its filled form fields (text fields, and a choice field's chosen options as shown) and the
 * text typed onto it (FreeText annotations). pdf.js keeps both apart from getTextContent, so a
 * filled form came back as its labels alone (QA). Left out: password fields (every viewer masks
 * them), hidden ones (the Hidden and NoView flags, or a layer switched off when the PDF opens:
 * pdf-layers.ts), sticky notes (Text annotations: reviewers' comments, as a DOCX's are), and a
 * field's value shown again by another widget on the page.
 */
function annotationLines(annotations: Array<Record<string, unknown>>, layers: Layers | undefined): string[] {
  const lines: string[] = []
  const fields = new Set<string>()
  for (const annotation of annotations) {
    const flags = typeof annotation.annotationFlags === 'number' ? annotation.annotationFlags : 0
    if (annotation.hidden === true || (flags & (HIDDEN | NO_VIEW)) !== 0 || annotation.password === true || !annotationShown(layers, annotation)) continue
    let text = ''
    if (annotation.subtype === 'Widget' && (annotation.fieldType === 'Tx' || annotation.fieldType === 'Ch')) {
      const name = typeof annotation.fieldName === 'string' ? annotation.fieldName : ''
      if (name !== '' && fields.has(name)) continue
      fields.add(name)
      text = fieldText(annotation)
    } else if (annotation.subtype === 'FreeText') {
      const contents = (annotation.contentsObj as { str?: unknown } | undefined)?.str
      text = typeof contents === 'string' ? contents : ''
    }
    // Acrobat separates a multi-line value's lines with CR, LibreOffice with CRLF.
    text = text.replace(/\r\n?/g, '\n').trim()
    if (text !== '') lines.push(text)
  }
  return lines
}

// Annotation flags (PDF 32000-1 §12.5.3).
const HIDDEN = 2
const NO_VIEW = 32

/** A text field's value, or a choice field's chosen options as the form shows them (an option's display text, not its export value). */
function fieldText(annotation: Record<string, unknown>): string {
  const value = annotation.fieldValue
  const chosen = Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : typeof value === 'string' ? [value] : []
  if (annotation.fieldType !== 'Ch') return chosen.join(', ')
  const options = Array.isArray(annotation.options) ? (annotation.options as Array<{ exportValue?: unknown; displayValue?: unknown }>) : []
  return chosen.map(item => {
    const option = options.find(candidate => candidate.exportValue === item)
    return typeof option?.displayValue === 'string' ? option.displayValue : item
  }).join(', ')
}

/** A PDF refused for a reason we name ourselves (page limit). */
export class PdfRefused extends Error {}
