import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import type { ExtractionLimits } from '../../src/documents/types'
import { readCentralDirectory } from '../../src/documents/zip-guard'
import { buildZip, fixture, sheetXlsx, type ZipSpec } from './hostile'
import { docxParts } from './ooxml'

// officeparser's unzip (fflate's streaming Unzip) walks the local headers from offset 0 and never
// reads the central directory the zip guard checks; SheetJS reads the directory its own way: an
// archive whose local entries, or whose end record, are not exactly the directory's is refused by
// the guard, before any parser runs (zip-layout.ts, readCentralDirectory).
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const encoder = new TextEncoder()
const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
const paragraph = (text: string) => `<w:p><w:r><w:t>${text}</w:t></w:r></w:p>`
const documentXml = (text: string) => encoder.encode(`<w:document ${W}><w:body>${paragraph(text)}</w:body></w:document>`)
/** A part officeparser reads text from, which no listed entry holds. */
const smuggled: ZipSpec = { name: 'word/header7.xml', data: encoder.encode(`<w:hdr ${W}>${paragraph('SMUGGLED')}</w:hdr>`) }

const outcome = (bytes: Uint8Array) => extractDocument(bytes, limits).then(result => result.text, (error: Error) => `refused: ${error.message}`)
const guard = (bytes: Uint8Array) => {
  const directory = readCentralDirectory(bytes, defaults.zip)
  return directory.ok ? 'ok' : directory.message
}
const UNLISTED = /holds entries or data its central directory does not list/

describe('real packages pass', () => {
  test('LibreOffice DOCX, XLSX and PPTX (each entry followed by a signed data descriptor) pass the guard and read as before', async () => {
    for (const name of ['report.docx', 'fidelity.docx', 'chart.docx', 'list.docx', 'sheets.xlsx', 'rounding.xlsx', 'slides.pptx', 'chart.pptx']) {
      const bytes = await fixture(name)
      expect(`${name}: ${guard(bytes)}`).toBe(`${name}: ok`)
    }
    expect(await outcome(await fixture('slides.pptx'))).toStartWith('[Slide 1]\nSlide one')
  })

  test('data descriptors written by hand, signed and unsigned, are read', async () => {
    const specs = docxParts(paragraph('Described'))
    const signed = buildZip(specs.map(spec => ({ ...spec, descriptor: 'signed' as const })))
    expect(await outcome(signed)).toBe('Described')
    // Unsigned: 12 bytes, and the next local header right after them.
    const unsigned = buildZip(specs.map((spec, index) => ({ ...spec, descriptor: index < specs.length - 1 ? ('unsigned' as const) : undefined })))
    expect(await outcome(unsigned)).toBe('Described')
  })
})

describe('local entries the directory does not list, or lists as others, are refused before any parser', () => {
  const specs = docxParts(paragraph('Listed'))

  test('an unlisted entry after the last listed one, before the directory (before: its text was read)', async () => {
    const bytes = buildZip([...specs, { ...smuggled, unlisted: true }])
    expect(guard(bytes)).toMatch(UNLISTED)
    expect(await outcome(bytes)).toMatch(UNLISTED)
  })

  test('an unlisted second word/document.xml between two listed entries (before: its text was read)', async () => {
    const bytes = buildZip([specs[0]!, { name: 'word/document.xml', data: documentXml('SMUGGLED'), unlisted: true }, ...specs.slice(1)])
    expect(guard(bytes)).toMatch(UNLISTED)
    expect(await outcome(bytes)).toMatch(UNLISTED)
  })

  test('a directory record whose local header names another part (before: read under the local name)', async () => {
    const bytes = buildZip([...specs, { ...smuggled, name: 'customXml/item1.xml', localName: smuggled.name }])
    expect(guard(bytes)).toMatch(/zip entry "customXml\/item1.xml" has a local header that does not match its central directory record/)
  })

  test('a local header declaring other sizes, or another method, than its directory record', async () => {
    const sized = buildZip(specs)
    // The first local header's uncompressed size, one more than the directory's.
    new DataView(sized.buffer).setUint32(22, new DataView(sized.buffer).getUint32(22, true) + 1, true)
    expect(guard(sized)).toMatch(/zip entry "\[Content_Types\].xml" has a local header that does not match/)
    const method = buildZip(specs)
    method[8] = 0
    expect(guard(method)).toMatch(/zip entry "\[Content_Types\].xml" has a local header that does not match/)
  })

  test("a local header inside a descriptor-terminated entry's data, where a streaming reader ends the entry (before: its text was read)", async () => {
    // fflate finds such an entry's end by the first signature after its data starts: the header
    // inside the carrier's data (deflate stored blocks keep the bytes as they are) starts an entry.
    const single = buildZip([smuggled])
    const inner = single.subarray(0, new DataView(single.buffer).getUint32(single.byteLength - 6, true))
    const carrier: ZipSpec = { name: 'customXml/item1.xml', data: Buffer.concat([encoder.encode('<x>'), inner, encoder.encode('</x>')]), level: 0, descriptor: 'signed' }
    const bytes = buildZip([...specs, carrier])
    expect(guard(bytes)).toMatch(/zip entry "customXml\/item1.xml" has a local header that does not match/)
  })

  test('bytes before the first local header (a self-extractor prefix), offsets and all moved on', () => {
    const bytes = buildZip(specs)
    // Every offset moved 16 bytes on, as a prefix moves them: no entry starts at 0.
    const prefixed = new Uint8Array(Buffer.concat([Buffer.alloc(16), bytes]))
    const view = new DataView(prefixed.buffer)
    const eocd = prefixed.byteLength - 22
    const directory = view.getUint32(eocd + 16, true) + 16
    view.setUint32(eocd + 16, directory, true)
    for (let at = directory; at < eocd; at += 46 + view.getUint16(at + 28, true)) view.setUint32(at + 42, view.getUint32(at + 42, true) + 16, true)
    expect(guard(prefixed)).toMatch(UNLISTED)
  })

  test('a stored entry with a data descriptor, whose end a streaming reader cannot find', () => {
    expect(guard(buildZip([...specs, { name: 'customXml/item1.xml', data: encoder.encode('<x/>'), stored: true, descriptor: 'signed' }]))).toMatch(/is stored with a data descriptor/)
  })

  test('an unsigned descriptor right before the directory (fflate cuts 4 bytes off its data there)', () => {
    const bytes = buildZip(specs.map((spec, index) => ({ ...spec, descriptor: index === specs.length - 1 ? ('unsigned' as const) : undefined })))
    expect(guard(bytes)).toMatch(/has a local header that does not match/)
  })

  test('a ZIP64 field in a local header (SheetJS takes its sizes over the header\'s)', () => {
    const field = Buffer.alloc(20)
    field.writeUInt16LE(0x0001, 0)
    field.writeUInt16LE(16, 2)
    expect(guard(buildZip([{ ...specs[0]!, extra: field }, ...specs.slice(1)]))).toMatch(/ZIP64/)
  })

  test('a ZIP64 field that repeats the entry\'s sizes, or holds zeros before a data descriptor, says nothing else: read', async () => {
    // Some writers add one to every entry (sizes unknown when streaming): refusing them refused real files.
    const zip64 = (original: number, compressed: number) => {
      const field = Buffer.alloc(20)
      field.writeUInt16LE(0x0001, 0)
      field.writeUInt16LE(16, 2)
      field.writeBigUInt64LE(BigInt(original), 4)
      field.writeBigUInt64LE(BigInt(compressed), 12)
      return field
    }
    const plain = buildZip(specs)
    const first = (readCentralDirectory(plain, defaults.zip) as { ok: true; entries: Array<{ uncompressedSize: number; compressedSize: number }> }).entries[0]!
    const repeated = buildZip([{ ...specs[0]!, extra: zip64(first.uncompressedSize, first.compressedSize) }, ...specs.slice(1)])
    expect(guard(repeated)).toBe('ok')
    const zeros = buildZip([{ ...specs[0]!, extra: zip64(0, 0), descriptor: 'signed' }, ...specs.slice(1)])
    expect(guard(zeros)).toBe('ok')
    expect(await outcome(zeros)).toBe(await outcome(plain))
    expect(guard(buildZip([{ ...specs[0]!, extra: zip64(first.uncompressedSize + 1, first.compressedSize) }, ...specs.slice(1)]))).toMatch(/ZIP64/)
  })

  test('a local header signature in the directory or the end record\'s comment', () => {
    const bytes = buildZip(specs)
    const comment = Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04]), Buffer.alloc(40)])
    const commented = new Uint8Array(Buffer.concat([bytes, comment]))
    new DataView(commented.buffer).setUint16(bytes.byteLength - 2, comment.byteLength, true)
    expect(guard(commented)).toMatch(UNLISTED)
  })
})

describe('the end record is read as SheetJS reads it', () => {
  /** One entry's local bytes and its directory record, as buildZip writes them. */
  function pieces(spec: ZipSpec): { local: Buffer; record: Buffer } {
    const single = Buffer.from(buildZip([spec]))
    const directory = single.readUInt32LE(single.byteLength - 6)
    return { local: single.subarray(0, directory), record: single.subarray(directory, single.byteLength - 22) }
  }

  test("a directory record past the end record's total, which SheetJS reads by its count for this disk (before: its sheet was read, never inflated or counted here)", async () => {
    // The workbook's sheet is named only by the hidden record, pointing at a local entry kept inside a stored part.
    const sheet = '<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1"><v>999</v></c></row></sheetData></worksheet>'
    const hidden = pieces({ name: 'xl/worksheets/sheet2.xml', data: encoder.encode(sheet) })
    const carrier = 'customXml/item1.xml'
    const bytes = Buffer.from(sheetXlsx('<row r="1"><c r="A1"><v>1</v></c></row>', { sheetPart: 'xl/worksheets/decoy.xml', target: 'worksheets/sheet2.xml', leading: [{ name: carrier, data: hidden.local, stored: true }] }))
    hidden.record.writeUInt32LE(30 + carrier.length, 42)
    const eocd = bytes.byteLength - 22
    const forged = Buffer.concat([bytes.subarray(0, eocd), hidden.record, bytes.subarray(eocd)])
    const end = forged.byteLength - 22
    forged.writeUInt16LE(forged.readUInt16LE(end + 10) + 1, end + 8)
    forged.writeUInt32LE(forged.readUInt32LE(end + 12) + hidden.record.byteLength, end + 12)
    expect(guard(new Uint8Array(forged))).toMatch(/end record's entry counts and size do not match its central directory/)
    expect(await outcome(new Uint8Array(forged))).not.toContain('999')
  })

  test("another end record in the comment's last bytes, where SheetJS's search from the end finds it first", () => {
    const bytes = Buffer.from(buildZip(docxParts(paragraph('Listed'))))
    const comment = Buffer.alloc(20)
    comment.writeUInt32LE(0x06054b50, 0)
    bytes.writeUInt16LE(comment.byteLength, bytes.byteLength - 2)
    expect(guard(new Uint8Array(Buffer.concat([bytes, comment])))).toMatch(/a second end record in its comment/)
  })
})
