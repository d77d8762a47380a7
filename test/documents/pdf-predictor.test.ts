import { describe, expect, test } from 'bun:test'
import { deflateSync } from 'node:zlib'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { measurePdfStreams } from '../../src/documents/pdf-streams'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { pdfWithContents } from './hostile'

// pdf.js puts a predictor stage (PredictorStream) after a Flate or LZW filter whose /DecodeParms
// is a dictionary, and every row it reads, a partial last one too, writes a whole row of
// Columns × Colors × BPC / 8 bytes: 50 bytes of Flate with a huge /Columns passed the prescan
// (which counted the Flate output only) and made pdf.js allocate a row of up to 256 MiB.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const MiB = 1024 * 1024
const OVER_CAP = /a stream in the PDF decompresses to more than 64 MiB \(a decompression bomb/
const IN_ALL = /the PDF's streams decompress to more than 256 MiB in all/
const CONTENT = Buffer.from('BT /F1 12 Tf 72 712 Td (First line) Tj ET\nBT /F1 12 Tf 72 690 Td (Second line) Tj ET\n', 'latin1')

async function refused(bytes: Uint8Array, pattern: RegExp): Promise<void> {
  const error = await extractDocument(bytes, limits).then(() => undefined, error => error)
  expect(error).toBeInstanceOf(ExtractionError)
  expect((error as ExtractionError).reason).toBe('invalid')
  expect((error as ExtractionError).message).toMatch(pattern)
}

/** `data` padded with spaces to whole rows of `columns` bytes, each row PNG-filtered with Up (type 2), as a PDF writer's /Predictor 12. */
function pngUp(data: Buffer, columns: number): Buffer {
  const padded = Buffer.concat([data, Buffer.alloc((columns - (data.length % columns)) % columns, 0x20)])
  const rows: Buffer[] = []
  for (let at = 0; at < padded.length; at += columns) {
    const row = padded.subarray(at, at + columns)
    rows.push(Buffer.from([2, ...row.map((byte, index) => (byte - (at ? padded[at - columns + index]! : 0)) & 0xff)]))
  }
  return Buffer.concat(rows)
}

/** `data` padded to whole rows, each byte less the one before it in its row: TIFF predictor 2, one 8-bit colour. */
function tiff(data: Buffer, columns: number): Buffer {
  const padded = Buffer.concat([data, Buffer.alloc((columns - (data.length % columns)) % columns, 0x20)])
  return Buffer.from(padded.map((byte, index) => (index % columns ? byte - padded[index - 1]! : byte) & 0xff))
}

describe('a Flate or LZW stream with a predictor is counted at what pdf.js predicts from it', () => {
  test('a tiny stream whose row alone passes the per-stream cap is refused', async () => {
    const tiny = deflateSync(Buffer.from('BT ET'))
    expect(tiny.length).toBeLessThan(20)
    await refused(pdfWithContents([{ data: tiny, dictionary: '/Filter /FlateDecode /DecodeParms << /Predictor 12 /Columns 100000000 >>' }]), OVER_CAP)
    // The same through the array form, TIFF's predictor, and Colors × BitsPerComponent.
    await refused(pdfWithContents([{ data: tiny, dictionary: '/Filter [/FlateDecode] /DecodeParms [<< /Predictor 2 /Columns 10000000 /Colors 4 /BitsPerComponent 16 >>]' }]), OVER_CAP)
  })

  test('a partial last row writes a whole row: 40 MiB and 3 bytes of data make two 40 MiB rows, refused', async () => {
    const data = deflateSync(Buffer.alloc(40 * MiB + 3))
    await refused(pdfWithContents([{ data, dictionary: '/Filter /FlateDecode /DecodeParms << /Predictor 15 /Columns 41943040 >>' }]), OVER_CAP)
  })

  test("rows of 32 MiB in tiny streams are charged to the document's total", async () => {
    const tiny = deflateSync(Buffer.from('BT ET'))
    const contents = Array.from({ length: 3 }, () => ({ data: tiny, dictionary: '/Filter /FlateDecode /DecodeParms << /Predictor 12 /Columns 33554432 >>' }))
    expect(await measurePdfStreams(pdfWithContents(contents))).toMatch(IN_ALL)
  })

  test('a filter given by reference with a predictor in its parameters is charged the predictor too', async () => {
    const tiny = deflateSync(Buffer.from('BT ET'))
    expect(await measurePdfStreams(pdfWithContents([{ data: tiny, dictionary: '/Filter 6 0 R /DecodeParms << /Predictor 12 /Columns 100000000 >>' }], ['/FlateDecode']))).toMatch(OVER_CAP)
  })

  test('legitimate predicted content streams still read', async () => {
    for (const dictionary of [
      '/Filter /FlateDecode /DecodeParms << /Predictor 12 /Columns 7 >>',
      '/Filter [/FlateDecode] /DecodeParms [<< /Predictor 15 /Columns 16 /Colors 1 /BitsPerComponent 8 >>]',
      // DecodeParms by reference: its row size is out of the prescan's sight, the stream is not refused for it.
      '/Filter /FlateDecode /DecodeParms 6 0 R',
    ]) {
      const columns = Number(/Columns (\d+)/.exec(dictionary)?.[1] ?? 5)
      const data = deflateSync(pngUp(CONTENT, columns))
      const text = (await extractDocument(pdfWithContents([{ data, dictionary }], ['<< /Predictor 12 /Columns 5 >>']), limits)).text
      expect({ dictionary, text }).toEqual({ dictionary, text: 'First line\nSecond line' })
    }
    const data = deflateSync(tiff(CONTENT, 9))
    const dictionary = '/Filter /FlateDecode /DecodeParms << /Predictor 2 /Columns 9 >>'
    expect((await extractDocument(pdfWithContents([{ data, dictionary }]), limits)).text).toBe('First line\nSecond line')
  })
})
