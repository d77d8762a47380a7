import * as XLSX from '@e965/xlsx'
import { deflateRawSync, deflateSync } from 'node:zlib'
import { join } from 'node:path'

// Hostile documents, built in code (small, exact, reviewable) rather than committed as blobs.

export const FIXTURES = join(import.meta.dir, '..', 'fixtures', 'documents')

export async function fixture(name: string): Promise<Uint8Array> {
  return new Uint8Array(await Bun.file(join(FIXTURES, name)).arrayBuffer())
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
  return c >>> 0
})
function crc32(bytes: Uint8Array): number {
  let crc = 0xffffffff
  for (const byte of bytes) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8)
  return (crc ^ 0xffffffff) >>> 0
}

export interface ZipSpec {
  name: string
  data: Uint8Array
  /** Override the declared uncompressed size (a lying header). */
  declaredSize?: number
  /** Store the data as it is (method 0, as `zip -0` does) rather than deflate it. */
  stored?: boolean
  /** The deflate level (1 unless given; 0 writes stored blocks, the data as it is inside the stream). */
  level?: number
  /** The sizes and CRC in a data descriptor after the data (with its signature, as LibreOffice and Info-ZIP write it, or without), none in the local header. */
  descriptor?: 'signed' | 'unsigned'
  /** A local entry the central directory does not list. */
  unlisted?: boolean
  /** The name in the local header, when it is not the directory's. */
  localName?: string
  /** The local header's extra field. */
  extra?: Uint8Array
}

/** A deflate zip of `entries` (or stored, per entry), with optional lying size fields in both headers. */
export function buildZip(entries: ZipSpec[]): Uint8Array {
  const locals: Buffer[] = []
  const centrals: Buffer[] = []
  let offset = 0
  for (const entry of entries) {
    const name = Buffer.from(entry.name)
    const localName = Buffer.from(entry.localName ?? entry.name)
    const compressed = entry.stored === true ? Buffer.from(entry.data) : deflateRawSync(entry.data, { level: entry.level ?? 1 })
    const method = entry.stored === true ? 0 : 8
    const size = entry.declaredSize ?? entry.data.byteLength
    const crc = crc32(entry.data)
    const local = Buffer.alloc(30)
    local.writeUInt32LE(0x04034b50, 0)
    local.writeUInt16LE(20, 4)
    local.writeUInt16LE(entry.descriptor ? 8 : 0, 6)
    local.writeUInt16LE(method, 8)
    if (!entry.descriptor) {
      local.writeUInt32LE(crc, 14)
      local.writeUInt32LE(compressed.byteLength, 18)
      local.writeUInt32LE(size, 22)
    }
    local.writeUInt16LE(localName.byteLength, 26)
    local.writeUInt16LE(entry.extra?.byteLength ?? 0, 28)
    const descriptor = Buffer.alloc(entry.descriptor === 'signed' ? 16 : entry.descriptor === 'unsigned' ? 12 : 0)
    if (entry.descriptor === 'signed') descriptor.writeUInt32LE(0x08074b50, 0)
    if (entry.descriptor) {
      descriptor.writeUInt32LE(crc, descriptor.byteLength - 12)
      descriptor.writeUInt32LE(compressed.byteLength, descriptor.byteLength - 8)
      descriptor.writeUInt32LE(size, descriptor.byteLength - 4)
    }
    locals.push(local, localName, Buffer.from(entry.extra ?? []), compressed, descriptor)
    const central = Buffer.alloc(46)
    central.writeUInt32LE(0x02014b50, 0)
    central.writeUInt16LE(20, 4)
    central.writeUInt16LE(20, 6)
    central.writeUInt16LE(entry.descriptor ? 8 : 0, 8)
    central.writeUInt16LE(method, 10)
    central.writeUInt32LE(crc, 16)
    central.writeUInt32LE(compressed.byteLength, 20)
    central.writeUInt32LE(size, 24)
    central.writeUInt16LE(name.byteLength, 28)
    central.writeUInt32LE(offset, 42)
    if (!entry.unlisted) centrals.push(central, name)
    offset += 30 + localName.byteLength + (entry.extra?.byteLength ?? 0) + compressed.byteLength + descriptor.byteLength
  }
  const listed = entries.filter(entry => !entry.unlisted).length
  const directory = Buffer.concat(centrals)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  end.writeUInt16LE(listed, 8)
  end.writeUInt16LE(listed, 10)
  end.writeUInt32LE(directory.byteLength, 12)
  end.writeUInt32LE(offset, 16)
  return new Uint8Array(Buffer.concat([...locals, directory, end]))
}

const CONTENT_TYPES = new TextEncoder().encode('<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>')

/** A DOCX-shaped zip whose document part inflates to `size` bytes of zeros (honest headers). */
export function honestZipBomb(size = 80 * 1024 * 1024): Uint8Array {
  return buildZip([
    { name: '[Content_Types].xml', data: CONTENT_TYPES },
    { name: 'word/document.xml', data: new Uint8Array(size) },
  ])
}

/**
 * A DOCX-shaped zip whose headers claim a tiny document part while it really inflates to
 * `size` bytes: only counting while inflating catches it.
 */
export function lyingZipBomb(size = 80 * 1024 * 1024): Uint8Array {
  return buildZip([
    { name: '[Content_Types].xml', data: CONTENT_TYPES },
    { name: 'word/document.xml', data: new Uint8Array(size), declaredSize: 1000 },
  ])
}

/** A DOCX of `count` empty paragraphs: tens of KB of zip, far more XML elements than any real document. */
export function manyElementsDocx(count: number): Uint8Array {
  const types = '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
  const document = `<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${'<w:p/>'.repeat(count)}<w:p><w:r><w:t>end</w:t></w:r></w:p></w:body></w:document>`
  const encoder = new TextEncoder()
  return buildZip([
    { name: '[Content_Types].xml', data: encoder.encode(types) },
    { name: 'word/document.xml', data: encoder.encode(document) },
  ])
}

/** A one-sheet XLSX of `rows` × `cols` one-digit cells (a few hundred KB of zip for a million cells). */
export function manyCellsXlsx(rows: number, cols: number, sheetPart = 'xl/worksheets/sheet1.xml', target = 'worksheets/sheet1.xml'): Uint8Array {
  const row = '<c t="n"><v>1</v></c>'.repeat(cols)
  const sheet: string[] = []
  for (let index = 1; index <= rows; index++) sheet.push(`<row r="${index}">${row}</row>`)
  return sheetXlsx(sheet.join(''), { sheetPart, target })
}

/**
 * A one-sheet XLSX (sheet "S") whose worksheet holds `sheetData` (its rows), after `before` (a
 * <dimension>, say). With `numFmt`, cells with `s="1"` take that number format: a code (as XML
 * attribute text: quotes as &quot;) declared as format 164, or a built-in format's id. `leading`
 * entries come first in the zip, before the package's own. `sharedStrings` is the body of the
 * workbook's shared strings part (its <si> entries), which cells with `t="s"` index.
 */
export function sheetXlsx(sheetData: string, options: { before?: string; sheetPart?: string; target?: string; numFmt?: string | number; leading?: ZipSpec[]; sharedStrings?: string } = {}): Uint8Array {
  const { before = '', sheetPart = 'xl/worksheets/sheet1.xml', target = 'worksheets/sheet1.xml', numFmt, leading = [], sharedStrings } = options
  const encoder = new TextEncoder()
  const sheet = `<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">${before}<sheetData>${sheetData}</sheetData></worksheet>`
  const rels = (relTarget: string, type: string) =>
    `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/${type}" Target="${relTarget}"/></Relationships>`
  return buildZip([
    ...leading,
    { name: '[Content_Types].xml', data: encoder.encode(`<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/${sheetPart}" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>${numFmt === undefined ? '' : '<Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>'}${sharedStrings === undefined ? '' : '<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>'}</Types>`) },
    { name: '_rels/.rels', data: encoder.encode(rels('xl/workbook.xml', 'officeDocument')) },
    { name: 'xl/workbook.xml', data: encoder.encode('<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>') },
    { name: 'xl/_rels/workbook.xml.rels', data: encoder.encode(rels(target, 'worksheet').replace('</Relationships>', `${numFmt === undefined ? '' : '<Relationship Id="rSt" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/>'}${sharedStrings === undefined ? '' : '<Relationship Id="rSs" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/>'}</Relationships>`)) },
    ...(sharedStrings === undefined ? [] : [{ name: 'xl/sharedStrings.xml', data: encoder.encode(`<?xml version="1.0"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">${sharedStrings}</sst>`) }]),
    { name: sheetPart, data: encoder.encode(sheet) },
    ...(numFmt === undefined
      ? []
      : [{
          name: 'xl/styles.xml',
          data: encoder.encode(
            `<?xml version="1.0"?><styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">${typeof numFmt === 'number' ? '' : `<numFmts count="1"><numFmt numFmtId="164" formatCode="${numFmt}"/></numFmts>`}<fonts count="1"><font/></fonts><fills count="1"><fill/></fills><borders count="1"><border/></borders><cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs><cellXfs count="2"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/><xf numFmtId="${typeof numFmt === 'number' ? numFmt : 164}" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1"/></cellXfs></styleSheet>`,
          ),
        }]),
  ])
}

/**
 * A binary workbook (XLSB, as SheetJS writes it) of a 2 × 2 sheet, with an `xl/workbook.xml`
 * beside its parts, so that it is recognised as an XLSX while SheetJS reads its binary parts (it
 * parses a part named .bin as BIFF12). With `padCells`, its sheet part gets that many more cell
 * records (BrtCellRk, 2-byte header and 8 bytes each), built as bytes: a guard that counts them
 * refuses it before any parser (a SheetJS-built grid that size held ~400 MB in the test process).
 * `records` (BIFF12 records as bytes) go at the end of its sheet part too.
 */
export function binaryCellsXlsx(padCells = 0, records = new Uint8Array(0)): Uint8Array {
  const workbook = XLSX.utils.book_new()
  XLSX.utils.book_append_sheet(workbook, XLSX.utils.aoa_to_sheet([[0, 1], [1, 2]]), 'S')
  const container = XLSX.CFB.read(new Uint8Array(XLSX.write(workbook, { type: 'array', bookType: 'xlsb' })), { type: 'array' })
  const entries: ZipSpec[] = [{ name: 'xl/workbook.xml', data: new TextEncoder().encode('<workbook/>') }]
  container.FullPaths.forEach((path: string, index: number) => {
    const file = container.FileIndex[index]!
    const name = path.replace(/^Root Entry\//, '')
    if (file.type === 2 && !name.startsWith('\u0001')) entries.push({ name, data: Uint8Array.from(file.content as ArrayLike<number>) })
  })
  const sheet = entries.find(entry => entry.name === 'xl/worksheets/sheet1.bin')!
  const pad = new Uint8Array(padCells * 10)
  for (let at = 0; at < pad.length; at += 10) pad.set([0x02, 0x08], at)
  sheet.data = Buffer.concat([sheet.data, pad, records])
  return buildZip(entries)
}

/** Many tiny entries: over the entry-count limit. */
export function manyEntriesZip(count: number): Uint8Array {
  const entries: ZipSpec[] = [{ name: '[Content_Types].xml', data: CONTENT_TYPES }, { name: 'word/document.xml', data: new Uint8Array(1) }]
  for (let index = 0; index < count; index++) entries.push({ name: `pad/${index}`, data: new Uint8Array(0) })
  return buildZip(entries)
}

/** A plain zip archive (no office parts). */
export function plainZip(): Uint8Array {
  return buildZip([{ name: 'readme.txt', data: new TextEncoder().encode('hello') }])
}

/** A small valid-looking PDF whose page dictionary nests arrays `depth` levels deep. */
export function deeplyNestedPdf(depth = 100_000): Uint8Array {
  const nested = '['.repeat(depth) + ']'.repeat(depth)
  const body = [
    '%PDF-1.4',
    '1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj',
    '2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj',
    `3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Nested ${nested} >> endobj`,
    'trailer << /Root 1 0 R >>',
    '%%EOF',
  ].join('\n')
  return new TextEncoder().encode(body)
}

/** A minimal 1x1 PNG. */
export const PNG = new Uint8Array(Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64'))

/**
 * A PDF whose page content stream nests arrays `depth` deep: the prescan skips stream bodies, so
 * this reaches pdf.js, whose content parser is iterative (checked: it reads the text around it).
 */
export function nestedContentStreamPdf(depth = 200_000): Uint8Array {
  const content = `BT /F1 12 Tf 72 712 Td (Hello) Tj ET\n${'['.repeat(depth)}${']'.repeat(depth)} TJ\n`
  const objects = [
    '1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj',
    '2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj',
    '3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >> endobj',
    `4 0 obj << /Length ${content.length} >>\nstream\n${content}endstream\nendobj`,
    '5 0 obj << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> endobj',
  ]
  return new TextEncoder().encode(`%PDF-1.4\n${objects.join('\n')}\ntrailer << /Root 1 0 R >>\n%%EOF\n`)
}

/**
 * A PDF written as iText 5 / iTextSharp / OpenPDF write every stream, its dictionary followed
 * directly by the keyword (`>>stream`), with an uncompressed grey image of `size` bytes of 0x5B
 * ("[") drawn under a line of text: the prescan must skip the image's data, not count brackets in it.
 */
export function tightStreamPdf(size = 1000): Uint8Array {
  const content = `q ${size} 0 0 1 0 700 cm /Im1 Do Q BT /F1 12 Tf 72 712 Td (Hello) Tj ET\n`
  const objects = [
    '1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj',
    '2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj',
    '3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]/Contents 4 0 R/Resources<</Font<</F1 5 0 R>>/XObject<</Im1 6 0 R>>>>>>endobj',
    `4 0 obj<</Length ${content.length}>>stream\n${content}endstream\nendobj`,
    '5 0 obj<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>endobj',
    `6 0 obj<</Type/XObject/Subtype/Image/Width ${size}/Height 1/ColorSpace/DeviceGray/BitsPerComponent 8/Length ${size}>>stream\n${'['.repeat(size)}\nendstream\nendobj`,
  ]
  return new TextEncoder().encode(`%PDF-1.4\n${objects.join('\n')}\ntrailer<</Root 1 0 R>>\n%%EOF\n`)
}

/**
 * A legacy XLS whose workbook stream carries a FILEPASS record right after its BOF, as Excel
 * writes for a password-protected file (XOR obfuscation here; SheetJS refuses every kind alike).
 */
export async function passwordProtectedXls(): Promise<Uint8Array> {
  const XLSX = await import('@e965/xlsx')
  const book = XLSX.utils.book_new()
  XLSX.utils.book_append_sheet(book, XLSX.utils.aoa_to_sheet([['secret', 1]]), 'S')
  const container = XLSX.CFB.read(new Uint8Array(XLSX.write(book, { bookType: 'biff8', type: 'array' })), { type: 'array' })
  const workbook = XLSX.CFB.find(container, 'Workbook')!
  const stream = Buffer.from(workbook.content as Uint8Array)
  const afterBof = 4 + stream.readUInt16LE(2)
  const filePass = Buffer.from([0x2f, 0x00, 0x06, 0x00, 0x00, 0x00, 0x34, 0x12, 0x78, 0x56])
  workbook.content = Buffer.concat([stream.subarray(0, afterBof), filePass, stream.subarray(afterBof)])
  workbook.size = workbook.content.length
  return new Uint8Array(XLSX.CFB.write(container, { type: 'array' }) as ArrayBuffer)
}

/**
 * A legacy XLS (BIFF8) whose first sheet holds `rows` rows of `perRow` numbers as MULRK records
 * (Excel's run of RK numbers), written into the sheet's substream before its EOF: ~6 bytes a cell,
 * so half a million cells fit a 4 MiB upload.
 */
export async function manyCellsXls(rows: number, perRow: number): Promise<Uint8Array> {
  const XLSX = await import('@e965/xlsx')
  const book = XLSX.utils.book_new()
  XLSX.utils.book_append_sheet(book, XLSX.utils.aoa_to_sheet([['head']]), 'S')
  const container = XLSX.CFB.read(new Uint8Array(XLSX.write(book, { bookType: 'biff8', type: 'array' })), { type: 'array' })
  const workbook = XLSX.CFB.find(container, 'Workbook')!
  const stream = Buffer.from(workbook.content as Uint8Array)
  // The last record is the sheet's EOF (type 0x000a, empty): the rows go in before it.
  const records: Buffer[] = []
  for (let row = 1; row <= rows; row++) {
    const record = Buffer.alloc(4 + 6 + 6 * perRow)
    record.writeUInt16LE(0x00bd, 0)
    record.writeUInt16LE(6 + 6 * perRow, 2)
    record.writeUInt16LE(row, 4)
    record.writeUInt16LE(0, 6)
    for (let column = 0; column < perRow; column++) {
      record.writeUInt16LE(0x0f, 8 + 6 * column) // XF index
      record.writeInt32LE(((row + column) << 2) | 2, 10 + 6 * column) // RK: an integer
    }
    record.writeUInt16LE(perRow - 1, 8 + 6 * perRow)
    records.push(record)
  }
  workbook.content = Buffer.concat([stream.subarray(0, stream.length - 4), ...records, stream.subarray(stream.length - 4)])
  workbook.size = workbook.content.length
  return new Uint8Array(XLSX.CFB.write(container, { type: 'array' }) as ArrayBuffer)
}

/**
 * `body` (latin1) with `spaces` spaces between its two halves, zlib-compressed without ever holding
 * the spaces whole: a gigabyte of them is ~1 MB. `brotli` compresses with Brotli instead.
 */
export async function compressedSpaces(spaces: number, body: [string, string] = ['', ''], brotli = false): Promise<Buffer> {
  const { constants, createBrotliCompress, createDeflate } = await import('node:zlib')
  const compressor = brotli ? createBrotliCompress({ params: { [constants.BROTLI_PARAM_QUALITY]: 4 } }) : createDeflate({ level: 9 })
  const parts: Buffer[] = []
  compressor.on('data', (chunk: Buffer) => parts.push(chunk))
  const ended = new Promise(resolve => compressor.on('end', resolve))
  compressor.write(Buffer.from(body[0], 'latin1'))
  const block = Buffer.alloc(1 << 20, 0x20)
  for (let left = spaces; left > 0; left -= block.length) {
    if (!compressor.write(left >= block.length ? block : block.subarray(0, left))) await new Promise(resolve => compressor.once('drain', resolve))
  }
  compressor.end(Buffer.from(body[1], 'latin1'))
  await ended
  return Buffer.concat(parts)
}

/**
 * A one-page PDF whose page shows the content streams `contents` (data written as is, latin1),
 * each with its own dictionary entries (`/Filter /FlateDecode`, say, then its /Length unless
 * `asWritten`, when the entries given are the whole dictionary), in a valid file; `extra` objects
 * follow them, numbered on.
 */
export function pdfWithContents(contents: Array<{ data: Buffer; dictionary: string; asWritten?: boolean }>, extra: string[] = []): Uint8Array {
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents [${contents.map((_, index) => `${index + 5} 0 R`).join(' ')}] /Resources << /Font << /F1 4 0 R >> >> >>`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
    ...contents.map(({ data, dictionary, asWritten }) => `<< ${dictionary}${asWritten ? '' : ` /Length ${data.length}`} >>\nstream\n${data.toString('latin1')}\nendstream`),
    ...extra,
  ]
  // pdfFile's layout, written as latin1: compressed data is bytes, not UTF-8 text.
  let body = '%PDF-1.5\n'
  const offsets = objects.map((object, index) => {
    const offset = body.length
    body += `${index + 1} 0 obj\n${object}\nendobj\n`
    return offset
  })
  const xref = body.length
  body += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map(offset => `${String(offset).padStart(10, '0')} 00000 n \n`).join('')}`
  body += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
  return new Uint8Array(Buffer.from(body, 'latin1'))
}

/** ASCII85 of `data`, with its `~>` end (no `z` shortcut). */
export function ascii85Encode(data: Buffer): string {
  let out = ''
  for (let at = 0; at < data.length; at += 4) {
    const chunk = Buffer.alloc(4)
    data.copy(chunk, 0, at, Math.min(at + 4, data.length))
    let value = chunk.readUInt32BE(0)
    const group: string[] = []
    for (let index = 0; index < 5; index++) {
      group.unshift(String.fromCharCode((value % 85) + 33))
      value = Math.floor(value / 85)
    }
    out += group.slice(0, Math.min(5, data.length - at + 1)).join('')
  }
  return `${out}~>`
}

/**
 * A PDF 1.5 whose `plain` objects are written as usual and whose `stored` ones sit in one
 * Flate-compressed object stream, read through a cross-reference stream (latin1 throughout).
 */
export function pdfWithObjectStream(plain: Array<[number, string]>, stored: Array<[number, string]>): Uint8Array {
  const numbers = [...plain, ...stored].map(([number]) => number)
  const objectStream = Math.max(...numbers) + 1
  const xrefStream = objectStream + 1
  let table = ''
  let objects = ''
  for (const [number, object] of stored) {
    table += `${number} ${objects.length} `
    objects += `${object}\n`
  }
  const data = deflateSync(Buffer.from(table + objects, 'latin1'))
  let body = '%PDF-1.5\n'
  const offsets = new Map<number, number>()
  const write = (number: number, object: string) => {
    offsets.set(number, body.length)
    body += `${number} 0 obj\n${object}\nendobj\n`
  }
  for (const [number, object] of plain) write(number, object)
  write(objectStream, `<< /Type /ObjStm /N ${stored.length} /First ${table.length} /Filter /FlateDecode /Length ${data.length} >>\nstream\n${data.toString('latin1')}\nendstream`)
  offsets.set(xrefStream, body.length)
  const rows = Array.from({ length: xrefStream + 1 }, (_, number) => {
    const row = Buffer.alloc(7)
    const index = stored.findIndex(([storedNumber]) => storedNumber === number)
    if (index >= 0) [row[0], row[5], row[6]] = [2, index >> 8, index & 0xff]
    if (index >= 0) row.writeUInt32BE(objectStream, 1)
    else if (offsets.has(number)) [row[0], row[5], row[6]] = [1, 0, 0]
    if (index < 0 && offsets.has(number)) row.writeUInt32BE(offsets.get(number)!, 1)
    return row
  })
  const xref = Buffer.concat(rows)
  body += `${xrefStream} 0 obj\n<< /Type /XRef /Size ${xrefStream + 1} /W [1 4 2] /Root 1 0 R /Length ${xref.length} >>\nstream\n${xref.toString('latin1')}\nendstream\nendobj\n`
  body += `startxref\n${offsets.get(xrefStream)}\n%%EOF\n`
  return new Uint8Array(Buffer.from(body, 'latin1'))
}
