import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { compressedSpaces, pdfWithContents } from './hostile'

// PDF stream bombs: what a stream decompresses to is counted before pdf.js builds anything.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const MiB = 1024 * 1024
const LINES: [string, string] = ['BT /F1 12 Tf 72 712 Td (First line) Tj ET\n', '\nBT /F1 12 Tf 72 690 Td (Second line) Tj ET\n']
const flate = (data: Buffer, dictionary = '/Filter /FlateDecode') => ({ data, dictionary })

async function refused(bytes: Uint8Array, pattern: RegExp): Promise<void> {
  const error = await extractDocument(bytes, limits).then(() => undefined, error => error)
  expect(error).toBeInstanceOf(ExtractionError)
  expect((error as ExtractionError).reason).toBe('invalid')
  expect((error as ExtractionError).message).toMatch(pattern)
}

describe('PDF streams are decompressed under a cap before pdf.js reads them', () => {
  test('a content stream of spaces past the per-stream cap is refused (QA: 1 MB inflating to 1 GB took pdf.js past 2 GB)', async () => {
    const bomb = pdfWithContents([flate(await compressedSpaces(80 * MiB, LINES))])
    expect(bomb.byteLength).toBeLessThan(200_000)
    await refused(bomb, /a stream in the PDF decompresses to more than 64 MiB \(a decompression bomb/)
    // The same document under the cap is read.
    const fine = pdfWithContents([flate(await compressedSpaces(MiB, LINES))])
    expect((await extractDocument(fine, limits)).text).toBe('First line\nSecond line')
  })

  test('streams each under the cap are refused past the running total for the document', async () => {
    const part = await compressedSpaces(60 * MiB)
    const contents = [flate(await compressedSpaces(0, LINES)), ...Array.from({ length: 5 }, () => flate(part))]
    await refused(pdfWithContents(contents), /the PDF's streams decompress to more than 256 MiB in all/)
  })

  test('an `endstream` inside the compressed data, or a filter name written with #-escapes, hides nothing', async () => {
    // A zlib header, a stored block holding "endstream", then the bomb's raw deflate blocks: pdf.js
    // takes the stream's extent from /Length, past the early keyword.
    const bomb = await compressedSpaces(80 * MiB, LINES)
    const hidden = Buffer.from('\nendstream\nendobj\n', 'latin1')
    const stored = Buffer.from([0x00, hidden.length, 0x00, ~hidden.length & 0xff, 0xff])
    const data = Buffer.concat([bomb.subarray(0, 2), stored, hidden, bomb.subarray(2)])
    await refused(pdfWithContents([flate(data)]), /decompresses to more than 64 MiB/)
    await refused(pdfWithContents([flate(bomb, '/Filter /Fl#61teDecode')]), /decompresses to more than 64 MiB/)
  })

  test('Brotli, and Flate behind an ASCII filter, are measured too', async () => {
    const brotli = await compressedSpaces(80 * MiB, LINES, true)
    expect(brotli.byteLength).toBeLessThan(1000)
    await refused(pdfWithContents([flate(brotli, '/Filter /BrotliDecode')]), /decompresses to more than 64 MiB/)
    const bomb = await compressedSpaces(80 * MiB, LINES)
    await refused(pdfWithContents([flate(Buffer.from(`${bomb.toString('hex')}>`), '/Filter [/ASCIIHexDecode /FlateDecode]')]), /decompresses to more than 64 MiB/)
  })

  test('a stream compressed twice over is refused, whether its filters say so or not', async () => {
    const { deflateSync } = await import('node:zlib')
    const twice = deflateSync(await compressedSpaces(MiB, LINES))
    await refused(pdfWithContents([flate(twice, '/Filter [/FlateDecode /FlateDecode]')]), /compresses a stream twice over/)
    await refused(pdfWithContents([flate(twice, '/Filter 99 0 R')]), /compresses a stream twice over/)
  })

  test('a stream with a wrong checksum is read whole, as pdf.js, which never checks it, reads it', async () => {
    const whole = await compressedSpaces(1000, LINES)
    const wrongChecksum = Buffer.concat([whole.subarray(0, whole.length - 4), Buffer.from([0, 0, 0, 0])])
    expect((await extractDocument(pdfWithContents([flate(wrongChecksum)]), limits)).text).toBe('First line\nSecond line')
  })
})

// Regression QA: pdf.js here decodes no image (maxImageSize 0), yet lossless figures were refused:
// a 6000×4000 PNG chart inflates past the per-stream cap, and raw pixels of #18191A open like a
// zlib header ("compressed twice over"). Image streams are not measured; a bomb marked as one is
// left to the pool's watchdog, as LZW streams are.
describe('image streams are not measured', () => {
  const streamObject = (dictionary: string, data: Buffer) =>
    Buffer.concat([Buffer.from(`%PDF-1.7\n1 0 obj\n<< ${dictionary} /Length ${data.byteLength} >>\nstream\n`, 'latin1'), data, Buffer.from('\nendstream\nendobj\n%%EOF\n', 'latin1')])
  const IMAGE = '/Type /XObject /Subtype /Image /Width 6000 /Height 4000 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /FlateDecode'

  test('a large lossless figure, and pixels that open like a zlib header, pass; the same data as a content stream does not', async () => {
    const { deflateSync } = await import('node:zlib')
    const { measurePdfStreams } = await import('../../src/documents/pdf-streams')
    const figure = await compressedSpaces(80 * MiB)
    expect(await measurePdfStreams(streamObject(IMAGE, figure))).toBeUndefined()
    expect(await measurePdfStreams(streamObject('/Filter /FlateDecode', figure))).toMatch(/more than 64 MiB/)
    const darkPixels = deflateSync(Buffer.alloc(3 * 800 * 500, Buffer.from([0x18, 0x19, 0x1a])))
    expect(await measurePdfStreams(streamObject(IMAGE, darkPixels))).toBeUndefined()
    expect(await measurePdfStreams(streamObject('/Filter /FlateDecode', darkPixels))).toMatch(/twice over/)
  })
})
