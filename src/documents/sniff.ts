import { PackageParts } from './package-parts'
import { decodeText } from './text'
import { readCentralDirectory, type ZipEntry } from './zip-guard'
import { cutText } from '../lib/characters'

/** What the first bytes and the container structure say; `reject` carries the person-readable reason. */
export type Sniffed =
  | { kind: 'pdf' }
  | { kind: 'zip'; type: 'docx' | 'pptx' | 'xlsx'; entries: ZipEntry[] }
  | { kind: 'ole2' }
  | { kind: 'text' }
  | { kind: 'reject'; message: string }

// Formats people upload by mistake, named so the refusal says what the file is. These magics
// can never begin text (invalid UTF-8 or control bytes), except RTF: 7-bit text itself, but not a
// format we read, so it is refused by its magic whatever follows.
const KNOWN_BINARY: Array<[number[], string]> = [
  [[0x89, 0x50, 0x4e, 0x47], 'a PNG image'],
  [[0xff, 0xd8, 0xff], 'a JPEG image'],
  [[0x49, 0x49, 0x2a, 0x00], 'a TIFF image'],
  [[0x4d, 0x4d, 0x00, 0x2a], 'a TIFF image'],
  [[0x1f, 0x8b], 'a gzip archive'],
  [[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], 'an xz archive'],
  [[0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c], 'a 7-Zip archive'],
  [[0x7f, 0x45, 0x4c, 0x46], 'an ELF executable'],
  [[0x7b, 0x5c, 0x72, 0x74, 0x66], 'an RTF document'],
]
// Magics that are plain ASCII ("BM", "MZ", "GIF8", "Rar!"): a file that starts with one but reads
// as text is text ("BMW sales…", "MZ-2024 log"); the real formats are binary right after them.
const ASCII_MAGIC: Array<[number[], string]> = [
  [[0x47, 0x49, 0x46, 0x38], 'a GIF image'],
  [[0x42, 0x4d], 'a BMP image'],
  [[0x42, 0x5a, 0x68], 'a bzip2 archive'],
  [[0x52, 0x61, 0x72, 0x21], 'a RAR archive'],
  [[0x4d, 0x5a], 'a Windows executable'],
]

const ACCEPTED = 'accepted formats are text, PDF, DOCX, PPTX, XLSX and XLS'

function startsWith(bytes: Uint8Array, magic: number[], at = 0): boolean {
  if (bytes.byteLength < at + magic.length) return false
  for (let index = 0; index < magic.length; index++) if (bytes[at + index] !== magic[index]) return false
  return true
}

/**
 * Routes by content (ARCHITECTURE.md §6): PDF by its header, OOXML by the parts its zip holds,
 * OLE2 as a candidate XLS, known binaries refused by name, anything else tried as text.
 * Throws nothing: a zip whose directory is broken or over the limits comes back as `reject`.
 */
export function sniff(bytes: Uint8Array, zipLimits: { maxEntries: number; maxInflatedBytes: number; maxRatio: number }): Sniffed {
  if (bytes.byteLength === 0) return { kind: 'reject', message: 'the file is empty' }
  // A container's magic at the first byte wins over a PDF header found further in: an XLSX or XLS
  // may hold "%PDF-1.7" in its first KiB (a part's name or text, an embedded file).
  if (startsWith(bytes, [0x50, 0x4b, 0x03, 0x04]) || startsWith(bytes, [0x50, 0x4b, 0x05, 0x06])) return sniffZip(bytes, zipLimits)
  if (startsWith(bytes, [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1])) return { kind: 'ole2' }
  // Decoded at most once, and only when a magic made of ASCII letters needs it.
  let text: boolean | undefined
  const readsAsText = () => (text ??= decodeText(bytes).ok)
  // PDF readers accept the header anywhere in the first KiB (some files carry a preamble). Past
  // the first byte it only counts when the file is not plain text, or ends like a PDF: notes,
  // scripts and logs that mention "%PDF-1.7" are text, not damaged PDFs.
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 1024)).toString('latin1')
  const header = head.search(/%PDF-\d/)
  if (header === 0 || (header > 0 && (endsLikePdf(bytes) || !readsAsText()))) return { kind: 'pdf' }
  // "RIFF…WEBP" and "…ftyp" (ISO media) are ASCII too: a real file has binary sizes around them.
  if (startsWith(bytes, [0x52, 0x49, 0x46, 0x46]) && startsWith(bytes, [0x57, 0x45, 0x42, 0x50], 8) && !readsAsText()) return { kind: 'reject', message: `the file is a WebP image; ${ACCEPTED}` }
  if (startsWith(bytes, [0x66, 0x74, 0x79, 0x70], 4) && !readsAsText()) return { kind: 'reject', message: `the file is an image or video (ISO media); ${ACCEPTED}` }
  for (const [magic, name] of KNOWN_BINARY) {
    if (startsWith(bytes, magic)) return { kind: 'reject', message: `the file is ${name}; ${ACCEPTED}` }
  }
  for (const [magic, name] of ASCII_MAGIC) {
    if (startsWith(bytes, magic) && !readsAsText()) return { kind: 'reject', message: `the file is ${name}; ${ACCEPTED}` }
  }
  return { kind: 'text' }
}

/** Whether the last KiB holds the `startxref` pointer every complete PDF ends with. */
function endsLikePdf(bytes: Uint8Array): boolean {
  const start = Math.max(0, bytes.byteLength - 1024)
  return Buffer.from(bytes.buffer, bytes.byteOffset + start, bytes.byteLength - start).includes('startxref', 0, 'latin1')
}

function sniffZip(bytes: Uint8Array, limits: { maxEntries: number; maxInflatedBytes: number; maxRatio: number }): Sniffed {
  const directory = readCentralDirectory(bytes, limits)
  if (!directory.ok) return { kind: 'reject', message: directory.message }
  const names = new Set(directory.entries.map(entry => entry.name))
  const mimetype = directory.entries.find(entry => entry.name === 'mimetype')
  if (mimetype && [...names].some(name => name === 'content.xml')) {
    return { kind: 'reject', message: `OpenDocument files (ODT, ODS, ODP) are not supported; save the file as DOCX, XLSX or PPTX (${ACCEPTED})` }
  }
  if (names.has('[Content_Types].xml')) {
    if (names.has('word/document.xml')) return { kind: 'zip', type: 'docx', entries: directory.entries }
    if (names.has('ppt/presentation.xml')) return { kind: 'zip', type: 'pptx', entries: directory.entries }
    if (names.has('xl/workbook.xml')) return { kind: 'zip', type: 'xlsx', entries: directory.entries }
    if (names.has('xl/workbook.bin')) return { kind: 'reject', message: `binary Excel workbooks (XLSB) are not supported; save the workbook as XLSX (${ACCEPTED})` }
    // Not one of the usual names: the main part the package's relationships name. Word Online and
    // Office 365 save a document's as word/document2.xml.
    const main = new PackageParts(bytes, directory.entries, MAX_RELATIONSHIPS_BYTES).main()
    if (main !== undefined && names.has(main) && main.startsWith('word/')) {
      if (WORD_MAIN_PARTS.test(main)) return { kind: 'zip', type: 'docx', entries: directory.entries }
      return { kind: 'reject', message: `the Word document keeps its text in a part named "${cutText(main, 100)}", which is not read; open it in Word and save it again as DOCX` }
    }
    return { kind: 'reject', message: `the file is an Office Open XML package but not a Word, PowerPoint or Excel document; ${ACCEPTED}` }
  }
  return { kind: 'reject', message: `the file is a zip archive, not a document; ${ACCEPTED}` }
}

/** The main parts of a Word document that officeparser reads: its pattern is word/document[\d+]?.xml. */
const WORD_MAIN_PARTS = /^word\/document\d?\.xml$/
/** The most bytes of _rels/.rels read: a real one is well under 2 KB. */
const MAX_RELATIONSHIPS_BYTES = 64 * 1024
