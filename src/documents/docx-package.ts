import { cutText } from '../lib/characters'
import { rewritePart } from './docx-rewrite'
import { namesReadOtherwise } from './docx-names'
import { shownPages, type PageKind } from './docx-sections'
import { anyHidden, readHiddenStyles, type Budget } from './docx-styles'
import { rewriteMarkers, type RewriteMarkers } from './list-labels'
import { PackageParts, resolvePartPath, rewrittenParts, type Relationship } from './package-parts'
import { scanXml } from './xml-scan'
import { DocumentRefused } from './types'
import { inflateWithinCap, localHeaderName, readCentralDirectory, readSmallEntry, replaceEntries, type ZipEntry, type ZipLimits } from './zip-guard'

// Which parts of a DOCX the rewrite (docx-rewrite.ts) reaches, and the package again with them
// rewritten: exactly the parts officeparser 8.1.1 reads text from (WordParser.js parseWord), named
// as it names them, by their local headers, in file order; the styles as Word finds them. Of those
// parts, one Word never shows (a document part other than the main one, a header or footer no
// section shows: docx-sections.ts) is left empty. What the rewrite cannot read safely is refused,
// never handed on as it came: hidden text would reach the model. A package with nothing to rewrite
// is handed on as it came, at no cost but a byte search (and a read of the main document's sections
// when it names headers or footers).

/** officeparser's patterns, unanchored as there: it reads every document, header and footer part… */
const DOCUMENT_PART = /word\/document[\d+]?.xml/
export const PAGE_PART = /word\/(?:header|footer)\d*\.xml/
const EVERY_MATCH = [DOCUMENT_PART, PAGE_PART]
/** …and the first footnotes and first endnotes part in file order. */
export const NOTES_PART = { footnote: /word\/footnotes[\d+]?.xml/, endnote: /word\/endnotes[\d+]?.xml/ }
const STYLES_PART = /word\/styles[\d+]?.xml/
/** The relationship parts officeparser gathers alternative-format chunks from, and the DOCX chunks it reads (one level deep). */
const PART_RELS = /^word\/_rels\/([^/]+)\.rels$/
const DOCX_CHUNK = /\.docx$/i
/**
 * What a part must hold for the rewrite to have anything to do (hidden styles and other prefixes
 * aside). A drawing, which may be hidden or hold a hidden shape and may be a picture with
 * alternative text (docx-drawings.ts), is found by its w:drawing, not its wp:docPr: a hidden
 * wp:anchor needs none. A VML shape, which may be hidden, is found by what holds it, w:pict (or an
 * AlternateContent): the shape's own prefix and style may be written any way, character
 * references and all.
 */
const MARKERS = ['<w:noBreakHyphen', '<w:sym', '<w:ptab', '<w:vanish', '<w:showingPlcHdr', '<w:ruby', '<w:checkBox', 'AlternateContent', '<w:del', '<w:moveFrom', '<w:cellDel', '<w:gridBefore', '<w:drawing', '<w:pict'].map(marker => Buffer.from(marker))
const BREAK = Buffer.from('<w:br')
const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d])
const NUMBERING = Buffer.from('<w:numPr')
const NUMBERING_END = Buffer.from('</w:numPr')
const INSTANCE = Buffer.from('<w:numId')

/** Whether some w:numPr may set no w:numId (it closes itself, or none stands before its end): the rewrite marks a level of its style's list. */
function numberingWithoutInstance(part: Buffer): boolean {
  for (let at = part.indexOf(NUMBERING); at >= 0; at = part.indexOf(NUMBERING, at + NUMBERING.length)) {
    const tagEnd = part.indexOf(0x3e, at)
    if (tagEnd < 0 || part[tagEnd - 1] === 0x2f) return true
    const end = part.indexOf(NUMBERING_END, tagEnd)
    const instance = part.indexOf(INSTANCE, tagEnd)
    if (end < 0 || instance < 0 || instance > end) return true
  }
  return false
}

function mayNeedRewrite(part: Buffer): boolean {
  if (MARKERS.some(marker => part.includes(marker))) return true
  // A page or column break has attributes: `<w:br` then any whitespace.
  for (let at = part.indexOf(BREAK); at >= 0; at = part.indexOf(BREAK, at + BREAK.length)) if (WHITESPACE.has(part[at + BREAK.length]!)) return true
  return numberingWithoutInstance(part) || namesReadOtherwise(part)
}

/** An entry as officeparser's unzip reads it: named by its local header. */
type Local = { entry: ZipEntry; name: string }

/** The shared accounting of one document, its embedded DOCX chunks included. */
interface Account {
  budget: Budget
  /** What the inflated size may still grow by (MAX_INFLATED less what the zip guard counted). */
  room: number
  zip: ZipLimits
  /** The names the rewrite marks paragraphs with, for the layout and list labels to find (list-labels.ts). */
  markers: RewriteMarkers
}

/**
 * The package with its document, header, footer and notes parts rewritten (rewritePart), and its
 * embedded DOCX chunks' too, or `bytes` itself when none needs it; and its parts as they are then,
 * for what is read beside officeparser (the charts the rewritten main document still shows).
 * `entries` are its zip entries, all inflated within the cap by the zip guard before, each exactly
 * its local entry (zip-layout.ts). Throws ElementCapExceeded past `maxElements` (officeparser,
 * which counts every part these are among, would refuse the document too), and DocumentRefused
 * for a part that is not well-formed or a rewrite past the inflated-size cap.
 */
export function rewriteDocx(bytes: Uint8Array, entries: ZipEntry[], limits: { maxElements: number; zip: ZipLimits }, markers: RewriteMarkers = rewriteMarkers()): { bytes: Uint8Array; parts: PackageParts } {
  const inflated = entries.reduce((sum, entry) => sum + entry.uncompressedSize, 0)
  const account: Account = { budget: { left: limits.maxElements }, room: limits.zip.maxInflatedBytes - inflated, zip: limits.zip, markers }
  const rewritten = rewritePackage(bytes, entries, account, false)
  if (account.room < 0) throw new DocumentRefused(`the DOCX document inflates to more than ${limits.zip.maxInflatedBytes} bytes once read (a zip bomb or far too large a document)`)
  if (rewritten === bytes) return { bytes, parts: new PackageParts(bytes, entries) }
  return { bytes: rewritten, parts: rewrittenParts(rewritten, limits.zip) }
}

function rewritePackage(bytes: Uint8Array, entries: ZipEntry[], account: Account, nested: boolean): Uint8Array {
  const read = (entry: ZipEntry) => {
    const data = readSmallEntry(bytes, entry, entry.uncompressedSize)
    return data && Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  }
  // One entry per local header, in file order, named by it: what officeparser's unzip reads.
  const seen = new Set<number>()
  const ordered: Local[] = []
  for (const entry of [...entries].sort((a, b) => a.localHeaderOffset - b.localHeaderOffset)) {
    const name = seen.has(entry.localHeaderOffset) ? undefined : localHeaderName(bytes, entry)
    seen.add(entry.localHeaderOffset)
    if (name !== undefined) ordered.push({ entry, name })
  }
  const word = wordParts(bytes, entries, account.budget)
  const stylesEntry = (word.styles === undefined ? undefined : entries.find(entry => entry.name === word.styles)) ?? ordered.find(({ name }) => STYLES_PART.test(name))?.entry
  const stylesData = stylesEntry && read(stylesEntry)
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true })
  const styles = readHiddenStyles(stylesData && (stylesData.includes('<w:vanish') || namesReadOtherwise(stylesData)) ? decoder.decode(stylesData) : undefined, account.budget)
  const everyPart = anyHidden(styles)

  const parts = ordered.filter(({ name }) => EVERY_MATCH.some(pattern => pattern.test(name)))
  for (const pattern of Object.values(NOTES_PART)) {
    const first = ordered.find(({ name }) => pattern.test(name))
    if (first) parts.push(first)
  }
  const replaced = new Map<ZipEntry, Uint8Array>()
  for (const { entry, name } of parts) {
    if (!word.shows(name)) {
      replaced.set(entry, NOTHING_SHOWN)
      continue
    }
    const data = read(entry)
    if (data === undefined || (!everyPart && !mayNeedRewrite(data))) continue
    // Invalid UTF-8 is read as officeparser reads it (Buffer#toString): each bad sequence a U+FFFD.
    const result = rewritePart(decoder.decode(data), styles, account.budget, account.markers)
    if (result === 'malformed') throw new DocumentRefused(`the DOCX file is damaged: its part "${cutText(name, 100)}" is not well-formed XML`)
    if (result === undefined) continue
    const encoded = encode(result.pieces)
    account.room -= encoded.byteLength - data.byteLength
    replaced.set(entry, encoded)
  }
  if (!nested) {
    for (const { entry } of docxChunks(ordered, read)) {
      const data = read(entry)
      if (data === undefined) continue
      const chunk = rewriteChunk(data, account)
      if (chunk === data) continue
      account.room -= chunk.byteLength - data.byteLength
      replaced.set(entry, chunk)
    }
  }
  // A chunk's parts are deflated: the chunk's own bytes count against the inflated size as well as its parts.
  return replaced.size === 0 ? bytes : replaceEntries(bytes, entries, replaced, { deflate: nested })
}

/** A part officeparser reads that Word does not show: an empty root, which officeparser reads nothing of. */
const NOTHING_SHOWN = new TextEncoder().encode('<empty/>')

/**
 * What Word reads, from the package's relationships: the styles part the main document names, and
 * whether a part officeparser reads by its name is one Word shows: the main document itself, and
 * the headers and footers its sections show (docx-sections.ts): not another document part, nor a
 * header or footer nothing names, nor one named only where Word does not show it (a first-page
 * header without w:titlePg, an even-page one without w:evenAndOddHeaders, one a relationship names
 * but no section). Everything shows when the package names no main document (Word would not open it).
 */
function wordParts(bytes: Uint8Array, entries: ZipEntry[], budget: Budget): { styles?: string; shows: (name: string) => boolean } {
  const parts = new PackageParts(bytes, entries)
  const main = parts.main()
  if (main === undefined) return { shows: () => true }
  const byId = parts.relationships(main)
  const named = [...(byId?.values() ?? [])]
  const pages = named.some(({ type }) => type.endsWith('/header') || type.endsWith('/footer')) ? readPages(parts, main, byId!, budget) : new Set<string>()
  return {
    styles: named.find(({ type }) => type.endsWith('/styles'))?.path,
    shows: name => name === main || (!DOCUMENT_PART.test(name) && (!PAGE_PART.test(name) || pages.has(name))),
  }
}

/**
 * The header and footer parts the main document's sections show: none when it cannot be read or is
 * not well-formed (it is refused then, by the rewrite or by officeparser). Its elements are read
 * again by the rewrite and by officeparser, which count them: here they count against a copy of
 * what is left of the budget, so a main document past the cap is refused before it is read twice.
 */
function readPages(parts: PackageParts, main: string, byId: Map<string, Relationship>, budget: Budget): Set<string> {
  const xml = parts.text(main)
  if (xml === undefined) return new Set()
  const settings = [...byId.values()].find(({ type }) => type.endsWith('/settings'))?.path
  const pageOf = (kind: PageKind, id: string) => {
    const named = byId.get(id)
    return named?.type.endsWith(`/${kind}`) ? named.path : undefined
  }
  return shownPages(xml, settings === undefined ? undefined : parts.text(settings), pageOf, { left: budget.left }) ?? new Set()
}

/** The DOCX parts officeparser may read as alternative-format chunks: those an aFChunk relationship of a word/ part names. */
function docxChunks(ordered: Local[], read: (entry: ZipEntry) => Buffer | undefined): Local[] {
  const targets = new Set<string>()
  for (const { name, entry } of ordered) {
    if (!PART_RELS.test(name)) continue
    const data = read(entry)
    if (data === undefined) continue
    // Not well-formed or not, every relationship it names is looked at: more rewritten is no harm.
    scanXml(data.toString(), (element, { Id: id, Type: type, Target: target, TargetMode: mode }) => {
      if (element === 'Relationship' && id && target && type?.endsWith('/aFChunk') && mode !== 'External') targets.add(resolvePartPath('word/', target))
    })
  }
  return targets.size === 0 ? [] : ordered.filter(({ name }) => targets.has(name) && DOCX_CHUNK.test(name))
}

const LEFT_OUT = new Uint8Array(0)

/**
 * An embedded DOCX rewritten as the document is (its own chunks officeparser does not read), or
 * left out (empty: officeparser then skips the chunk) when the zip guard refuses it.
 */
function rewriteChunk(data: Buffer, account: Account): Uint8Array {
  const directory = readCentralDirectory(data, account.zip)
  if (!directory.ok) return LEFT_OUT
  const inflated = inflateWithinCap(data, directory.entries, account.zip, false)
  if (!inflated.ok) return LEFT_OUT
  return rewritePackage(data, directory.entries, account, true)
}

/** The UTF-8 of `pieces` in one buffer, without joining them first. */
function encode(pieces: string[]): Uint8Array {
  let size = 0
  for (const piece of pieces) size += Buffer.byteLength(piece)
  const out = Buffer.allocUnsafe(size)
  let at = 0
  for (const piece of pieces) at += out.write(piece, at)
  return out
}
