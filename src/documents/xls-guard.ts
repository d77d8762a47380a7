import * as XLSX from '@e965/xlsx'

// Legacy Excel (BIFF5 and BIFF8 in an OLE2 container) counted before SheetJS reads it: a 4 MB
// workbook of 665,600 numbers took 395 MB in SheetJS, and nothing counted them first (the zip
// guard's count covers XLSX only). The workbook stream is a flat run of records, each a 2-byte
// type and a 2-byte length, so its cells are counted by walking the headers.

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
// Blank cells (BLANK, MULBLANK) are not counted: SheetJS keeps none without `sheetStubs`, and
// Excel writes them for every formatted empty cell, so whole formatted columns would count.

/**
 * The cells a legacy workbook's stream holds, counted up to just past `limit`; undefined when the
 * container or its workbook stream cannot be read (SheetJS then refuses the file in its own words).
 * Throws XlsRefused for records SheetJS cannot be trusted with.
 */
export function countXlsCells(bytes: Uint8Array, limit: number): number | undefined {
  let stream: Uint8Array
  try {
    const container = XLSX.CFB.read(bytes, { type: 'array' })
    // The root's streams, as SheetJS reads them: without the slash, find() takes a `Workbook`
    // anywhere in the container, and a decoy in a storage could be counted instead.
    const entry = XLSX.CFB.find(container, '/Workbook') ?? XLSX.CFB.find(container, '/Book')
    if (!entry?.content) return undefined
    stream = entry.content instanceof Uint8Array ? entry.content : Uint8Array.from(entry.content as ArrayLike<number>)
  } catch {
    return undefined
  }
  let cells = 0
  for (let offset = 0; offset + 4 <= stream.length && cells <= limit; ) {
    const type = stream[offset]! | (stream[offset + 1]! << 8)
    const length = stream[offset + 2]! | (stream[offset + 3]! << 8)
    if (ONE_CELL.has(type)) cells += 1
    else if (type === MULRK && length >= 6) cells += Math.floor((length - 6) / 6)
    else if (FOREIGN_FORMULA.has(type)) throw new XlsRefused(LOOPING)
    if (length < (LEAST_LENGTH.get(type) ?? 0)) throw new XlsRefused(LOOPING)
    offset += 4 + length
  }
  return cells
}
