import * as XLSX from '@e965/xlsx'

// BIFF8 workbooks holding formula records built byte by byte (MS-XLS 2.4 and 2.5.198), spliced
// into one SheetJS writes: what a crafted upload or a real Excel file may carry.

/** A record: its 2-byte type, 2-byte length, then the body. */
export function xlsRecord(type: number, body: ArrayLike<number>): Buffer {
  const head = Buffer.alloc(4)
  head.writeUInt16LE(type, 0)
  head.writeUInt16LE(body.length, 2)
  return Buffer.concat([head, Buffer.from(body as number[])])
}

const u16 = (value: number) => [value & 0xff, value >> 8]

/** Formula tokens (BIFF8 sizes). */
export const ptg = {
  /** PtgMemArea: the next `cce` bytes of tokens make a range list precomputed in the formula's extra. */
  memArea: (cce: number) => [0x26, 0, 0, 0, 0, ...u16(cce)],
  /** PtgArea (reference class), rows and columns 0-based. */
  area: (row: number, lastRow: number, column: number, lastColumn: number) => [0x25, ...u16(row), ...u16(lastRow), ...u16(column | 0xc000), ...u16(lastColumn | 0xc000)],
  union: [0x10],
  /** PtgArray (array class): its values are in the formula's extra. */
  array: [0x60, 0, 0, 0, 0, 0, 0, 0],
  /** PtgStr, one byte a character. */
  str: (text: string) => [0x17, text.length, 0, ...Buffer.from(text, 'latin1')],
  /** tAttrChoose with `cases` offsets (SheetJS reads cases + 1). */
  choose: (cases: number) => [0x19, 0x04, ...u16(cases), ...Array.from({ length: 2 * (cases + 1) }, () => 0)],
  /** PtgFuncVar SUM of `argc` arguments. */
  sum: (argc: number) => [0x22, argc, 0x04, 0x00],
  int: (value: number) => [0x1e, ...u16(value)],
}

/** PtgExtraMem: a count, then each range as rows then columns (Ref8U). */
export const memExtra = (...ranges: Array<[number, number, number, number]>) => [...u16(ranges.length), ...ranges.flatMap(range => range.flatMap(u16))]
/** PtgExtraArray: columns less one, rows less one, then SerAr values (numbers here). */
export const arrayExtra = (rows: number, columns: number, values: number[]) =>
  [columns - 1, ...u16(rows - 1), ...values.flatMap(value => [0x01, ...Buffer.from(new Float64Array([value]).buffer)])]

/** A CellParsedFormula (also SheetJS's `bf`): cce, the tokens, the extra. */
export const parsedFormula = (rgce: number[], extra: number[]) => [...u16(rgce.length), ...rgce, ...extra]

/** FORMULA (at B2 unless told; rows and columns 0-based): cell, a cached number 0, flags, chn, then the formula. */
export const formulaRecord = (rgce: number[], extra: number[], row = 1, column = 1) =>
  xlsRecord(0x0006, [...u16(row), ...u16(column), ...u16(0x0f), ...Array<number>(8).fill(0), ...u16(0), 0, 0, 0, 0, ...parsedFormula(rgce, extra)])
/** SHRFMLA over one cell (B2 unless told): RefU, a reserved byte, cUse, then the formula. */
export const sharedFormulaRecord = (rgce: number[], extra: number[], row = 1, column = 1) =>
  xlsRecord(0x04bc, [...u16(row), ...u16(row), column, column, 0, 1, ...parsedFormula(rgce, extra)])
/** ARRAY over one cell (B2 unless told): Ref, 6 reserved bytes (flags, chn), then the formula. */
export const arrayRecord = (rgce: number[], extra: number[], row = 1, column = 1) =>
  xlsRecord(0x0221, [...u16(row), ...u16(row), column, column, 0, 0, 0, 0, 0, 0, ...parsedFormula(rgce, extra)])
/** NAME (Lbl) of a workbook-wide name: flags, chKey, cch, cce, reserved, itab, reserved, the name (one byte a character), the tokens, the extra. */
export const nameRecord = (name: string, rgce: number[], extra: number[]) =>
  xlsRecord(0x0018, [0, 0, 0, name.length, ...u16(rgce.length), 0, 0, 0, 0, 0, 0, 0, 0, 0, ...Buffer.from(name, 'latin1'), ...rgce, ...extra])

/**
 * A BIFF8 workbook of one sheet S (holding "head" in A1, and anything the book carries) with
 * records spliced in: `globals` before the workbook globals' EOF (where NAME belongs), `sheet`
 * before the sheet's EOF.
 */
export function biff8With(records: { globals?: Buffer[]; sheet?: Buffer[] }, book?: XLSX.WorkBook): Uint8Array {
  if (book === undefined) {
    book = XLSX.utils.book_new()
    XLSX.utils.book_append_sheet(book, XLSX.utils.aoa_to_sheet([['head']]), 'S')
  }
  const container = XLSX.CFB.read(new Uint8Array(XLSX.write(book, { bookType: 'biff8', type: 'array' })), { type: 'array' })
  const entry = XLSX.CFB.find(container, '/Workbook')!
  const stream = Buffer.from(entry.content as Uint8Array)
  let globalsEnd = 0
  const inserted = (records.globals ?? []).reduce((total, record) => total + record.length, 0)
  while (stream.readUInt16LE(globalsEnd) !== 0x000a) {
    // BOUNDSHEET records hold their sheet's stream position, which the inserted bytes move.
    if (stream.readUInt16LE(globalsEnd) === 0x0085) stream.writeUInt32LE(stream.readUInt32LE(globalsEnd + 4) + inserted, globalsEnd + 4)
    globalsEnd += 4 + stream.readUInt16LE(globalsEnd + 2)
  }
  entry.content = Buffer.concat([
    stream.subarray(0, globalsEnd), ...(records.globals ?? []),
    stream.subarray(globalsEnd, stream.length - 4), ...(records.sheet ?? []), stream.subarray(stream.length - 4),
  ])
  entry.size = entry.content.length
  return new Uint8Array(XLSX.CFB.write(container, { type: 'array' }) as ArrayBuffer)
}
