import { crc32, deflateRawSync, inflateRawSync } from 'node:zlib'
import { cutText } from '../lib/characters'
import { columnSpan, MAX_COLUMN_SPANS, tooManyColumns, xmlColumnSpans } from './column-spans'
import { MAX_XML_ELEMENTS } from './types'
import { checkLayout, zip64Differs, ZIP64 } from './zip-layout'

// The zip bomb defence (SECURITY-NOTES §5): read the central directory before any parser runs
// (entry count, declared sizes, compression ratio), then inflate every entry under a running
// byte cap that ignores the declared sizes, because headers can lie. Parsers bundle their own
// unzip code, so this runs on the buffer before they ever see it; and as they do not all read the
// directory, its entries must be exactly the local ones (zip-layout.ts).

/** One central-directory record. */
export interface ZipEntry {
  name: string
  method: number
  flags: number
  crc: number
  compressedSize: number
  uncompressedSize: number
  localHeaderOffset: number
}

export interface ZipLimits {
  maxEntries: number
  maxInflatedBytes: number
  maxRatio: number
}

type Result<T> = { ok: true } & T | { ok: false; message: string }

const EOCD = 0x06054b50
const CENTRAL = 0x02014b50
const LOCAL = 0x04034b50
const EOCD_SIGNATURE = Buffer.from([0x50, 0x4b, 0x05, 0x06])
const DIRECTORY_MISMATCH = "the file is a damaged zip container (its end record's entry counts and size do not match its central directory)"
// Small entries compress absurdly well (an empty styles part) and cost nothing: the ratio
// check starts at this declared size.
const RATIO_FLOOR = 1024 * 1024

/**
 * The most spreadsheet cells a workbook's sheets may hold. SheetJS keeps ~250 bytes per cell it
 * reads (500,000 one-digit cells: ~125 MB), and the cells of a small upload can be many (a
 * 255 KB file held 1.1 million), so the count is made here, on the inflated parts, before the
 * parser runs. Every part of a workbook is counted: SheetJS reads as a sheet whatever part the
 * workbook's content types and relationships name, under any path (an anchored pattern once let
 * renamed sheets past the count).
 */
export const MAX_SHEET_CELLS = 500_000
export const tooManyCells = `the workbook holds more than ${MAX_SHEET_CELLS.toLocaleString('en')} cells; split it into smaller workbooks`
export const tooManyElements = `the workbook holds more than ${MAX_XML_ELEMENTS.toLocaleString('en')} XML elements besides its cells (shared strings, styles and the like); split it into smaller workbooks`
// An element's start tag and its local name, with or without a namespace prefix: <c r="A1">, <c/>,
// <x:c>; any prefix SheetJS takes (its /<(?:\w+:)?c[ \/>]/ allows one that starts with a digit,
// <1:c>, which XML does not). End tags, comments and processing instructions do not match.
const START_TAG = /<(?:[\w.-]+:)?([\w.-]+)/g
// A sheet's rows, and a cell's value, formula and inline string: the cell cap bounds them.
const CELL_PARTS = new Set(['row', 'v', 'f', 'is'])

/**
 * What SheetJS keeps of a workbook's part: an object per cell, per column its column records span
 * (column-spans.ts), and per other element an object or a string: a shared string took ~480 bytes
 * (QA: 3 million <si> in a 3.2 MB upload, one cell, took 1.46 GB and 6 s), so the elements besides
 * the cells' own are held to MAX_XML_ELEMENTS, as a DOCX's and a PPTX's are.
 */
interface Kept {
  cells: number
  columns: number
  elements: number
}

/** Counts cell elements, other elements and the columns <col> elements span in a workbook's part, stopping once a budget is passed. */
function countCells(xml: Uint8Array, budget: Kept): Kept {
  const text = Buffer.from(xml.buffer, xml.byteOffset, xml.byteLength).toString('latin1')
  START_TAG.lastIndex = 0
  let cells = 0
  let elements = 0
  for (let tag = START_TAG.exec(text); tag !== null; tag = START_TAG.exec(text)) {
    const name = tag[1]!
    if (name === 'c') {
      if (++cells > budget.cells) break
    } else if (!CELL_PARTS.has(name) && ++elements > budget.elements) break
  }
  return { cells, elements, columns: xmlColumnSpans(text, budget.columns) }
}

/**
 * Counts cell records, and the columns BrtColInfo records span, in a binary (BIFF12, XLSB) part,
 * stopping once a budget is passed. A record is a type and a size, each a little-endian base-128
 * varint (the type 1–2 bytes, the size up to 4), then its data; types 1–18 are the cell records
 * (BrtCellBlank … BrtShortIsst). A part that is not BIFF12 (a VBA project, printer settings) reads
 * as a few records of random sizes and ends.
 */
function countBinaryCells(bin: Uint8Array, budget: Kept): Kept {
  const view = new DataView(bin.buffer, bin.byteOffset, bin.byteLength)
  const count = { cells: 0, columns: 0, elements: 0 }
  let at = 0
  while (at < bin.length) {
    let type = bin[at++]!
    if (type & 0x80) {
      if (at >= bin.length) break
      type = (type & 0x7f) | ((bin[at++]! & 0x7f) << 7)
    }
    let size = 0
    for (let shift = 0; shift < 28; shift += 7) {
      if (at >= bin.length) return count
      const byte = bin[at++]!
      size += (byte & 0x7f) * 2 ** shift
      if (!(byte & 0x80)) break
    }
    if (type >= 1 && type <= 18 && ++count.cells > budget.cells) return count
    if (type === BRT_SST_ITEM && ++count.elements > budget.elements) return count
    // BrtColInfo: its first and last columns, 4 bytes each (SheetJS reads them unsigned).
    if (type === BRT_COL_INFO && size >= 8 && at + 8 <= bin.length) {
      count.columns += columnSpan(view.getUint32(at, true), view.getUint32(at + 4, true))
      if (count.columns > budget.columns) return count
    }
    at += size
  }
  return count
}

const BRT_COL_INFO = 0x3c
const BRT_SST_ITEM = 0x13

/** Reads and checks the central directory. Nothing is inflated here. */
export function readCentralDirectory(bytes: Uint8Array, limits: ZipLimits): Result<{ entries: ZipEntry[] }> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  // The end record sits in the last 22 + 65535 (comment) bytes.
  let eocd = -1
  for (let at = bytes.byteLength - 22; at >= Math.max(0, bytes.byteLength - 22 - 65535); at--) {
    if (view.getUint32(at, true) === EOCD) {
      eocd = at
      break
    }
  }
  if (eocd < 0) return { ok: false, message: 'the file is a damaged or truncated zip container (no central directory)' }
  const count = view.getUint16(eocd + 10, true)
  const size = view.getUint32(eocd + 12, true)
  const offset = view.getUint32(eocd + 16, true)
  if (count === 0xffff || offset === 0xffffffff) return { ok: false, message: ZIP64 }
  if (count > limits.maxEntries) return { ok: false, message: `the zip container holds ${count} entries, more than the ${limits.maxEntries} allowed` }
  if (offset + size > eocd) return { ok: false, message: 'the file is a damaged or truncated zip container (central directory out of bounds)' }
  // SheetJS finds the end record searching back from the file's last 4 bytes, and reads as many
  // directory records as its count of entries on this disk (offset 8) says: records past the
  // total (offset 10), or another end record in the comment, would list entries never checked here.
  if (Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).lastIndexOf(EOCD_SIGNATURE) !== eocd) return { ok: false, message: 'the zip container holds a second end record in its comment (a malformed or hostile file)' }
  if (view.getUint16(eocd + 8, true) !== count || offset + size !== eocd) return { ok: false, message: DIRECTORY_MISMATCH }

  const entries: ZipEntry[] = []
  const records: number[] = []
  let declaredTotal = 0
  let at = offset
  for (let index = 0; index < count; index++) {
    if (at + 46 > eocd || view.getUint32(at, true) !== CENTRAL) return { ok: false, message: 'the file is a damaged zip container (bad central directory record)' }
    const nameLength = view.getUint16(at + 28, true)
    records.push(at)
    const entry: ZipEntry = {
      flags: view.getUint16(at + 8, true),
      method: view.getUint16(at + 10, true),
      crc: view.getUint32(at + 16, true),
      compressedSize: view.getUint32(at + 20, true),
      uncompressedSize: view.getUint32(at + 24, true),
      localHeaderOffset: view.getUint32(at + 42, true),
      name: Buffer.from(bytes.buffer, bytes.byteOffset + at + 46, Math.min(nameLength, Math.max(0, eocd - at - 46))).toString('utf8'),
    }
    if (zip64Differs(view, at + 46 + nameLength, view.getUint16(at + 30, true), entry)) return { ok: false, message: ZIP64 }
    at += 46 + nameLength + view.getUint16(at + 30, true) + view.getUint16(at + 32, true)
    if (entry.flags & 1) return { ok: false, message: 'the zip container is encrypted (password protected)' }
    if (entry.method !== 0 && entry.method !== 8) return { ok: false, message: `the zip container uses compression method ${entry.method}; only stored and deflate are read` }
    declaredTotal += entry.uncompressedSize
    if (declaredTotal > limits.maxInflatedBytes) {
      return { ok: false, message: `the zip container declares more than ${limits.maxInflatedBytes} bytes once inflated (a zip bomb or far too large a document)` }
    }
    if (entry.uncompressedSize > RATIO_FLOOR && entry.uncompressedSize > limits.maxRatio * Math.max(1, entry.compressedSize)) {
      return { ok: false, message: `zip entry "${cutText(entry.name, 100)}" has a compression ratio over ${limits.maxRatio}:1 (a zip bomb)` }
    }
    entries.push(entry)
  }
  if (at !== eocd) return { ok: false, message: DIRECTORY_MISMATCH }
  const layout = checkLayout(bytes, entries, records, offset)
  if (layout !== undefined) return { ok: false, message: layout }
  return { ok: true, entries }
}

/** An entry's stored (compressed) bytes, or why they cannot be found. */
function storedData(bytes: Uint8Array, view: DataView, entry: ZipEntry): Uint8Array | string {
  const at = entry.localHeaderOffset
  if (at + 30 > bytes.byteLength || view.getUint32(at, true) !== LOCAL) return 'the file is a damaged or truncated zip container (bad local header)'
  const start = at + 30 + view.getUint16(at + 26, true) + view.getUint16(at + 28, true)
  const end = start + entry.compressedSize
  if (end > bytes.byteLength) return 'the file is a truncated zip container'
  return bytes.subarray(start, end)
}

/**
 * One small entry's bytes (the sniffer reads the package's relationships before the guard has
 * inflated anything), or undefined when it cannot be read or holds more than `maxBytes`: inflating
 * stops there, whatever its header says.
 */
export function readSmallEntry(bytes: Uint8Array, entry: ZipEntry, maxBytes: number): Uint8Array | undefined {
  const data = storedData(bytes, new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), entry)
  if (typeof data === 'string') return undefined
  if (entry.method === 0) return data.byteLength <= maxBytes ? data : undefined
  try {
    return inflateRawSync(data, { maxOutputLength: maxBytes })
  } catch {
    return undefined
  }
}

/**
 * Inflates every entry under one running cap that does not trust the declared sizes, and
 * requires each entry to inflate to exactly the size its header declares (a lying header is
 * refused even when it stays under the cap), and counts a `workbook`'s cells (MAX_SHEET_CELLS),
 * its other elements (MAX_XML_ELEMENTS) and the columns its column records span (MAX_COLUMN_SPANS).
 * Returns the inflated total.
 */
export function inflateWithinCap(bytes: Uint8Array, entries: ZipEntry[], limits: ZipLimits, workbook: boolean): Result<{ inflated: number }> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let total = 0
  const kept: Kept = { cells: 0, columns: 0, elements: 0 }
  for (const entry of entries) {
    const data = storedData(bytes, view, entry)
    if (typeof data === 'string') return { ok: false, message: data }
    let inflated: Uint8Array
    if (entry.method === 0) {
      inflated = data
    } else {
      const remaining = limits.maxInflatedBytes - total
      try {
        // maxOutputLength stops zlib as soon as the output passes the cap: the bomb is never materialised.
        inflated = inflateRawSync(data, { maxOutputLength: Math.max(1, remaining) })
      } catch (error) {
        if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
          return { ok: false, message: `the zip container inflates to more than ${limits.maxInflatedBytes} bytes (a zip bomb or far too large a document)` }
        }
        return { ok: false, message: `zip entry "${cutText(entry.name, 100)}" is corrupt or truncated` }
      }
    }
    const size = inflated.byteLength
    total += size
    if (total > limits.maxInflatedBytes) return { ok: false, message: `the zip container inflates to more than ${limits.maxInflatedBytes} bytes (a zip bomb or far too large a document)` }
    if (size !== entry.uncompressedSize) {
      return { ok: false, message: `zip entry "${cutText(entry.name, 100)}" inflates to ${size} bytes but its header declares ${entry.uncompressedSize} (a malformed or hostile file)` }
    }
    if (workbook) {
      // SheetJS parses a part named .bin as a binary (XLSB) part, whatever the workbook is.
      const budget = { cells: MAX_SHEET_CELLS - kept.cells, columns: MAX_COLUMN_SPANS - kept.columns, elements: MAX_XML_ELEMENTS - kept.elements }
      const part = entry.name.toLowerCase().endsWith('.bin') ? countBinaryCells(inflated, budget) : countCells(inflated, budget)
      kept.cells += part.cells
      kept.columns += part.columns
      kept.elements += part.elements
      if (kept.cells > MAX_SHEET_CELLS) return { ok: false, message: tooManyCells }
      if (kept.elements > MAX_XML_ELEMENTS) return { ok: false, message: tooManyElements }
      if (kept.columns > MAX_COLUMN_SPANS) return { ok: false, message: tooManyColumns }
    }
  }
  return { ok: true, inflated: total }
}

/** The name bytes of `entry`'s local header (what a streaming unzip, officeparser's, names it by). */
function localNameBytes(bytes: Uint8Array, view: DataView, entry: ZipEntry): Uint8Array {
  const at = entry.localHeaderOffset
  return bytes.subarray(at + 30, at + 30 + view.getUint16(at + 26, true))
}

/** The name `entry`'s local header gives it, or undefined when there is no local header there. */
export function localHeaderName(bytes: Uint8Array, entry: ZipEntry): string | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (entry.localHeaderOffset + 30 > bytes.byteLength || view.getUint32(entry.localHeaderOffset, true) !== LOCAL) return undefined
  return Buffer.from(localNameBytes(bytes, view, entry)).toString('utf8')
}

/**
 * The package again with the data of the `replaced` entries stored (uncompressed, or deflated with `deflate`) in their place:
 * every other entry's stored bytes are copied as they are, with its CRC and sizes from the central
 * directory (which inflateWithinCap has checked). One entry per local header, in file order, each
 * named by its local header's own bytes: officeparser's unzip reads the local headers. Nothing is
 * inflated here, and no entry grows unless its replacement does.
 */
export function replaceEntries(bytes: Uint8Array, entries: ZipEntry[], replaced: Map<ZipEntry, Uint8Array>, options: { deflate?: boolean } = {}): Uint8Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const written = new Set<number>()
  const locals: Uint8Array[] = []
  const centrals: Uint8Array[] = []
  let offset = 0
  for (const entry of [...entries].sort((a, b) => a.localHeaderOffset - b.localHeaderOffset)) {
    if (written.has(entry.localHeaderOffset)) continue
    written.add(entry.localHeaderOffset)
    const stored = storedData(bytes, view, entry)
    if (typeof stored === 'string') throw new Error(stored)
    const name = localNameBytes(bytes, view, entry)
    const replacement = replaced.get(entry)
    const deflated = replacement && options.deflate ? deflateRawSync(replacement) : undefined
    const data = deflated ?? replacement ?? stored
    const method = deflated ? 8 : replacement ? 0 : entry.method
    const fields = { method, crc: replacement ? crc32(replacement) : entry.crc, compressed: data.byteLength, size: replacement ? replacement.byteLength : entry.uncompressedSize }
    // Only the UTF-8 name flag is kept: sizes are known, so no data descriptor follows.
    const flags = view.getUint16(entry.localHeaderOffset + 6, true) & 0x800
    const local = Buffer.alloc(30)
    local.writeUInt32LE(LOCAL, 0)
    local.writeUInt16LE(20, 4)
    local.writeUInt16LE(flags, 6)
    local.writeUInt16LE(fields.method, 8)
    local.writeUInt32LE(fields.crc, 14)
    local.writeUInt32LE(fields.compressed, 18)
    local.writeUInt32LE(fields.size, 22)
    local.writeUInt16LE(name.byteLength, 26)
    const central = Buffer.alloc(46)
    central.writeUInt32LE(CENTRAL, 0)
    central.writeUInt16LE(20, 4)
    central.writeUInt16LE(20, 6)
    central.writeUInt16LE(flags, 8)
    central.writeUInt16LE(fields.method, 10)
    central.writeUInt32LE(fields.crc, 16)
    central.writeUInt32LE(fields.compressed, 20)
    central.writeUInt32LE(fields.size, 24)
    central.writeUInt16LE(name.byteLength, 28)
    central.writeUInt32LE(offset, 42)
    locals.push(local, name, data)
    centrals.push(central, name)
    offset += 30 + name.byteLength + data.byteLength
  }
  const directory = Buffer.concat(centrals)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(EOCD, 0)
  end.writeUInt16LE(written.size, 8)
  end.writeUInt16LE(written.size, 10)
  end.writeUInt32LE(directory.byteLength, 12)
  end.writeUInt32LE(offset, 16)
  // The Buffer itself: a Uint8Array, and copying it again doubled the package in memory.
  return Buffer.concat([...locals, directory, end])
}
