import * as XLSX from '@e965/xlsx'
import { parseOffice } from 'officeparser'
import { fillCharts, WordCharts } from './chart-parts'
import { chartBudget } from './charts'
import { rewriteDocx } from './docx-package'
import { withoutHiddenShapes } from './hidden-shapes'
import { ListLabels, readNumbering, readStyleNumbering, rewriteMarkers } from './list-labels'
import { docxLines, oneLine, pptxLines, type OfficeAst } from './office-layout'
import { slideFacts } from './slide-parts'
import { emptySection, generalSectionShown, generalShown, hugeFormat, isoDateFormat, negativeShown } from './number-format'
import { MAX_XML_ELEMENTS, TextCapExceeded } from './types'
import type { ZipEntry, ZipLimits } from './zip-guard'

// Office formats to predictable text. DOCX and PPTX through officeparser, whose AST
// office-layout.ts renders (the layout is ours; a slide's charts are read by charts.ts); a DOCX's
// parts first rewritten where officeparser would lose or garble their text (docx-package.ts), a
// PPTX's slides without the shapes PowerPoint hides (hidden-shapes.ts).
// Workbooks go through SheetJS (extractWorkbook): sheets under "[Sheet: name]" with rows
// tab-separated, what Excel hides left out or marked.


export { MAX_XML_ELEMENTS }

export async function extractOffice(bytes: Uint8Array, entries: ZipEntry[], fileType: 'docx' | 'pptx', limits: { maxTextBytes: number; zip: ZipLimits }): Promise<string> {
  const rewriteLimits = { maxElements: MAX_XML_ELEMENTS, zip: limits.zip }
  // The parts are read beside officeparser as it reads them: a presentation's hidden shapes left out
  // (a hidden footer placeholder is no slide's footer; its charts are those of officeparser's
  // frames), a Word document's as rewritten (its charts those the rewritten main part still shows).
  const deck = fileType === 'pptx' ? withoutHiddenShapes(bytes, entries, rewriteLimits) : undefined
  const markers = rewriteMarkers()
  const { bytes: input, parts } = deck ?? rewriteDocx(bytes, entries, rewriteLimits, markers)
  const ast = await parseOffice(Buffer.from(input.buffer, input.byteOffset, input.byteLength), {
    // Always pass the type (STACK-NOTES §5); never OCR (it downloads data at run time).
    fileType,
    ocr: false,
    extractAttachments: false,
    // The zip guard already checked these; officeparser's own limits are a second fence.
    decompressionLimits: { maxUncompressedBytes: limits.zip.maxInflatedBytes, maxZipEntries: limits.zip.maxEntries, maxXmlElements: MAX_XML_ELEMENTS },
  } as Parameters<typeof parseOffice>[1])
  const layout = ast as unknown as OfficeAst
  // What officeparser does not give: charts' data, slides' facts (read from the parts themselves).
  const charts = chartBudget(limits.maxTextBytes, MAX_XML_ELEMENTS)
  if (fileType === 'pptx') {
    fillCharts(layout.content, parts, charts)
    return join(pptxLines(layout, slideFacts(parts)), limits.maxTextBytes)
  }
  return join(docxLines(layout, new WordCharts(parts, charts), new ListLabels(readNumbering(parts), readStyleNumbering(parts), markers)), limits.maxTextBytes)
}

/**
 * A workbook, XLSX or legacy XLS (BIFF in an OLE2 container), through SheetJS 0.20.3 (never
 * xlsx@0.18.5: open advisories): each cell as Excel shows it (its number format applied: a date
 * is 2024-01-15, not the serial 45306; 25%, not 0.25), which officeparser's XLSX reader does not
 * do; it also kept ~4× the memory per cell (500,000 cells: ~480 MB against ~125). Rows one per
 * line, cells tab-separated under their columns from the first one holding a value, tabs and newlines
 * inside a cell as spaces, blank rows left out. The text is counted against the cap as it grows:
 * one cell at column XFD is 16,383 tabs. What Excel does not show is not read as if it did: a
 * hidden sheet is marked "(hidden)", a very hidden one (which Excel's own menus cannot unhide) is
 * left out, and so are hidden rows and hidden columns.
 */
export function extractWorkbook(bytes: Uint8Array, maxTextBytes: number): string {
  // SheetJS formats every cell while it reads, before any cap can apply (its built-in formats
  // known only by id, 5–8 and 27–81, and text sections are applied there alone), so the formats
  // are checked first, in a read that formats nothing (refuseHugeFormats). cellNF keeps each
  // cell's format string for shownText's exceptions. cellStyles is what makes SheetJS read
  // an XLSX's hidden rows and any workbook's hidden columns (!rows, !cols); it also keeps empty
  // cells (sheetStubs) and an object per column a column record spans, which the guards count.
  const options = { type: 'array', dense: true, cellNF: true, cellFormula: false, cellHTML: false, cellStyles: true, bookVBA: false, WTF: false } as const
  refuseHugeFormats(XLSX.read(bytes, { ...options, cellStyles: false, cellText: false }))
  const workbook = XLSX.read(bytes, options)
  if (workbook.SheetNames.length === 0) throw new Error('no sheets')
  const date1904 = workbook.Workbook?.WBProps?.date1904 === true
  // By name: from an XLS, SheetJS lists the states in the order it reads the sheets' streams and
  // can skip a sheet, so the two lists need not line up. Of two sheets of one name, the later is
  // the one SheetJS keeps, its state too.
  const states = new Map((workbook.Workbook?.Sheets ?? []).map(sheet => [sheet.name, sheet.Hidden ?? 0]))
  const out: string[] = []
  let bytesSoFar = 0
  for (const name of workbook.SheetNames) {
    const state = states.get(name) ?? VISIBLE
    if (state === VERY_HIDDEN) continue
    if (out.length > 0) out.push('')
    out.push(state === VISIBLE ? `[Sheet: ${name}]` : `[Sheet: ${name} (hidden)]`)
    const sheet = workbook.Sheets[name] as (XLSX.WorkSheet & { '!data'?: Array<Array<XLSX.CellObject | undefined> | undefined> }) | undefined
    const rows = sheet?.['!data']
    if (rows === undefined) continue
    const hiddenRows = sheet?.['!rows'] ?? []
    const columns = new ShownColumns(sheet?.['!cols'] ?? [])
    // From the first column holding a value, whatever the sheet's declared range says: a
    // <dimension> that starts further right (a hand-edited or hostile file) must not hide cells.
    // Columns are counted as shown: a hidden one takes no tab.
    let first = Number.POSITIVE_INFINITY
    for (let index = 0; index < rows.length; index++) {
      const row = rows[index]
      if (row === undefined || hiddenRows[index]?.hidden) continue
      for (const column of cellColumns(row)) {
        const position = columns.position(column)
        if (position === undefined) continue
        if (position >= first) break
        if (shownText(row[column], date1904) !== '') first = position
      }
    }
    if (first === Number.POSITIVE_INFINITY) continue
    for (let index = 0; index < rows.length; index++) {
      const row = rows[index]
      if (row === undefined || hiddenRows[index]?.hidden) continue
      let line = ''
      // The column last written (none yet: before the first): a cell at `position` follows it after
      // one tab per shown column between, empty cells included.
      let written = first - 1
      for (const column of cellColumns(row)) {
        const position = columns.position(column)
        if (position === undefined || position < first) continue
        const text = shownText(row[column], date1904)
        if (text === '') continue
        const tabs = written < first ? position - first : position - written
        bytesSoFar += tabs + Buffer.byteLength(text)
        if (bytesSoFar > maxTextBytes) throw new TextCapExceeded()
        line += '\t'.repeat(tabs) + text
        written = position
      }
      if (written < first) continue
      bytesSoFar += 1
      out.push(line)
    }
  }
  return join(out, maxTextBytes)
}

/** A sheet's state (SheetJS's Hidden): very hidden is Excel's hidden-from-the-menus state, set by macros. */
const VISIBLE = 0
const VERY_HIDDEN = 2

/**
 * A sheet's columns as shown, its hidden columns taken out: the position of a column among the
 * shown ones, found by binary search in the hidden ones (a row walks only its cells, never the
 * sheet's width).
 */
class ShownColumns {
  private readonly hidden: number[] = []

  constructor(columns: Array<XLSX.ColInfo | undefined>) {
    // Object.keys: the columns described, not the holes between (the array is as long as the
    // last one). Sorted, as a crafted record's columns past 2^32 - 2 are keys but not indices.
    for (const key of Object.keys(columns)) {
      const column = Number(key)
      if (Number.isInteger(column) && columns[column]?.hidden) this.hidden.push(column)
    }
    this.hidden.sort((a, b) => a - b)
  }

  /** Where `column` shows, counting shown columns from the first; undefined when it is hidden. */
  position(column: number): number | undefined {
    let low = 0
    let high = this.hidden.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (this.hidden[middle]! < column) low = middle + 1
      else high = middle
    }
    return this.hidden[low] === column ? undefined : column - low
  }
}

/**
 * The columns of a dense row that hold a cell, in order. A row is a sparse array as long as its
 * last cell: one value at XFD makes it 16,384 long, and walking its holes (an index loop, or
 * forEach, which on Bun visits every index) cost rows × 16,384: 100,000 such rows took over 10 s.
 * Object.keys lists only the cells, integer indices ascending.
 */
function cellColumns(row: unknown[]): number[] {
  const columns: number[] = []
  for (const key of Object.keys(row)) {
    const column = Number(key)
    if (Number.isInteger(column)) columns.push(column)
  }
  return columns
}

/** A workbook format SheetJS would make huge text of (formatting every cell as it reads). */
export class FormatRefused extends Error {}

/** Refuses a workbook whose formats would make every cell's text huge while SheetJS reads it (hugeFormat). */
function refuseHugeFormats(workbook: XLSX.WorkBook): void {
  for (const code of Object.values((workbook as { SSF?: Record<string, unknown> }).SSF ?? {})) {
    if (typeof code !== 'string') continue
    const problem = hugeFormat(code)
    if (problem !== undefined) throw new FormatRefused(`the workbook declares a number format ${problem}`)
  }
}

/**
 * A spreadsheet cell as Excel shows it (SheetJS's formatted text), on one line, with three
 * exceptions for a model reading it: a date in the locale's short form (format 14, m/d/yy in
 * SheetJS, 1/15/24) is written 2024-01-15; a whole number in General keeps every digit (Excel shows
 * 4006381333931 as 4.00638E+12: a barcode or an order id would lose digits); and a date whose
 * format SheetJS cannot read (dd.mm.yyyy, refused for its dots), which it leaves as the serial, is
 * written as an ISO date, with as much of the date and time as the format shows. A time of day
 * alone (a value under 1) in a date format is Excel's day zero, 1900-01-00, as Excel shows it in
 * yyyy-mm-dd (00.01.1900 in dd.mm.yyyy): the format shows no time.
 */
function shownText(cell: XLSX.CellObject | undefined, date1904: boolean): string {
  if (cell === undefined || cell.v === undefined || cell.v === null) return ''
  // A value whose format's section for it is empty (`;;;`) is one Excel shows as nothing.
  if (typeof cell.z === 'string' && (cell.t === 'n' || cell.t === 's') && (typeof cell.v === 'number' || typeof cell.v === 'string')) {
    if (emptySection(cell.z, cell.v)) return ''
    // A format SheetJS reads as General whole, or whose section holds General: applied as Excel applies it.
    const general = generalSectionShown(cell.z, cell.v)
    if (general !== undefined) return oneLine(general)
  }
  const shown = cell.w ?? String(cell.v)
  if (cell.t !== 'n' || typeof cell.v !== 'number') return oneLine(shown)
  // No z: a built-in format SheetJS knows by id only (5–8, 27–81: currency, accounting, the East-Asian
  // locales' dates, which it shows as m/d/yy), applied in `shown`.
  const format = typeof cell.z === 'string' ? cell.z : SHORT_DATE.test(shown) ? 'm/d/yy' : SHORT_DATE_TIME.test(shown) ? 'm/d/yy h:mm' : undefined
  if (format === undefined) return oneLine(shown)
  // A date format on a value no date has (negative, past 9999): Excel shows ####, SheetJS nothing.
  if (shown === '' && XLSX.SSF.is_date(format)) return String(cell.v)
  if (format === 'General') return generalShown(cell.v)
  const negative = cell.v < 0 ? negativeShown(format, cell.v) : undefined
  if (negative !== undefined) return oneLine(negative)
  const iso = (Object.hasOwn(LOCALE_DATES, format) ? LOCALE_DATES[format] : undefined) ?? (shown === String(cell.v) && XLSX.SSF.is_date(format) ? isoDateFormat(format) : undefined)
  if (iso === undefined) return oneLine(shown)
  try {
    return XLSX.SSF.format(iso, cell.v, { date1904 })
  } catch {
    return oneLine(shown)
  }
}

const SHORT_DATE = /^\d{1,2}\/\d{1,2}\/\d{2}$/
const SHORT_DATE_TIME = /^\d{1,2}\/\d{1,2}\/\d{2} \d{1,2}:\d{2}$/

/** Excel's locale-dependent built-in date formats (14, 22), as SheetJS spells them in en-US, written unambiguously. */
const LOCALE_DATES: Readonly<Record<string, string>> = { 'm/d/yy': 'yyyy-mm-dd', 'm/d/yy h:mm': 'yyyy-mm-dd hh:mm' }

function join(lines: string[], maxTextBytes: number): string {
  const text = lines.join('\n').replace(/\n{3,}/g, '\n\n').trim()
  if (Buffer.byteLength(text) > maxTextBytes) throw new TextCapExceeded()
  return text
}
