import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { declaredText } from '../../src/documents/text'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { sniff } from '../../src/documents/sniff'
import { fixture, sheetXlsx } from './hostile'

// Content detection at its edges: magics made of ASCII letters inside real text.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }

async function refusal(bytes: Uint8Array): Promise<string> {
  const error = await extractDocument(bytes, limits).then(() => undefined, error => error)
  expect(error).toBeInstanceOf(ExtractionError)
  return (error as ExtractionError).message
}

describe('a magic found by ASCII letters at an offset, in a file that reads as text, is text', () => {
  test('"ftyp" at offset 4 and "RIFF…WEBP" in plain text are text; real ISO media and WebP are still refused by name', async () => {
    // Before: both were 400 "image or video (ISO media)" / "WebP image".
    for (const text of ['The ftyp box comes first in an MP4 file.\n', 'RIFF of WEBP images: a chunk header, then VP8 data\n']) {
      expect(await extractDocument(new TextEncoder().encode(text), limits)).toEqual({ documentType: 'text', text })
    }
    const mp4 = new Uint8Array([0, 0, 0, 0x18, ...new TextEncoder().encode('ftypisom'), 0, 0, 2, 0, ...new TextEncoder().encode('isommp41')])
    expect(await refusal(mp4)).toMatch(/image or video \(ISO media\)/)
    const webp = new Uint8Array([...new TextEncoder().encode('RIFF'), 0x24, 0x1a, 0, 0, ...new TextEncoder().encode('WEBPVP8 '), 0x18, 0x1a, 0, 0, 0x30, 0x01, 0x9d])
    expect(await refusal(webp)).toMatch(/WebP image/)
  })
})

describe('a container magic at the first byte wins over a PDF header found later', () => {
  test('an XLSX holding "%PDF-1.7" in its first KiB is read as the workbook; an OLE2 file is a candidate XLS', async () => {
    // Before: "%PDF-<digit>" anywhere in the first KiB of a binary file routed it to the PDF parser ("truncated PDF").
    const note = { name: 'customXml/item1.xml', data: new TextEncoder().encode('<note>Attach the signed copy (%PDF-1.7) to the claim</note>'), stored: true }
    const xlsx = sheetXlsx('<row r="1"><c r="A1" t="inlineStr"><is><t>kept</t></is></c></row>', { leading: [note] })
    expect(Buffer.from(xlsx).toString('latin1').indexOf('%PDF-1.7')).toBeLessThan(1024)
    expect(await extractDocument(xlsx, limits)).toEqual({ documentType: 'xlsx', text: '[Sheet: S]\nkept' })
    const ole2 = new Uint8Array(1024)
    ole2.set([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1])
    ole2.set(new TextEncoder().encode('%PDF-1.7'), 512)
    expect(sniff(ole2, limits.zip)).toEqual({ kind: 'ole2' })
    // A PDF behind a preamble that is no container's magic is still a PDF.
    const framed = new Uint8Array([...new TextEncoder().encode('PK notes\r\n'), ...(await fixture('report.pdf'))])
    expect((await extractDocument(framed, limits)).documentType).toBe('pdf')
  })
})

describe('declared text (a Messages text source)', () => {
  test('is read as it is, never sniffed, with an uploaded text file\'s line endings and text cap', () => {
    const encode = (text: string) => new TextEncoder().encode(text)
    expect(declaredText(encode('%PDF-1.7 header notes\r\n{\\rtf1}\u0000'), 1024)).toEqual({ documentType: 'text', text: '%PDF-1.7 header notes\n{\\rtf1}\u0000' })
    expect(() => declaredText(encode('x'.repeat(1025)), 1024)).toThrow(/text is longer than the 1024-byte limit/)
  })
})
