import * as XLSX from '@e965/xlsx'
import { afterAll, describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { WorkerExtractorPool } from '../../src/documents/pool'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { countXlsCells, XlsRefused } from '../../src/documents/xls-guard'
import { fixture } from './hostile'
import { arrayExtra, arrayRecord, biff8With, formulaRecord, memExtra, nameRecord, parsedFormula, ptg, sharedFormulaRecord, xlsRecord } from './hostile-xls'

// A BIFF8 formula whose extra (the bytes after its tokens) ends before a PtgMemArea's count sent
// SheetJS 0.20.3 into a loop that grew ~1.5 GB in 2 s, from a 4 KB upload, until the pool's
// memory watchdog killed the worker. The guard walks each formula as SheetJS does and refuses it.

const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const LOOPING = /a record SheetJS cannot read/

/** SUM((A1:A3,C1:C3)) as Excel precomputes it: a PtgMemArea over the union, its ranges in the extra. */
const union = [...ptg.memArea(19), ...ptg.area(0, 2, 0, 0), ...ptg.area(0, 2, 2, 2), ...ptg.union, ...ptg.sum(1)]
const unionExtra = memExtra([0, 2, 0, 0], [0, 2, 2, 2])
/** The extras cut to one byte: the count is read past the record's end. */
const cut = [0x02]

const refused = (bytes: Uint8Array) => expect(() => countXlsCells(bytes, 1000)).toThrow(XlsRefused)
const read = (bytes: Uint8Array) => expect(() => countXlsCells(bytes, 1000)).not.toThrow()

describe('formulas SheetJS loops on are refused before it reads them', () => {
  // The old code's failure mode is a hang, so the end-to-end check runs in the real worker pool,
  // whose timeout fails the test in seconds instead (and whose memory budget stops the growth).
  const pool = new WorkerExtractorPool({ size: 1, queueSize: 4, timeoutMs: 4000, memoryBudgetBytes: process.memoryUsage().rss + 768 * 1024 * 1024, limits })
  afterAll(() => pool.close())
  const cases = {
    FORMULA: biff8With({ sheet: [formulaRecord(union, cut)] }),
    SHRFMLA: biff8With({ sheet: [sharedFormulaRecord(union, cut)] }),
    NAME: biff8With({ globals: [nameRecord('Both', union, cut)] }),
  }
  for (const [record, bytes] of Object.entries(cases)) {
    test(`${record}: refused by the extractor with the guard's message, quickly`, async () => {
      const started = performance.now()
      const error = await pool.extract({ bytes, filename: 'memarea.xls' }).then(() => undefined, (error: unknown) => error)
      expect(error).toBeInstanceOf(ExtractionError)
      expect((error as ExtractionError).reason).toBe('invalid')
      expect((error as ExtractionError).message).toMatch(LOOPING)
      expect(performance.now() - started).toBeLessThan(3000)
    })
  }

  test('ARRAY, the BIFF2 forms SheetJS reads in any stream, and a count past a CONTINUE record', () => {
    refused(biff8With({ sheet: [arrayRecord(union, cut)] }))
    refused(biff8With({ sheet: [xlsRecord(0x0021, arrayRecord(union, cut).subarray(4))] }))
    refused(biff8With({ globals: [xlsRecord(0x0218, nameRecord('Both', union, cut).subarray(4))] }))
    // slurp() joins a record and its CONTINUE records before parsing: the count in a CONTINUE is read.
    const formula = formulaRecord(union, cut)
    read(biff8With({ sheet: [formula, xlsRecord(0x003c, [0x00, ...unionExtra.slice(2)])] }))
    // The least lengths too are the joined record's: a FORMULA cut at 21 bytes, the rest in a CONTINUE.
    const whole = formulaRecord(union, unionExtra)
    read(biff8With({ sheet: [xlsRecord(0x0006, whole.subarray(4, 25)), xlsRecord(0x003c, whole.subarray(25))] }))
    // No extra at all: SheetJS reads one only when bytes follow the tokens.
    read(biff8With({ sheet: [formulaRecord(union, [])] }))
    // A count inside the record whose ranges run past it (SheetJS keeps 65,535 ranges of NaNs per
    // NAME: 1.2 GB from 100 such records in 7 KB) is refused; one whose ranges are all there reads.
    refused(biff8With({ globals: [nameRecord('Many', union, [0xff, 0xff, ...unionExtra.slice(2)])] }))
    read(biff8With({ globals: [nameRecord('Both', union, unionExtra)] }))
    // A cce past the record's end: the tokens are read to there, and the count past it.
    const long = formulaRecord(union, [])
    long.writeUInt16LE(union.length + 5, 4 + 20)
    refused(biff8With({ sheet: [long] }))
  })

  test("the count's place follows every token before it, as SheetJS sizes them", () => {
    // A PtgArray's values come first in the extra: 2 × 1 numbers, then the count.
    const withArray = [...ptg.array, ...union]
    read(biff8With({ sheet: [formulaRecord(withArray, [...arrayExtra(2, 1, [1, 2]), ...unionExtra])] }))
    refused(biff8With({ sheet: [formulaRecord(withArray, [...arrayExtra(2, 1, [1, 2]), 0x02])] }))
    // A PtgStr before: its length is its own; a tAttrChoose carries cases + 1 offsets.
    const long = [...ptg.str('x'.repeat(200)), ...ptg.choose(3), ...union]
    read(biff8With({ sheet: [formulaRecord(long, unionExtra)] }))
    refused(biff8With({ sheet: [formulaRecord(long, cut)] }))
    // A token SheetJS has no parser for ends the tokens: a PtgMemArea after it is never read.
    read(biff8With({ sheet: [formulaRecord([0x00, ...union], [])] }))
    // PtgList before it makes parse_RgbExtra throw first: SheetJS refuses the file, it does not loop.
    read(biff8With({ sheet: [formulaRecord([0x18, 0x19, ...Array<number>(12).fill(0), ...union], [])] }))
    // A BIFF5 stream: parse_RgbExtra reads nothing there.
    const biff5 = XLSX.CFB.read(biff8With({ sheet: [formulaRecord(union, cut)] }), { type: 'array' })
    const stream = Buffer.from(XLSX.CFB.find(biff5, '/Workbook')!.content as Uint8Array)
    for (let offset = 0; offset + 4 <= stream.length; offset += 4 + stream.readUInt16LE(offset + 2)) {
      if (stream.readUInt16LE(offset) === 0x0809) stream.writeUInt16LE(0x0500, offset + 4)
    }
    XLSX.CFB.find(biff5, '/Workbook')!.content = stream
    read(new Uint8Array(XLSX.CFB.write(biff5, { type: 'array' }) as ArrayBuffer))
  })

  test('a stream cut inside a record header is read as SheetJS reads it: a record of no bytes', () => {
    // QA: a 2-byte SHRFMLA type in place of the sheet's EOF looped SheetJS, the walk stopped short of it.
    const container = XLSX.CFB.read(biff8With({}), { type: 'array' })
    const entry = XLSX.CFB.find(container, '/Workbook')!
    const stream = Buffer.from(entry.content as Uint8Array)
    entry.content = Buffer.concat([stream.subarray(0, stream.length - 4), Buffer.from([0xbc, 0x04])])
    entry.size = entry.content.length
    refused(new Uint8Array(XLSX.CFB.write(container, { type: 'array' }) as ArrayBuffer))
  })
})

describe('real formulas are read', () => {
  test('formulas SheetJS writes (its `bf`: ranges, unions, arrays, strings, choices) read in full', async () => {
    const sheet = XLSX.utils.aoa_to_sheet([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    const formulas = [
      parsedFormula(union, unionExtra),
      parsedFormula([...ptg.array, ...ptg.sum(1)], arrayExtra(2, 2, [1, 2, 3, 4])),
      parsedFormula([...ptg.array, ...union, ...ptg.array, 0x03], [...arrayExtra(1, 3, [1, 2, 3]), ...unionExtra, ...arrayExtra(1, 1, [5])]),
      parsedFormula([...ptg.int(2), ...ptg.choose(2), ...ptg.str('alpha'), ...ptg.str('beta'), ...ptg.str('gamma'), 0x22, 4, 100, 0], []),
    ]
    formulas.forEach((bf, row) => (sheet[`E${row + 1}`] = { t: 'n', v: row, bf }))
    sheet['!ref'] = 'A1:E4'
    const book = XLSX.utils.book_new()
    XLSX.utils.book_append_sheet(book, sheet, 'S')
    const names = [nameRecord('Both', union, unionExtra), nameRecord('Consts', ptg.array, arrayExtra(1, 3, [1, 2, 3]))]
    // An array formula at F1 and a shared one at G1: each cell's FORMULA points (PtgExp) at its record.
    const array = [formulaRecord([0x01, 0, 0, 5, 0], [], 0, 5), arrayRecord([...ptg.array, ...union, 0x05], [...arrayExtra(1, 1, [2]), ...unionExtra], 0, 5)]
    const shared = [formulaRecord([0x01, 0, 0, 6, 0], [], 0, 6), sharedFormulaRecord(union, unionExtra, 0, 6)]
    const bytes = biff8With({ globals: names, sheet: [...array, ...shared] }, book)
    expect(countXlsCells(bytes, 1000)).toBe(15)
    expect((await extractDocument(bytes, limits)).text).toBe('[Sheet: S]\n1\t2\t3\t\t0\t0\t0\n4\t5\t6\t\t1\n7\t8\t9\t\t2\n\t\t\t\t3')
  })

  test('LibreOffice-written XLS fixtures read as before', async () => {
    expect((await extractDocument(await fixture('sheets.xls'), limits)).documentType).toBe('xls')
    // Calc's BIFF8 (generate.sh): unions (PtgMemFunc), constant arrays in cells and names, an array
    // formula, shared formulas, CHOOSE, a long Unicode string; each cell shows its cached value.
    const text = (await extractDocument(await fixture('formulas.xls'), limits)).text
    expect(text).toBe(
      '[Sheet: Sheet1]\n1\t2\t3\t\t30\t2\t7\n4\t5\t6\t\t15\t8\t34\n7\t8\t9\t\t10\t14\t79\n\t\t\t\tbeta\n\t\t\t\t6\n\t\t\t\t30\n\t\t\t\t6\n' +
        '\t\t\t\ta long string literal with ünïcödé ✓\n\t\t\t\t101\n\n[Sheet: Sheet2]\n10\t20\n30\t40',
    )
  })
})
