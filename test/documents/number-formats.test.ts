import * as XLSX from '@e965/xlsx'
import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { emptySection } from '../../src/documents/number-format'
import type { ExtractionLimits } from '../../src/documents/types'
import { fixture } from './hostile'

// Workbook cells as Excel shows them, where SheetJS's own formatter differs.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }

/** Format, then each value with the text Excel shows for it. */
const NEGATIVES: ReadonlyArray<readonly [string, ReadonlyArray<readonly [number, string]>]> = [
  ['0', [[-0.5, '-1'], [-1.5, '-2'], [-2.5, '-3'], [-1234.5, '-1235'], [2.5, '3'], [-3, '-3'], [-0.4, '-0']]],
  ['0.0', [[-0.05, '-0.1'], [-0.25, '-0.3'], [-0.04, '-0.0'], [-1.26, '-1.3']]],
  // -2.675 is 2.67499999… in binary; SheetJS shows 2.675 as 2.68, as Excel does, and so -2.675 as -2.68.
  ['0.00', [[-0.125, '-0.13'], [-2.675, '-2.68'], [-0.005, '-0.01'], [0.125, '0.13']]],
  ['0.00%', [[-0.00125, '-0.13%'], [-0.5, '-50.00%']]],
  ['0%', [[-0.125, '-13%'], [-0.004, '-0%']]],
  ['#.##', [[-0.125, '-.13'], [-1.5, '-1.5']]],
  ['"Qty: "0', [[-0.5, '-Qty: 1'], [-2.5, '-Qty: 3']]],
  ['0 "kg"', [[-2.5, '-3 kg'], [-0.4, '-0 kg']]],
  ['[Red]0', [[-2.5, '-3']]],
  // A text section after the number's: the number's section serves negatives too.
  ['0.0;@', [[-0.05, '-0.1']]],
  // Already rounded away from zero by SheetJS (they format the absolute value): unchanged.
  ['#,##0', [[-2.5, '-3'], [-1234.5, '-1,235']]],
  ['$#,##0.00', [[-0.125, '-$0.13'], [-1234.5, '-$1,234.50']]],
  ['0.00E+00', [[-1234.5, '-1.23E+03'], [-0.125, '-1.25E-01']]],
  ['# ?/?', [[-1.5, '-1 1/2']]],
  // A section of their own for negatives, filled with the absolute value: unchanged.
  ['0;(0)', [[-2.5, '(3)'], [-0.4, '(0)']]],
  ['0;[Red]-0', [[-2.5, '-3']]],
  ['0.00;-0.00', [[-0.125, '-0.13']]],
  // A date format on a negative value (no date): the value, as before.
  ['yyyy-mm-dd', [[-5, '-5']]],
]

describe('negative numbers halfway between two shown values round away from zero, as in Excel', () => {
  test('a table of formats and values, in XLSX as in XLS', async () => {
    const sheet: XLSX.WorkSheet = {}
    let widest = 0
    NEGATIVES.forEach(([z, cells], row) => {
      cells.forEach(([v], column) => (sheet[XLSX.utils.encode_cell({ r: row, c: column })] = { t: 'n', v, z }))
      widest = Math.max(widest, cells.length)
    })
    sheet['!ref'] = XLSX.utils.encode_range({ s: { r: 0, c: 0 }, e: { r: NEGATIVES.length - 1, c: widest - 1 } })
    const workbook = XLSX.utils.book_new()
    XLSX.utils.book_append_sheet(workbook, sheet, 'N')
    const expected = ['[Sheet: N]', ...NEGATIVES.map(([, cells]) => cells.map(([, shown]) => shown).join('\t'))].join('\n')
    for (const bookType of ['xlsx', 'biff8'] as const) {
      const bytes = new Uint8Array(XLSX.write(workbook, { type: 'buffer', bookType }))
      expect((await extractDocument(bytes, limits)).text).toBe(expected)
    }
  })

  test('LibreOffice Calc files (rounding.fods saved as XLSX and as XLS)', async () => {
    // -0.5, -1.5, -2.5 in 0; -0.05 in 0.0; -0.125 in 0.00; 2.5 and -1234.5 in 0.
    const text = '[Sheet: R]\n-1\n-2\n-3\n-0.1\n-0.13\n3\n-1235'
    expect(await extractDocument(await fixture('rounding.xlsx'), limits)).toEqual({ documentType: 'xlsx', text })
    expect(await extractDocument(await fixture('rounding.xls'), limits)).toEqual({ documentType: 'xls', text })
  })
})

describe('dates in formats SheetJS cannot read, and General, as Excel shows them (QA)', () => {
  /** Value, format, the text Excel shows (dates written ISO). */
  const CELLS: ReadonlyArray<readonly [number, string, string]> = [
    // Before: "2024-01-15 13:30:00", a time the format does not show.
    [45306.5625, 'dd.mm.yyyy', '2024-01-15'],
    [45306.5625, 'dd.mm.yyyy hh:mm', '2024-01-15 13:30'],
    [0.5625, 'hh.mm', '13:30'],
    // A time of day alone in a date format: Excel's day zero (00.01.1900), in every date format alike (before: "03:00:00" here).
    [0.125, 'dd.mm.yyyy', '1900-01-00'],
    [0.125, 'm/d/yy', '1900-01-00'],
    // Before: "12345678901" and "-12345678901" (SheetJS cuts the decimals off; Excel rounds them).
    [12345678901.5, 'General', '12345678902'],
    [-12345678901.5, 'General', '-12345678902'],
    [12345678901.4, 'General', '12345678901'],
    [1234.5678, 'General', '1234.5678'],
    [4006381333931, 'General', '4006381333931'],
  ]

  test('in XLSX as in XLS', async () => {
    const sheet: XLSX.WorkSheet = {}
    CELLS.forEach(([v, z], row) => (sheet[XLSX.utils.encode_cell({ r: row, c: 0 })] = { t: 'n', v, z }))
    sheet['!ref'] = `A1:A${CELLS.length}`
    const workbook = XLSX.utils.book_new()
    XLSX.utils.book_append_sheet(workbook, sheet, 'D')
    const expected = ['[Sheet: D]', ...CELLS.map(([, , shown]) => shown)].join('\n')
    for (const bookType of ['xlsx', 'biff8'] as const) {
      expect((await extractDocument(new Uint8Array(XLSX.write(workbook, { type: 'buffer', bookType })), limits)).text).toBe(expected)
    }
  })
})

/**
 * One row per format, holding 5, -5, 0 and the text "note" in it, written as XLSX and as XLS:
 * each extracts to what Excel shows (trailing empty cells leave no tabs).
 */
async function expectShown(formats: ReadonlyArray<readonly [string, readonly string[]]>, name: string): Promise<void> {
  const sheet: XLSX.WorkSheet = {}
  formats.forEach(([z], row) => {
    ;[5, -5, 0].forEach((v, column) => (sheet[XLSX.utils.encode_cell({ r: row, c: column + 1 })] = { t: 'n', v, z }))
    sheet[XLSX.utils.encode_cell({ r: row, c: 4 })] = { t: 's', v: 'note', z }
    sheet[XLSX.utils.encode_cell({ r: row, c: 0 })] = { t: 's', v: `row ${row + 1}` }
  })
  sheet['!ref'] = `A1:E${formats.length}`
  const workbook = XLSX.utils.book_new()
  XLSX.utils.book_append_sheet(workbook, sheet, name)
  const expected = [`[Sheet: ${name}]`, ...formats.map(([, shown], row) => [`row ${row + 1}`, ...shown].join('\t').replace(/\t+$/, ''))].join('\n')
  for (const bookType of ['xlsx', 'biff8'] as const) {
    expect((await extractDocument(new Uint8Array(XLSX.write(workbook, { type: 'buffer', bookType })), limits)).text).toBe(expected)
  }
}

describe('a value whose format section is empty shows as nothing, as in Excel (QA: hidden values were read)', () => {
  /** A format, then what Excel shows for 5, -5, 0 and the text "note" in it ('' for nothing). */
  const FORMATS: ReadonlyArray<readonly [string, readonly [string, string, string, string]]> = [
    // Excel's "hide the value" format: every section empty.
    [';;;', ['', '', '', '']],
    // Before: SheetJS reads a format starting with General as General whole, so these showed every value.
    ['General;;;', ['5', '', '', '']],
    ['General;-General;;@', ['5', '-5', '', 'note']],
    ['General;[Red];', ['5', '', '', 'note']],
    // Without a text section a text shows as it is.
    ['0;;', ['5', '', '', 'note']],
  ]

  test('in XLSX as in XLS', () => expectShown(FORMATS, 'H'))

  test("sections are split as Excel splits them (a quoted ';' is text); a format with conditions is left to SheetJS", () => {
    expect([emptySection('0;"a;";', 0), emptySection('0;"a;";', -1), emptySection('0;"a;";', 1)]).toEqual([true, false, false])
    expect([emptySection('[>100]0;;', -1), emptySection('0', 0), emptySection('0;0;0;', 'text'), emptySection('0;0;0', 'text')]).toEqual([false, false, true, false])
  })
})

describe('a format holding General shows each section as Excel does (QA: SheetJS reads one starting with General as General whole)', () => {
  /** A format, then what Excel shows for 5, -5, 0 and the text "note" in it. */
  const FORMATS: ReadonlyArray<readonly [string, readonly [string, string, string, string]]> = [
    // Before: 5, -5, 0, note.
    ['General;(General);"zero";"T:"@', ['5', '(5)', 'zero', 'T:note']],
    ['General\\ "kg";\\-General_)', ['5 kg', '-5', '0 kg', 'note']],
    ['General;0.00', ['5', '5.00', '0', 'note']],
    // One section: the minus sign in front (before: " kg" left out).
    ['General" kg"', ['5 kg', '-5 kg', '0 kg', 'note']],
    // A negative's own section holding General shows the absolute value (before: (-5)).
    ['0;(General)', ['5', '(5)', '0', 'note']],
    ['General', ['5', '-5', '0', 'note']],
  ]

  test('in XLSX as in XLS', () => expectShown(FORMATS, 'G'))
})
