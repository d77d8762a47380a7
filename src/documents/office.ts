import * as XLSX from '@e965/xlsx'
import { parseOffice } from 'officeparser'

// Office formats to predictable text. officeparser gives an AST; we render it ourselves so the
// layout is ours: paragraphs one per line, table rows one per line with cells tab-separated,
// slides in order under "[Slide N]", sheets under "[Sheet: name]" with rows tab-separated.

type Node = { type: string; text?: string; metadata?: Record<string, unknown>; children?: Node[] }

/** A cell's text on one line: tabs and newlines inside it would break the row layout. */
function cellText(node: Node): string {
  return (node.text ?? flatten(node)).replace(/[\t\r\n]+/g, ' ').trim()
}

function flatten(node: Node): string {
  if (!node.children?.length) return node.text ?? ''
  return node.children.map(flatten).join('')
}

function rows(node: Node, out: string[]): void {
  for (const row of node.children ?? []) {
    if (row.type !== 'row') continue
    out.push((row.children ?? []).filter(cell => cell.type === 'cell').map(cellText).join('\t').replace(/\t+$/, ''))
  }
}

/**
 * A sheet's rows, each cell under its column: officeparser gives only the cells that hold a value,
 * each with its `col`, so the empty ones between are written as tabs (b under B, not under A), as
 * the XLS path's sheet_to_csv writes them; columns before the sheet's first used one are left
 * out, as there. The text is counted against the cap as it grows: one cell at column XFD is
 * 16,383 tabs.
 */
function sheetRows(sheet: Node, out: string[], maxTextBytes: number): void {
  const rows = (sheet.children ?? []).filter(row => row.type === 'row')
  let first = Number.POSITIVE_INFINITY
  for (const row of rows) for (const cell of row.children ?? []) if (cell.type === 'cell') first = Math.min(first, columnOf(cell) ?? 0)
  let bytes = 0
  for (const row of rows) {
    let line = ''
    // The column the next cell would take without a gap; the first cell needs no separator.
    let next = first
    let separator = 0
    for (const cell of row.children ?? []) {
      if (cell.type !== 'cell') continue
      const column = Math.max(columnOf(cell) ?? next, next)
      const text = cellText(cell)
      const tabs = column - next + separator
      bytes += tabs + Buffer.byteLength(text)
      if (bytes > maxTextBytes) throw new TextCapExceeded()
      line += '\t'.repeat(tabs) + text
      next = column + 1
      separator = 1
    }
    bytes += 1
    out.push(line.replace(/\t+$/, ''))
  }
}

/** The 0-based column officeparser read from a cell's reference, if any. */
function columnOf(cell: Node): number | undefined {
  const column = cell.metadata?.col
  return typeof column === 'number' && Number.isSafeInteger(column) && column >= 0 ? column : undefined
}

function render(node: Node, out: string[]): void {
  if (node.type === 'table') return rows(node, out)
  if (node.type === 'paragraph' || node.type === 'heading' || node.type === 'list') {
    // A paragraph's `text` is its runs joined; nested tables (rare) fall through to children.
    if (!node.children?.some(child => child.type === 'table')) {
      out.push(node.text ?? flatten(node))
      return
    }
  }
  if (node.children?.length) for (const child of node.children) render(child, out)
  else if (node.text) out.push(node.text)
}

/**
 * The most XML elements one document's parts may hold. officeparser's reader keeps ~1.6 KiB per
 * element (measured: 490,000 empty paragraphs, a 29 KB upload, took 831 MB and 3.4 s; its default
 * of 2,000,000 let a 111 KB upload take 3.1 GB and 16 s). A document whose text fits the 4 MiB text
 * cap holds well under this; officeparser counts before it builds anything, so a refusal is cheap.
 */
export const MAX_XML_ELEMENTS = 500_000

/** Thrown by the OOXML renderers when the text would pass the cap. */
export class TextCapExceeded extends Error {}

export async function extractOffice(bytes: Uint8Array, fileType: 'docx' | 'pptx' | 'xlsx', limits: { maxTextBytes: number; maxInflatedBytes: number; maxEntries: number }): Promise<string> {
  const ast = await parseOffice(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), {
    // Always pass the type (STACK-NOTES §5); never OCR (it downloads data at run time).
    fileType,
    ocr: false,
    extractAttachments: false,
    // The zip guard already checked these; officeparser's own limits are a second fence.
    decompressionLimits: { maxUncompressedBytes: limits.maxInflatedBytes, maxZipEntries: limits.maxEntries, maxXmlElements: MAX_XML_ELEMENTS },
  } as Parameters<typeof parseOffice>[1])
  const content = (ast as unknown as { content: Node[] }).content
  const out: string[] = []
  if (fileType === 'pptx') {
    const slides = content.filter(node => node.type === 'slide')
    slides.sort((a, b) => Number(a.metadata?.slideNumber ?? 0) - Number(b.metadata?.slideNumber ?? 0))
    slides.forEach((slide, index) => {
      if (index > 0) out.push('')
      out.push(`[Slide ${index + 1}]`)
      render(slide, out)
    })
  } else if (fileType === 'xlsx') {
    content.forEach((sheet, index) => {
      if (index > 0) out.push('')
      out.push(`[Sheet: ${String(sheet.metadata?.sheetName ?? index + 1)}]`)
      sheetRows(sheet, out, limits.maxTextBytes)
    })
  } else {
    for (const node of content) render(node, out)
  }
  return join(out, limits.maxTextBytes)
}

/** Legacy XLS (BIFF in an OLE2 container) through SheetJS 0.20.3 (never xlsx@0.18.5: open advisories). */
export function extractXls(bytes: Uint8Array, maxTextBytes: number): string {
  const workbook = XLSX.read(bytes, { type: 'array', dense: true, cellFormula: false, cellHTML: false, cellStyles: false, bookVBA: false, WTF: false })
  if (workbook.SheetNames.length === 0) throw new Error('no sheets')
  const out: string[] = []
  workbook.SheetNames.forEach((name, index) => {
    if (index > 0) out.push('')
    out.push(`[Sheet: ${name}]`)
    const sheet = workbook.Sheets[name]
    if (!sheet) return
    const csv = XLSX.utils.sheet_to_csv(sheet, { FS: '\t', RS: '\n', blankrows: false, strip: true })
    if (csv !== '') out.push(csv)
    if (Buffer.byteLength(csv) > maxTextBytes) throw new TextCapExceeded()
  })
  return join(out, maxTextBytes)
}

function join(lines: string[], maxTextBytes: number): string {
  const text = lines.join('\n').replace(/\n{3,}/g, '\n\n').trim()
  if (Buffer.byteLength(text) > maxTextBytes) throw new TextCapExceeded()
  return text
}
