import * as XLSX from '@e965/xlsx'
import { columnSpan, MAX_COLUMN_SPANS, tooManyColumns } from './column-spans'
import { FORMULA_RECORDS, formulaLoops, type SlurpedRecord } from './xls-formulas'

// Legacy Excel (BIFF5 and BIFF8 in an OLE2 container) counted before SheetJS reads it: a 4 MB
// workbook of 665,600 numbers took 395 MB in SheetJS, and nothing counted them first (the zip
// guard's count covers XLSX only). The workbook stream is a flat run of records, each a 2-byte
// type and a 2-byte length, so its cells are counted by walking the headers.
//
// The same walk refuses what SheetJS 0.20.3 would never finish reading (a worker held until the
// pool's timeout, or growing until its memory watchdog): records it loops on when short
// (LEAST_LENGTH), BIFF3/4 formulas, and, in a BIFF8 stream, a formula whose extra ends before a
// PtgMemArea's count (xls-formulas.ts walks each formula token by token as SheetJS does). For
// that the walk follows parse_workbook (Reading): the BIFF version each BOF sets, where it stops
// reading, and slurp()'s joining of CONTINUE records to the record before them.

/**
 * Records that each hold one cell SheetJS keeps: NUMBER, LABELSST, RK, FORMULA, LABEL, BOOLERR,
 * RSTRING, and the BIFF2 forms it also reads in a later stream (INTEGER, NUMBER, LABEL, BOOLERR).
 */
const ONE_CELL = new Set([0x0203, 0x00fd, 0x027e, 0x0006, 0x0204, 0x0205, 0x00d6, 0x0002, 0x0003, 0x0004, 0x0005])
/**
 * FORMULA records of BIFF3 and BIFF4, which no OLE2 workbook (BIFF5 and later) holds: one of them
 * in a BIFF8 stream sent SheetJS into a loop (a 4 KB file held a worker until the pool's timeout).
 */
const FOREIGN_FORMULA = new Set([0x0206, 0x0406])
/**
 * Records SheetJS 0.20.3 loops on when they are shorter than this (a count or length read past the
 * record's end is NaN, and a loop ending on `!=` never ends; the string ones grow memory without
 * bound). Found by inserting every record type at lengths 0–31 into BIFF5 and BIFF8 streams
 * (~280,000 cases): these 17 types, each refused below the least length that reads, which no real
 * record is shorter than. SheetJS takes the version from the stream's BOF, so all apply to every
 * stream. Formula, string, format, name, note, array, shared-formula and sheet-reference records.
 */
const LEAST_LENGTH: ReadonlyMap<number, number> = new Map([
  [0x0004, 8], [0x0006, 22], [0x0007, 1], [0x0017, 2], [0x0018, 4], [0x001c, 6], [0x001e, 1], [0x0021, 14], [0x005c, 1],
  [0x00d6, 8], [0x01ba, 2], [0x0204, 8], [0x0207, 2], [0x0218, 4], [0x0221, 14], [0x041e, 3], [0x04bc, 10],
])
const LOOPING = 'the workbook holds a record SheetJS cannot read (a damaged or crafted file); open it in Excel and save it again'

/** A workbook stream SheetJS must not be given. */
export class XlsRefused extends Error {}
/** MULRK: a row's run of RK numbers, 6 bytes each after the row, first column and last column. */
const MULRK = 0x00bd
/**
 * BLANK (one formatted empty cell) and MULBLANK (a row's run of them, 2 bytes each after the row,
 * first column and last column): SheetJS keeps them as cells too, as extractWorkbook reads with
 * cellStyles, which implies `sheetStubs`.
 */
const BLANK = 0x0201
const MULBLANK = 0x00be
/** COLINFO: a run of columns, its first and last column 2 bytes each (column-spans.ts). */
const COLINFO = 0x007d

/**
 * A legacy Office file's (OLE2) workbook stream: the root's `Workbook` (BIFF8) or `Book` (BIFF5),
 * as SheetJS reads them, or none (a .doc or .ppt holds WordDocument or PowerPoint Document
 * instead); not readable when the container itself cannot be read (damaged, or truncated: cut
 * short, its sector tables point past its end).
 */
export function workbookStream(bytes: Uint8Array): { readable: false } | { readable: true; stream?: Uint8Array; wordOrPowerPoint?: true } {
  try {
    const container = XLSX.CFB.read(bytes, { type: 'array' })
    // The root's streams, as SheetJS reads them: without the slash, find() takes a `Workbook`
    // anywhere in the container, and a decoy in a storage could be counted instead.
    const entry = XLSX.CFB.find(container, '/Workbook') ?? XLSX.CFB.find(container, '/Book')
    if (!entry?.content) {
      // A .doc's or a .ppt's main stream, to tell one from a workbook cut inside its directory
      // (the container then reads, holding the root alone).
      const document = XLSX.CFB.find(container, '/WordDocument') ?? XLSX.CFB.find(container, '/PowerPoint Document')
      return document ? { readable: true, wordOrPowerPoint: true } : { readable: true }
    }
    return { readable: true, stream: entry.content instanceof Uint8Array ? entry.content : Uint8Array.from(entry.content as ArrayLike<number>) }
  } catch {
    return { readable: false }
  }
}

/**
 * Whether a legacy Office file (OLE2) is an encrypted DOCX, XLSX or PPTX (Office's password
 * protection): its root holds an `EncryptedPackage` stream. Read from the container's directory:
 * searched for in the file's bytes, the name matched a workbook cell holding that word, which a
 * character past Latin-1 makes it store UTF-16 as directory names are. A container that cannot be
 * read is not one (SheetJS then refuses it as damaged).
 */
export function encryptedPackage(bytes: Uint8Array): boolean {
  try {
    const entry = XLSX.CFB.find(XLSX.CFB.read(bytes, { type: 'array' }), '/EncryptedPackage')
    return entry !== null && entry.type === STREAM
  } catch {
    return false
  }
}

/** A directory entry's type: a stream (MS-CFB 2.6.1). */
const STREAM = 2

/**
 * The cells a legacy workbook's stream holds, counted up to just past `limit`; undefined when the
 * container or its workbook stream cannot be read (SheetJS then refuses the file in its own words).
 * Throws XlsRefused for records SheetJS cannot be trusted with, and for column records spanning
 * more columns than MAX_COLUMN_SPANS.
 */
export function countXlsCells(bytes: Uint8Array, limit: number): number | undefined {
  const held = workbookStream(bytes)
  if (!held.readable || held.stream === undefined) return undefined
  const stream = held.stream
  let cells = 0
  let columns = 0
  const reading = new Reading()
  // SheetJS reads a record while two bytes are left; a header cut short by the stream's end is a
  // record of no bytes to it (its length read past the end is NaN, and slurp() hands the parser
  // nothing). Such a tail of a type below loops it as a record that short does (a stream ending
  // in a SHRFMLA's 2-byte type where the sheet's EOF was looped it; the walk stopped short of it).
  for (let offset = 0; offset + 2 <= stream.length && cells <= limit; ) {
    const type = stream[offset]! | (stream[offset + 1]! << 8)
    const length = offset + 4 <= stream.length ? stream[offset + 2]! | (stream[offset + 3]! << 8) : 0
    if (ONE_CELL.has(type) || type === BLANK) cells += 1
    else if (type === MULRK && length >= 6) cells += Math.floor((length - 6) / 6)
    else if (type === MULBLANK && length >= 6) cells += Math.floor((length - 6) / 2)
    else if (type === COLINFO && length >= 4 && offset + 8 <= stream.length) {
      columns += columnSpan(stream[offset + 4]! | (stream[offset + 5]! << 8), stream[offset + 6]! | (stream[offset + 7]! << 8))
      if (columns > MAX_COLUMN_SPANS) throw new XlsRefused(tooManyColumns)
    }
    else if (FOREIGN_FORMULA.has(type)) throw new XlsRefused(LOOPING)
    // Measured as SheetJS parses it, joined to the CONTINUE records after it (a FORMULA of 21
    // bytes and a CONTINUE of 12 reads; refusing it looked at the first piece alone).
    const least = LEAST_LENGTH.get(type) ?? 0
    if (length < least && (slurp(stream, offset, length)?.data.length ?? length) < least) throw new XlsRefused(LOOPING)
    if (reading.follow(stream, offset, type, length)) throw new XlsRefused(LOOPING)
    offset += 4 + length
  }
  return cells
}

const BOF = new Set([0x0009, 0x0209, 0x0409, 0x0809])
const EOF = 0x000a
const FILEPASS = 0x002f
/** CONTINUE, ContinueBigName, ContinueFrt, ContinueFrt11, ContinueFrt12: slurp() joins them to the record before. */
const CONTINUE = new Set([0x003c, 0x043c, 0x0812, 0x0875, 0x087f])
/** parse_BOF's versions; another in a BOF of more than 8 bytes throws. */
const KNOWN_VERSION = new Set([0x0600, 0x0500, 0x0400, 0x0300, 0x0200, 0x0002, 0x0007])
const BIFF_BY_TYPE: ReadonlyMap<number, number> = new Map([[0x0009, 2], [0x0209, 3], [0x0409, 4]])
const BIFF_BY_VERSION: ReadonlyMap<number, number> = new Map([[0x0200, 2], [0x0300, 3], [0x0400, 4], [0x0500, 5], [0x0600, 8], [0x0002, 2], [0x0007, 2]])

/**
 * parse_workbook's progress through the stream, as far as its formulas need: the BIFF version its
 * parsers are given (from the BOF records, as SheetJS decides it), how deep it is in BOF…EOF
 * substreams, and whether it has stopped reading (SheetJS reads nothing after it stops, so nothing
 * there is refused).
 */
class Reading {
  private biff = 8
  private depth = 0
  private stopped = false

  /** Follows one record; true when SheetJS would loop on its formula. */
  follow(stream: Uint8Array, offset: number, type: number, length: number): boolean {
    if (this.stopped) return false
    // Outside any substream SheetJS stops at the first record that is not a BOF; at FILEPASS it
    // throws (the extractor gives no password), and past the stream's end ("Truncated") too.
    if ((this.depth === 0 && !BOF.has(type)) || type === FILEPASS) {
      this.stopped = true
      return false
    }
    if (type === EOF) {
      this.depth -= 1
      return false
    }
    if (!BOF.has(type) && !(this.biff === 8 && FORMULA_RECORDS.has(type))) return false
    const record = slurp(stream, offset, length)
    if (record === undefined) {
      this.stopped = true
      return false
    }
    if (!BOF.has(type)) return formulaLoops(type, record)
    const data = record.data
    const version = data.length >= 2 ? data[0]! | (data[1]! << 8) : Number.NaN
    const kind = data.length >= 4 ? data[2]! | (data[3]! << 8) : 0
    if (!KNOWN_VERSION.has(version) && data.length - 2 > 6) {
      this.stopped = true
      return false
    }
    // Decided while it is 8 (the default), so a BIFF5 BOF fixes the rest of the stream as BIFF5;
    // the two quirks after apply at every BOF.
    if (this.biff === 8) this.biff = BIFF_BY_TYPE.get(type) ?? BIFF_BY_VERSION.get(version) ?? 8
    if (version === 0 && kind === 0x1000) this.biff = 5
    if (this.biff === 8 && version === 0 && kind === 16) this.biff = 2
    this.depth += 1
    return false
  }
}

/**
 * A record's data as SheetJS's slurp() gathers it: its own bytes, then each CONTINUE record's that
 * follows (after ContinueFrt's 4-byte header, ContinueFrt11's and 12's 12), cut at the stream's
 * end; undefined when the record itself runs past the end (slurp throws).
 */
function slurp(stream: Uint8Array, offset: number, length: number): SlurpedRecord | undefined {
  // A header cut short by the stream's end: the parser gets no bytes (see countXlsCells).
  if (offset + 4 > stream.length) return { data: new Uint8Array(0), starts: [0] }
  if (offset + 4 + length > stream.length) return undefined
  const pieces = [stream.subarray(offset + 4, offset + 4 + length)]
  const starts = [0]
  let total = length
  for (let next = offset + 4 + length; next + 2 <= stream.length; ) {
    const type = stream[next]! | (stream[next + 1]! << 8)
    if (!CONTINUE.has(type)) break
    // A length read past the end is NaN: the piece is empty and SheetJS reads no further.
    const pieceLength = next + 4 <= stream.length ? stream[next + 2]! | (stream[next + 3]! << 8) : Number.NaN
    const start = next + 4 + (type === 0x0812 ? 4 : type === 0x0875 || type === 0x087f ? 12 : 0)
    const end = Math.min(next + 4 + pieceLength, stream.length)
    const piece = start < end ? stream.subarray(start, end) : new Uint8Array(0)
    pieces.push(piece)
    starts.push(total)
    total += piece.length
    if (Number.isNaN(pieceLength)) break
    next += 4 + pieceLength
  }
  if (pieces.length === 1) return { data: pieces[0]!, starts }
  const data = new Uint8Array(total)
  pieces.reduce((at, piece) => (data.set(piece, at), at + piece.length), 0)
  return { data, starts }
}
